"""The command-line options that name the knowledge base(s) a command serves: `--kb` (one
PATH, or NAME=LOCATION repeated) and `--catalog FILE` (kb/catalog.py), shared by ask, serve,
mcp and eval."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # imported where used: `ragloop --help` stays quick
    from ragloop.core.config import Settings
    from ragloop.kb import KnowledgeBase
    from ragloop.kb.catalog import CatalogEntry
    from ragloop.kb.multi import KnowledgeBases

KbsOpt = Annotated[list[str] | None, typer.Option(
    "--kb", metavar="PATH|URL|NAME=LOCATION",
    help="Knowledge base: a folder (SQLite) or a postgresql://… URL; several as NAME=LOCATION,"
         " the option repeated \\[env RAGLOOP_KB, default ./kb].")]
CatalogOpt = Annotated[Path | None, typer.Option(
    "--catalog", metavar="FILE",
    help="A TOML file whose \\[knowledge_bases] table names several knowledge bases"
         " (NAME = \"LOCATION\", or a table with location and description).")]


class Served:
    """What `--kb`/`--catalog` ask for: one knowledge base (`single`, the old `--kb PATH`)
    or several (`entries`)."""

    def __init__(self, kb: list[str] | None, catalog: Path | None) -> None:
        from ragloop.kb.catalog import catalog_entries

        self.entries: list[CatalogEntry] | None = catalog_entries(kb, catalog)
        self.single: str | None = kb[0] if kb and self.entries is None else None

    @property
    def location(self) -> str | None:
        """The location settings are read for (ragloop.toml beside it): the one KB's, or
        the first named one's (which also holds the runs)."""
        return self.entries[0].location if self.entries else self.single

    def open(self, settings: Settings, create: bool = False
             ) -> KnowledgeBase | KnowledgeBases:
        from ragloop.kb.catalog import open_served

        return open_served(self.entries, settings, create)
