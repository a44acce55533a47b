"""`ragloop.toml`: the environment variables' settings in a file, for whoever prefers one.

Keys are the environment variables' own names (``RAGLOOP_MODEL = "anthropic:…"``). Files are read
from the working directory and from the knowledge base's folder (the folder's wins); a variable
set in the environment wins over both, and a command-line option over everything. The values
become defaults of the process environment, so every reader of a variable (settings, embedder,
server) sees the same value without knowing about the file.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from ragloop.core.config import Settings
from ragloop.core.errors import ConfigError

FILE_NAME = "ragloop.toml"
CATALOG_TABLE = "knowledge_bases"
# provider variables a user may keep beside ragloop's own (their SDKs read them)
_OTHER_NAMES = frozenset({"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"})


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's top table; one that does not parse is a ConfigError naming the file
    (a missing file: FileNotFoundError, each caller saying what it was for)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def read_config_file(path: Path) -> dict[str, str]:
    """The file's variables as strings; a file that does not parse, a table, a name that is
    not a setting (core/config.py) or provider variable, or a value the setting does not take
    is a ConfigError naming the file."""
    data = read_toml(path)
    out: dict[str, str] = {}
    fields = Settings.env_names()
    for name, value in data.items():
        if name == CATALOG_TABLE:  # several knowledge bases: read by kb/catalog.py
            continue
        if not (name in fields or name in _OTHER_NAMES):
            raise ConfigError(f"{path}: {name!r} is not a setting; keys are the environment"
                              " variables' names, e.g. RAGLOOP_MODEL or RAGLOOP_KB"
                              " (`ragloop settings` lists them)")
        if isinstance(value, dict | list):
            raise ConfigError(f"{path}: {name} must be a single value, not a table or list")
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    # each value as the environment will hold it, checked by the same model
    try:
        Settings(**{fields[n]: v for n, v in out.items() if n in fields})
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return out


def config_files(kb: str | None) -> list[Path]:
    """The files that apply, lowest precedence first: the working directory's, then the
    knowledge base folder's (`kb`: the --kb option; else RAGLOOP_KB, else the working
    directory file's RAGLOOP_KB, else ./kb). A postgresql:// knowledge base has no folder."""
    files = []
    here = Path.cwd() / FILE_NAME
    cwd_values = read_config_file(here) if here.is_file() else {}
    if here.is_file():
        files.append(here)
    location = kb or os.environ.get("RAGLOOP_KB") or cwd_values.get("RAGLOOP_KB") or "kb"
    if "://" not in location:
        in_kb = Path(location) / FILE_NAME
        if in_kb.is_file() and in_kb.resolve() != here.resolve():
            files.append(in_kb)
    return files


def apply_config_files(kb: str | None) -> list[Path]:
    """Set each file's variables as defaults of the environment (a variable already set
    stays); returns the files read."""
    files = config_files(kb)
    merged: dict[str, str] = {}
    for path in files:
        merged.update(read_config_file(path))
    for name, value in merged.items():
        os.environ.setdefault(name, value)
    return files


def catalog_table() -> tuple[Path, object] | None:
    """The working directory file's `[knowledge_bases]` table (several named knowledge
    bases, kb/catalog.py), with the file; None when there is none."""
    here = Path.cwd() / FILE_NAME
    if not here.is_file():
        return None
    data = read_toml(here)
    return (here, data[CATALOG_TABLE]) if CATALOG_TABLE in data else None
