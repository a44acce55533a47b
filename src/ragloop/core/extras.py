"""Optional extras: `ragloop[postgres]` (psycopg, pgvector) and `ragloop[eval]` (matplotlib).

A plain `pip install ragloop` has neither; what needs one checks for it first and says which
extra to install, before any work is done.
"""

from __future__ import annotations

from importlib.util import find_spec

from ragloop.core.errors import ConfigError

POSTGRES_MODULES = ("psycopg", "psycopg_pool", "pgvector")
EVAL_MODULES = ("matplotlib",)


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if find_spec(m) is None]


def require_extra(extra: str, modules: tuple[str, ...], what: str) -> None:
    """A ConfigError naming the extra when any of `modules` is not installed."""
    missing = missing_modules(modules)
    if missing:
        raise ConfigError(f"{what} needs the optional package(s) {', '.join(missing)}:"
                          f" pip install 'ragloop[{extra}]'")
