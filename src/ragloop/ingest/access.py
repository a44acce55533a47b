"""Who may read each document, from its source (issue 43.2).

The most specific word wins: the document's own `access` (Markdown front matter
`access: [hr, managers]`, or any reader's `access` field), else the nearest `.ragloop-access`
file in its folder or a folder above it, else the ingest's `--access` (the upload API's
`access`), else everyone who may use the knowledge base. The names are users and groups
(core/access.py); `everyone` opens a document to all. An access file is names separated by
commas, spaces or lines, `#` starting a comment; one that names nobody leaves what is under it
to admins only. The list is kept in the document's metadata (`access`), so it is stored by both
backends, shown by `docs`, and a change re-writes the document on the next ingest or sync.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ragloop.core.access import ACCESS_KEY, parse_names, stored_access
from ragloop.core.errors import UserError
from ragloop.core.types import ParsedDocument

ACCESS_FILE = ".ragloop-access"


class FolderAccess:
    """The access files above each file, each folder looked up once per ingest."""

    def __init__(self) -> None:
        self._folders: dict[Path, list[str] | str | None] = {}

    def for_file(self, path: Path) -> list[str] | str | None:
        """The names of the nearest access file above `path` (None: there is none; a text:
        why that file cannot be read, which fails the file rather than open it to all)."""
        return self._for_folder(path.resolve().parent)

    def _for_folder(self, folder: Path) -> list[str] | str | None:
        if folder not in self._folders:
            rule = folder / ACCESS_FILE
            found: list[str] | str | None
            if rule.is_file():
                try:
                    found = parse_names(rule.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, UserError) as exc:
                    found = f"{rule}: {exc}"
            elif folder.parent != folder:
                found = self._for_folder(folder.parent)
            else:
                found = None
            self._folders[folder] = found
        return self._folders[folder]


def with_access(doc: ParsedDocument, folder: list[str] | str | None,
                option: list[str] | None) -> ParsedDocument:
    """`doc` with its access list in its metadata (none kept when everyone may read it, so a
    knowledge base without rules is written as before). A name that is not valid, or an
    access file that cannot be read, is a UserError: the document is refused, not opened."""
    own = doc.metadata.get(ACCESS_KEY)
    if isinstance(folder, str):
        raise UserError(f"access file unreadable: {folder}")
    try:
        names = parse_names(own) if own is not None else folder if folder is not None \
            else option
    except UserError as exc:
        raise UserError(f"{doc.doc_id}: its `access` field: {exc}") from None
    stored = None if names is None else stored_access(names)
    metadata = {k: v for k, v in doc.metadata.items() if k != ACCESS_KEY}
    if stored is not None:
        metadata[ACCESS_KEY] = stored
    return doc if metadata == doc.metadata else replace(doc, metadata=metadata)


def signature(folder: list[str] | str | None, option: list[str] | None) -> str:
    """What a file's unchanged-by-stat check must also match (an edited access file or
    option re-reads the files it covers)."""
    return repr((folder, option))
