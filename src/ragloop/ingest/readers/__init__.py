"""The reader registry: one reader per suffix."""

from __future__ import annotations

from pathlib import Path

from ragloop.errors import ReaderError
from ragloop.ingest.readers.base import Reader
from ragloop.ingest.readers.beir import BeirReader, is_beir_jsonl
from ragloop.ingest.readers.html import HtmlReader
from ragloop.ingest.readers.markdown import MarkdownReader
from ragloop.ingest.readers.pdf import PdfReader
from ragloop.ingest.readers.text import TextReader
from ragloop.types import ParsedDocument

READERS: list[Reader] = [MarkdownReader(), HtmlReader(), PdfReader(), TextReader(), BeirReader()]
_BY_SUFFIX: dict[str, Reader] = {s: r for r in READERS for s in r.suffixes}
SUPPORTED_SUFFIXES = frozenset(_BY_SUFFIX)


def reader_for(path: Path) -> Reader | None:
    return _BY_SUFFIX.get(path.suffix.lower())


def read_file(path: Path, doc_id: str) -> list[ParsedDocument]:
    """Parse one file; ReaderError (with a reason a user understands) when it cannot be read."""
    reader = reader_for(path)
    if reader is None:
        raise ReaderError(f"unsupported file type {path.suffix or '(none)'}")
    if isinstance(reader, BeirReader) and not is_beir_jsonl(path):
        raise ReaderError("a .jsonl file that is not a BEIR corpus ({_id, title, text} lines)")
    return reader.read(path, doc_id)


__all__ = ["SUPPORTED_SUFFIXES", "ReaderError", "read_file", "reader_for"]
