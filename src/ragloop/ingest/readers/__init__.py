"""The reader registry: one reader per suffix (web pages by URL: readers/web.py)."""

from __future__ import annotations

from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument
from ragloop.ingest.limits import ReadLimitError, ReadLimits, check_size, reading

# The readers: a reader's file registers it (`@reader` on its class, readers/base.py), so its
# one registration is its name in this import (the modules the code below needs by name are
# loaded by their own imports).
from ragloop.ingest.readers import epub, ocr, office, pdf, tabular  # noqa: F401
from ragloop.ingest.readers.base import BY_SUFFIX, READERS, Reader
from ragloop.ingest.readers.beir import BeirReader, is_beir_jsonl, is_beir_queries
from ragloop.ingest.readers.html import HtmlReader
from ragloop.ingest.readers.markdown import MarkdownReader
from ragloop.ingest.readers.text import read_text
from ragloop.ingest.readers.visibility import hidden_text

SUPPORTED_SUFFIXES = frozenset(BY_SUFFIX)


def reader_for(path: Path | str) -> Reader | None:
    """The reader for a file's suffix, or None when the type is not supported."""
    return BY_SUFFIX.get(Path(path).suffix.lower())


def read_file(path: Path | str, doc_id: str,
              limits: ReadLimits | None = None,
              hidden: str | None = None) -> list[ParsedDocument]:
    """Parse one file; ReaderError (with a reason a user understands) when it cannot be read,
    ReadLimitError (one) when it goes past `limits` (ingest/limits.py; default: the defaults).
    `hidden`: "drop" or "keep" the text a reader of the file cannot see (Settings.hidden_text;
    None: as set around the call, else drop; readers/visibility.py).

    Text formats are decoded by readers.text.decode_bytes: BOM (UTF-8/16/32), else UTF-8,
    else cp1252, else latin-1; empty (or whitespace-only) and binary files raise ReaderError.
    """
    path = Path(path)
    reader = reader_for(path)
    if reader is None:
        raise ReaderError(f"unsupported file type {path.suffix or '(none)'}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ReaderError(f"cannot read file: {exc.strerror or exc}") from exc
    if size == 0:
        raise ReaderError("empty file")
    if isinstance(reader, BeirReader):
        if is_beir_queries(path):
            raise ReaderError("the questions of a BEIR dataset (it sits beside corpus.jsonl),"
                              " not documents; `ragloop eval` on the folder reads them")
        if not is_beir_jsonl(path):
            read_text(path)  # an empty or binary file says so first
            raise ReaderError("a .jsonl file that is not a BEIR corpus ({_id, title, text}"
                              " lines)")
    with reading(limits) as budget, hidden_text(hidden):
        if isinstance(reader, HtmlReader | MarkdownReader):
            # parsed into a tree in one library call, which nothing can count from inside
            check_size(path, budget.limits.max_member_bytes, "read_max_member_bytes")
        docs = reader.read(path, doc_id)
        # the text a reader did not count as it went (a PDF's pages, a Markdown file's)
        for doc in docs:
            if sum(len(s.text) for s in doc.sections) > budget.limits.max_text_chars:
                raise ReadLimitError(f"the text of {doc.doc_id} is too long",
                                     "read_max_text_chars", budget.limits.max_text_chars)
    return docs


__all__ = ["READERS", "SUPPORTED_SUFFIXES", "ReadLimitError", "ReadLimits", "ReaderError",
           "read_file", "reader_for"]
