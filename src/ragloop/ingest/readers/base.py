"""The Reader protocol: one file in, parsed documents (with sections) out."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from ragloop.core.types import ParsedDocument


class Reader(Protocol):
    #: lower-case file suffixes this reader handles, e.g. (".md", ".markdown")
    suffixes: tuple[str, ...]

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        """Parse a file. Most readers return one document; a BEIR corpus.jsonl returns many.

        Raise ReaderError with a message a user understands when the file cannot be read.
        """
        ...


# Every reader, in the order their files were loaded, and the reader of each suffix: filled by
# `@reader` on each reader class, so a reader's one registration is the import of its file
# (ingest/readers/__init__.py).
READERS: list[Reader] = []
BY_SUFFIX: dict[str, Reader] = {}

R = TypeVar("R", bound=type)


def reader(cls: R) -> R:
    """Class decorator: register an instance of the reader class for its suffixes; a suffix
    that already has a reader is an error (which of the two would read it is not a guess)."""
    made = cls()
    taken = [s for s in made.suffixes if s in BY_SUFFIX]
    if taken:
        raise ValueError(f"{cls.__name__}: {', '.join(taken)} already read by"
                         f" {type(BY_SUFFIX[taken[0]]).__name__}")
    READERS.append(made)
    BY_SUFFIX.update(dict.fromkeys(made.suffixes, made))
    return cls
