"""The Reader protocol: one file in, parsed documents (with sections) out."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ragloop.core.types import ParsedDocument


class Reader(Protocol):
    #: lower-case file suffixes this reader handles, e.g. (".md", ".markdown")
    suffixes: tuple[str, ...]

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        """Parse a file. Most readers return one document; a BEIR corpus.jsonl returns many.

        Raise ReaderError with a message a user understands when the file cannot be read.
        """
        ...
