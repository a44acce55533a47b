"""The support check of an answer's citations, after the mechanical one (agent/evidence.py).

Every cited claim is checked against the passage it cites: offline always (language/support.py:
figures, codes and names of the claim in the passage; its meaning close, in the knowledge
base's embedder), and by the model in one batched call when one is configured (its verdict
decides; an unreadable reply keeps the citations and marks them unchecked). A citation judged
unsupported is taken out of the answer text and reported as `{n, sentence}`. The offline
verdicts are kept for the eval (citation precision, answers whose every claim is supported)
whichever decided.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragloop.agent.citation_judge import LLMSupportJudge
from ragloop.agent.evidence import GONE, tidy_removed
from ragloop.core.decisions import Evidence
from ragloop.core.script import ends_question
from ragloop.core.types import Usage
from ragloop.language.support import (
    CITATION,
    Claim,
    Passage,
    SupportChecker,
    answer_sentences,
    claims,
)
from ragloop.language.text import Reading
from ragloop.language.vocabulary import Vocabulary


@dataclass
class SupportOutcome:
    text: str  # the answer with unsupported citations taken out
    unsupported: list[dict[str, Any]] = field(default_factory=list)  # {n, sentence}
    unchecked: bool = False  # the model's reply could not be read: citations kept unjudged
    summary: dict[str, Any] = field(default_factory=dict)  # offline figures for the eval


def uncited_claims(text: str, words: Vocabulary, rd: Reading) -> int:
    """Sentences of the answer that state something but cite nothing (a question, such as the
    part an offline answer could not answer, quoted, states nothing; nor does a sentence
    saying what the knowledge base lacks: `words.not_claims`), read in `rd`'s language."""
    n = 0
    for sentence in answer_sentences(text, rd):
        low = sentence.casefold()
        if CITATION.search(sentence) or any(m in low for m in words.not_claims):
            continue
        if low.startswith("note:") or ends_question(low) \
                or not rd.content_words(CITATION.sub(" ", sentence)):
            continue
        n += 1
    return n


class CitationCheck:
    """The run template's support step, after the mechanical check of the citations."""

    def __init__(self, checker: SupportChecker, judge: LLMSupportJudge | None = None,
                 *, words: Vocabulary) -> None:
        """`words`: the knowledge base language's (what a decline says, `Vocabulary`)."""
        self.checker = checker
        self.judge = judge
        self.words = words

    @property
    def usage(self) -> Usage:
        return self.judge.usage if self.judge is not None else Usage()

    def __call__(self, text: str, evidence: Callable[[int], Evidence | None],
                 labels: Sequence[str] = ()) -> SupportOutcome:
        """`labels`: the run's sub-questions (the extractive answer's part heads)."""
        found = [c for c in claims(text, self.checker.reading, labels)
                 if not any(m in c.sentence.casefold() for m in self.words.says_missing)]
        passages: dict[int, Passage] = {}
        for claim in found:
            for n in claim.cited:
                ev = evidence(n)
                if ev is not None:
                    passages[n] = Passage(ev.text, f"{ev.doc_id} {ev.section_title}")
        offline = self.checker.check_claims(found, passages)
        verdict: dict[tuple[Claim, int], bool | None] = {(v.claim, v.n): v.supported
                                                         for v in offline}
        unchecked = False
        if self.judge is not None and offline:
            said = self.judge.judge([(v.claim.text, passages[v.n].text) for v in offline])
            unchecked = any(s is None for s in said)
            verdict = {(v.claim, v.n): s for v, s in zip(offline, said, strict=True)}
        drop = {key for key, ok in verdict.items() if ok is False}
        out = SupportOutcome(text=_remove(text, claims(text, self.checker.reading, labels),
                                          found, drop),
                             unchecked=unchecked)
        seen: set[tuple[int, str]] = set()
        for claim, n in drop:
            if (n, claim.sentence) not in seen:
                seen.add((n, claim.sentence))
                out.unsupported.append({"n": n, "sentence": claim.sentence})
        out.unsupported.sort(key=lambda u: (text.find(u["sentence"][:40]), u["n"]))
        cited_ok: dict[str, bool] = {}
        for v in offline:
            cited_ok[v.claim.sentence] = cited_ok.get(v.claim.sentence, True) and v.supported
        uncited = uncited_claims(text, self.words, self.checker.reading)
        out.summary = {
            "checked": len(offline), "supported": sum(v.supported for v in offline),
            "claims": len(cited_ok) + uncited, "uncited_claims": uncited,
            "all_supported": bool(cited_ok) and not uncited and all(cited_ok.values()),
        }
        return out


def _remove(text: str, every: list[Claim], found: list[Claim],
            drop: set[tuple[Claim, int]]) -> str:
    """`text` without the [n] markers of dropped (claim, n) pairs; markers walk in order."""
    if not drop:
        return text
    plan: list[bool] = []  # per marker of the text, in order: remove it?
    kept = set(found)
    for claim in every:
        plan += [claim in kept and (claim, n) in drop for n in claim.marked]
    index = iter(range(len(plan)))

    def replace(m: re.Match[str]) -> str:
        i = next(index, None)
        return GONE if i is not None and plan[i] else m.group(0)

    # spacing tidied where a marker went only (a code span's spaces are the text's own)
    return tidy_removed(CITATION.sub(replace, text))
