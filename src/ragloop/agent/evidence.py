"""Numbered evidence and the mechanical check of the citations an answer makes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ragloop.core.decisions import Evidence
from ragloop.core.types import Hit, SectionInfo

# [3], [3, 5], [3][5], [3-4] are all citations of evidence numbers.
_CITATION = re.compile(r"\[(\d+(?:\s*[,;–-]\s*\d+)*)\]")


class Ledger:
    """Evidence numbered in the order it entered the run; the same chunk keeps its number."""

    def __init__(self) -> None:
        self.items: list[Evidence] = []
        self._by_key: dict[tuple[str, ...], int] = {}

    def add_hit(self, hit: Hit, step: int, sub_question: int = 0,
                confirmed: bool = True) -> int:
        return self._add(("chunk", hit.doc_id, str(hit.chunk_id)), hit.doc_id, hit.section,
                         hit.section_title, hit.text, step, sub_question, confirmed, hit.kb)

    def add_section(self, s: SectionInfo, step: int, sub_question: int = 0) -> int:
        return self._add(("section", s.doc_id, s.section), s.doc_id, s.section, s.title,
                         s.text, step, sub_question, kb=s.kb)

    def _add(self, key: tuple[str, ...], doc_id: str, section: str, title: str,
             text: str, step: int, sub_question: int, confirmed: bool = True,
             kb: str = "") -> int:
        # doc ids may repeat across knowledge bases: the KB is part of the key
        key = (*key, kb) if kb else key
        if key in self._by_key:
            return self._by_key[key]
        n = len(self.items) + 1
        self.items.append(Evidence(n=n, doc_id=doc_id, section=section, section_title=title,
                                   text=text, step=step, sub_question=sub_question,
                                   confirmed=confirmed, kb=kb))
        self._by_key[key] = n
        return n

    def has_section(self, doc_id: str, section: str) -> bool:
        return ("section", doc_id, section) in self._by_key

    def get(self, n: int) -> Evidence | None:
        return self.items[n - 1] if 1 <= n <= len(self.items) else None


@dataclass
class CheckedAnswer:
    text: str
    citations: list[dict[str, object]] = field(default_factory=list)  # {n, doc_id, section}
    invalid: list[int] = field(default_factory=list)  # cited numbers with no evidence: removed
    # citations whose passage does not support their sentence: removed, {n, sentence}
    unsupported: list[dict[str, Any]] = field(default_factory=list)
    unchecked: bool = False  # the model's support verdict was unreadable: citations kept
    support: dict[str, Any] | None = None  # the offline support figures (the eval's)


def _numbers(group: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", group):
        bounds = re.split(r"\s*[–-]\s*", part)
        if len(bounds) == 2 and int(bounds[1]) >= int(bounds[0]) and \
                int(bounds[1]) - int(bounds[0]) < 20:
            out.extend(range(int(bounds[0]), int(bounds[1]) + 1))
        else:
            out.extend(int(b) for b in bounds)
    return out


# Stands where a removed [n] marker stood, until `tidy_removed` takes it out.
GONE = "\x00"


def tidy_removed(text: str) -> str:
    """`text` with the places of removed markers (GONE) taken out, and the spacing tidied at
    those places only: "claim [9]." → "claim.", "a [9] b" → "a b". The rest of the text keeps
    its spacing: a space before punctuation elsewhere is the text's own ("call the .invoke()
    method", inline code whose backticks the reader dropped; taking it out changed the answer,
    and `/v1` then sent it twice, issue 41.5)."""
    text = re.sub(rf"[ \t]*{GONE}+[ \t]*(?=[.,;:。])", "", text)
    text = re.sub(rf"([ \t]){GONE}+[ \t]*", r"\1", text)
    return text.replace(GONE, "")


def check_citations(text: str, ledger: Ledger) -> CheckedAnswer:
    """Keep citations that name confirmed evidence; drop (and report) the others: a number
    the ledger does not hold, or a passage the grader did not keep (an unconfirmed nearest
    or single-shot passage is listed beside an answer, never cited). Whether each passage
    supports its sentence is the run template's next step (agent/citations.py)."""
    invalid: list[int] = []
    used: list[int] = []

    def replace(match: re.Match[str]) -> str:
        good = []
        for n in _numbers(match.group(1)):
            found = ledger.get(n)
            if found is None or not found.confirmed:
                invalid.append(n)
            else:
                good.append(n)
                if n not in used:
                    used.append(n)
        return "".join(f"[{n}]" for n in dict.fromkeys(good)) or GONE

    cleaned = tidy_removed(_CITATION.sub(replace, text))
    citations = []
    for n in used:
        ev = ledger.get(n)
        assert ev is not None
        cited: dict[str, object] = {"n": n, "doc_id": ev.doc_id, "section": ev.section}
        if ev.kb:  # several knowledge bases: the citation names its own
            cited["kb"] = ev.kb
        citations.append(cited)
    return CheckedAnswer(text=cleaned, citations=citations, invalid=sorted(set(invalid)))
