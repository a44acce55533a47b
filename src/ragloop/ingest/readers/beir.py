"""A BEIR corpus.jsonl: each line {_id, title, text} is one document whose doc_id is `_id`."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.core.unicode import clean_text, is_text
from ragloop.ingest.readers.base import reader
from ragloop.ingest.readers.text import read_text

log = logging.getLogger(__name__)


def is_beir_jsonl(path: Path, probe_lines: int = 5) -> bool:
    """A file named corpus.jsonl, or a .jsonl whose first lines include an {_id, text} one."""
    if path.name == "corpus.jsonl":
        return True
    try:
        with path.open("rb") as f:
            for _ in range(probe_lines):
                line = f.readline()
                if not line:
                    break
                try:
                    row = json.loads(line.decode("utf-8-sig"))
                except ValueError:
                    continue
                if isinstance(row, dict) and "_id" in row and "text" in row:
                    return True
    except OSError:
        return False
    return False


def is_beir_queries(path: Path) -> bool:
    """A BEIR dataset's queries.jsonl (beside its corpus.jsonl): {_id, text} lines like a
    corpus, but they are the questions, which must not become documents of the KB they test."""
    return path.name == "queries.jsonl" and (path.parent / "corpus.jsonl").is_file()


@reader
class BeirReader:
    """Malformed lines are skipped (count in `last_skipped`, and a warning in the log)."""

    suffixes: tuple[str, ...] = (".jsonl",)
    mime = "application/x-beir+json"
    last_skipped = 0

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        docs: list[ParsedDocument] = []
        bad = 0
        for line in read_text(path).split("\n"):  # not splitlines: U+2028 may be in text
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or row.get("_id") in (None, ""):
                    raise ValueError("no _id")
                _id, text = str(row["_id"]), clean_text(row.get("text") or "").strip()
                if not is_text(_id):  # a lone surrogate ("\\ud83d"): no storable doc_id
                    raise ValueError("_id is not valid Unicode")
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            title = clean_text(row.get("title") or "").strip()
            if not text and not title:
                bad += 1
                continue
            docs.append(ParsedDocument(
                doc_id=_id, title=title or _id, source=f"{path}#{_id}",
                sections=[SectionText("0", (title,) if title else (), text or title)],
                mime="application/x-beir+json"))
        self.last_skipped = bad
        if bad:
            log.warning("%s: %d malformed line(s) skipped", path, bad)
        if not docs:
            raise ReaderError(f"no BEIR lines ({{_id, title, text}}) could be read ({bad} bad)")
        return docs
