"""A BEIR corpus.jsonl: each line {_id, title, text} is one document whose doc_id is `_id`."""

from __future__ import annotations

import json
from pathlib import Path

from ragloop.errors import ReaderError
from ragloop.ingest.readers.text import read_text
from ragloop.types import ParsedDocument, SectionText


def is_beir_jsonl(path: Path) -> bool:
    if path.name == "corpus.jsonl":
        return True
    try:
        with path.open("rb") as f:
            first = json.loads(f.readline() or b"{}")
    except (OSError, ValueError):
        return False
    return isinstance(first, dict) and "_id" in first and "text" in first


class BeirReader:
    suffixes: tuple[str, ...] = (".jsonl",)

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        docs: list[ParsedDocument] = []
        bad = 0
        for line in read_text(path).splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                _id, text = str(row["_id"]), str(row.get("text") or "").strip()
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            title = str(row.get("title") or "").strip()
            if not text and not title:
                bad += 1
                continue
            docs.append(ParsedDocument(
                doc_id=_id, title=title or _id, source=f"{path}#{_id}",
                sections=[SectionText("0", (title,) if title else (), text or title)],
                mime="application/x-beir+json"))
        if not docs:
            raise ReaderError(f"no BEIR lines ({{_id, title, text}}) could be read ({bad} bad)")
        return docs
