"""What every `ragloop` command module shares: the help-flag command classes, the consoles,
the --kb and --json options, JSON output, and the settings and storage of a --kb."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from ragloop.apps.terminal import json_visible
from ragloop.core.config import Settings
from ragloop.core.config_file import apply_config_files

if TYPE_CHECKING:
    from ragloop.storage.protocols import Backend


class _Command(TyperCommand):
    """--help is a flag: no `<bool>` beside it (typer shows each option's type)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _Group(TyperGroup, _Command):
    pass


# In help text a "[…]" is Rich markup and vanishes ("[env RAGLOOP_KB]" showed as nothing):
# the environment hint is escaped. Flags get an empty metavar (no `<bool>`).
# Data (titles, questions, chunk text, file names) is printed escaped or as Text, and no
# `:name:` in it turns into an emoji: a `[/]` in a title must not break `ragloop docs`.
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, emoji=False)


def env_hint(name: str, default: str | None = None) -> str:
    """" [env NAME, default D]" with the bracket escaped for Rich."""
    return f" \\[env {name}{f', default {default}' if default else ''}]"


KbOpt = Annotated[str | None, typer.Option(
    "--kb", metavar="PATH|URL", help="Knowledge base: a folder (SQLite) or a postgresql://… URL."
    + env_hint("RAGLOOP_KB", "./kb"))]
JsonOpt = Annotated[bool, typer.Option("--json", metavar="", help="Print JSON instead of text.")]


def settings_for(kb: str | Path | None, **changes: object) -> Settings:
    """Options over the environment over ragloop.toml files (core/config_file.py)."""
    apply_config_files(str(kb) if kb else None)
    return Settings.from_env().with_(kb=str(kb) if kb else None, **changes)


def emit_json(obj: object) -> None:
    sys.stdout.write(json_visible(json.dumps(obj, ensure_ascii=False, indent=2)) + "\n")


def open_backend(kb: str | None) -> Backend:
    """The storage of an existing knowledge base (its runs are read without its indexes)."""
    from ragloop.storage.backend import open_backend as open_at

    return open_at(settings_for(kb).kb, create=False)
