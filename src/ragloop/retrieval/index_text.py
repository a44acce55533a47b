"""What full-text search indexes for a chunk (one definition for every store and the
offline grader, so BM25 scores the same text everywhere)."""

from __future__ import annotations

from collections.abc import Iterable


def index_text(doc_title: str, title_path: Iterable[str], text: str) -> str:
    """What BM25 sees for a chunk: its document and section titles, then its text."""
    heads = [doc_title, *title_path]
    return " \n".join([*dict.fromkeys(h for h in heads if h), text])
