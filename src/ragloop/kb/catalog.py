"""A catalog of named knowledge bases: where each is and a line saying what it holds.

Given as `--kb NAME=LOCATION` several times, as a TOML file (`--catalog FILE`), or as the
`[knowledge_bases]` table of `ragloop.toml`; a LOCATION is a folder (SQLite) or a
`postgresql://` URL. A single `--kb PATH` (no NAME=) is one knowledge base, as it always was.

A KB's description is the catalog's when it gives one, else the one stored in the KB
(`ragloop describe` or `ingest --description`), else a line drafted from its documents' titles.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragloop.core.config import Settings
from ragloop.core.config_file import CATALOG_TABLE, catalog_table, read_toml
from ragloop.core.errors import ConfigError

if TYPE_CHECKING:
    from ragloop.kb import KnowledgeBase
    from ragloop.kb.multi import KnowledgeBases

# a name the model types as a tool argument: short, no spaces, not a path or URL
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")
DESCRIPTION_META = "description"
DESCRIBED_BY_META = "description_by"  # "user" (kept) or "draft" (drafted again at ingest)
TABLE = CATALOG_TABLE
# how many titles a drafted description names
DRAFT_TITLES = 5
DRAFT_CHARS = 200


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    location: str
    description: str = ""  # "" : the KB's stored one, else drafted from its titles


def parse_kb_options(values: Sequence[str]) -> list[CatalogEntry] | None:
    """The `--kb` values as catalog entries; None when they name one knowledge base the old
    way (a single PATH or URL). A mix of both forms, a repeated name, a bad name or an empty
    location is a ConfigError saying what to write."""
    if not values:
        return None
    named = [_split(v) for v in values]
    if len(values) == 1 and named[0] is None:
        return None
    if any(n is None for n in named):
        plain = [v for v, n in zip(values, named, strict=True) if n is None]
        raise ConfigError(
            f"--kb {plain[0]!r}: with several knowledge bases each --kb is NAME=LOCATION"
            " (e.g. --kb hr=./hr-kb --kb docs=postgresql://…/docs), NAME being a letter then"
            " letters, digits, - or _")
    entries = [CatalogEntry(name, location) for name, location in named]  # type: ignore[misc]
    return _checked(entries, "--kb")


def _split(value: str) -> tuple[str, str] | None:
    """NAME=LOCATION, or None for a plain location: an existing path, or text whose part
    before '=' is a path or URL (a URL's query has its own '=')."""
    name, sep, location = value.partition("=")
    if not sep or Path(value).exists() or any(c in name for c in "/\\.:"):
        return None
    if not NAME.fullmatch(name):
        raise ConfigError(f"--kb {value!r}: {name!r} is not a knowledge base name (a letter,"
                          " then letters, digits, - or _; at most 40)")
    if not location.strip():
        raise ConfigError(f"--kb {value!r}: no location after {name}= (a folder or a"
                          " postgresql:// URL)")
    return name, location.strip()


def _checked(entries: list[CatalogEntry], where: str) -> list[CatalogEntry]:
    seen: set[str] = set()
    for e in entries:
        if e.name in seen:
            raise ConfigError(f"{where}: the knowledge base name {e.name!r} is given twice")
        seen.add(e.name)
    if not entries:
        raise ConfigError(f"{where}: no knowledge bases listed")
    return entries


def catalog_from_table(table: Any, where: str, base: Path | None = None) -> list[CatalogEntry]:
    """Entries of a `[knowledge_bases]` table: `NAME = "LOCATION"` or
    `[knowledge_bases.NAME]` with `location` and an optional `description`. Relative
    folders are read from `base` (the file's folder)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{TABLE}] must be a table of NAME = LOCATION")
    entries = []
    for name, value in table.items():
        if not NAME.fullmatch(name):
            raise ConfigError(f"{where}: {name!r} is not a knowledge base name (a letter, then"
                              " letters, digits, - or _)")
        if isinstance(value, str):
            location, description = value, ""
        elif isinstance(value, dict):
            unknown = set(value) - {"location", "description"}
            if unknown or not isinstance(value.get("location"), str):
                raise ConfigError(f"{where}: [{TABLE}.{name}] needs location = \"folder or"
                                  " postgresql:// URL\" and may have description = \"…\";"
                                  f" found {sorted(value)}")
            location, description = value["location"], str(value.get("description", ""))
        else:
            raise ConfigError(f"{where}: {TABLE}.{name} must be a location string or a table")
        if not location.strip():
            raise ConfigError(f"{where}: {TABLE}.{name} has an empty location")
        if base is not None and "://" not in location and not Path(location).is_absolute():
            location = str(base / location)
        entries.append(CatalogEntry(name, location.strip(), " ".join(description.split())))
    return _checked(entries, where)


def read_catalog(path: str | Path) -> list[CatalogEntry]:
    """A catalog file: TOML whose `[knowledge_bases]` table lists them (see above)."""
    path = Path(path)
    try:
        data = read_toml(path)
    except FileNotFoundError:
        raise ConfigError(f"--catalog {path}: no such file") from None
    if TABLE not in data:
        raise ConfigError(f"{path}: no [{TABLE}] table (write NAME = \"LOCATION\" lines"
                          f" under [{TABLE}])")
    return catalog_from_table(data[TABLE], str(path), path.parent)


def catalog_entries(kb: Sequence[str] | None, catalog: str | Path | None = None
                    ) -> list[CatalogEntry] | None:
    """The knowledge bases a command serves: `--catalog FILE`'s, then the `--kb NAME=LOCATION`
    ones; with neither, the working directory's ragloop.toml `[knowledge_bases]`. None: one
    knowledge base, the old way (`--kb PATH`, RAGLOOP_KB or ./kb)."""
    entries = read_catalog(catalog) if catalog else []
    named = parse_kb_options(kb or [])
    if named is None and kb and entries:
        raise ConfigError("--catalog names the knowledge bases: add more with --kb"
                          " NAME=LOCATION, not a plain --kb PATH")
    entries += named or []
    if not entries and not kb:
        found = catalog_table()
        if found is not None:
            path, table = found
            entries = catalog_from_table(table, str(path), path.parent)
    return _checked(entries, "--kb/--catalog") if entries else None


def draft_description(kb: KnowledgeBase) -> str:
    """A line drafted from the KB's documents' titles (what `ingest` stores when the user
    wrote none)."""
    docs = kb.documents()
    if not docs:
        return "empty"
    titles = list(dict.fromkeys(d.title.strip() for d in docs if d.title.strip()))
    line = "; ".join(titles[:DRAFT_TITLES])
    if len(line) > DRAFT_CHARS:
        line = line[:DRAFT_CHARS].rsplit(" ", 1)[0] + "…"
    more = len(docs) - min(len(titles), DRAFT_TITLES)
    return f"{len(docs)} documents, e.g. {line}" + (f" and {more} more" if more > 0 else "")


def describe(kb: KnowledgeBase, description: str | None = None, by_user: bool = True) -> str:
    """Store `description` as the KB's line; None: keep a line the user wrote, else draft
    one from the documents' titles again (after an ingest changed them). Returns the line."""
    if description is None:
        stored = kb.store.get_meta(DESCRIPTION_META)
        if stored and kb.store.get_meta(DESCRIBED_BY_META) == "user":
            return stored
        description, by_user = draft_description(kb), False
    line = " ".join(description.split())
    if not line:
        raise ConfigError("the description is empty: write one line saying what the"
                          " knowledge base holds")
    kb.store.set_meta(DESCRIPTION_META, line)
    kb.store.set_meta(DESCRIBED_BY_META, "user" if by_user else "draft")
    return line


def check_catalog(entries: Sequence[CatalogEntry]) -> None:
    """Every location holds a knowledge base (before a server starts): else a ConfigError
    naming the KB."""
    from ragloop.storage.backend import open_backend

    for e in entries:
        try:
            open_backend(e.location, create=False).close()
        except Exception as exc:
            raise ConfigError(f"knowledge base {e.name!r} ({e.location}): {exc}") from exc


def open_catalog(entries: Sequence[CatalogEntry], settings: Settings | None = None,
                 create: bool = False) -> KnowledgeBases:
    """Open every knowledge base of the catalog (closing those opened when one fails)."""
    from ragloop.kb import KnowledgeBase
    from ragloop.kb.multi import KnowledgeBases

    settings = settings or Settings.from_env()
    opened: dict[str, KnowledgeBase] = {}
    descriptions: dict[str, str] = {}
    try:
        for e in entries:
            try:
                kb = KnowledgeBase.open(e.location, settings.with_(kb=e.location),
                                        create=create)
            except Exception as exc:
                raise ConfigError(f"knowledge base {e.name!r} ({e.location}): {exc}") from exc
            opened[e.name] = kb
            descriptions[e.name] = (e.description or kb.store.get_meta(DESCRIPTION_META)
                                    or draft_description(kb))
    except BaseException:
        for kb in opened.values():
            kb.close()
        raise
    return KnowledgeBases(opened, descriptions)


def open_served(entries: Sequence[CatalogEntry] | None, settings: Settings,
                create: bool = False) -> KnowledgeBase | KnowledgeBases:
    """The catalog's knowledge bases served as one, or with no catalog the one at
    settings.kb (what `--kb`/`--catalog` name)."""
    from ragloop.kb import KnowledgeBase

    if entries:
        return open_catalog(entries, settings, create=create)
    return KnowledgeBase.open(settings.kb, settings, create=create)
