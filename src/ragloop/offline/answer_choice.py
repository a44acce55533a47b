"""How well a candidate sentence answers a question, not only how many of its words it shares.

The answerer's support score (answerer.py `_score`) says whether a sentence may be stated at
all; among the sentences that may, this picks the one that answers. Four readings, each the
same for every language:

- meaning: the question's embedding against the sentence's, read in its passage (the
  embedder the knowledge base already loaded; the support score's `cos`);
- terms in context: the question's terms the sentence holds, each weighed by how rare it is
  among the kept evidence's sentences (a BM25-like idf: "rollback" in every sentence of the
  Rollback section says little about which sentence answers), a term found only in the
  sentence's section title or passage counting half (the sentence need not repeat what its
  heading says);
- something new: an answer says what the question does not; a sentence made of the
  question's own words ("See the how-to guide for the rollback option") answers nothing;
- the kind asked: a number, a date or a name, read from the question's words for that kind in
  the language data (`answer_kinds`, a handful per language) and from the sentence (a figure,
  a year or month, a name the question does not hold).

A sentence that points elsewhere ("See the how-to guide for …", the language data's
`see_words` at its start) tells where the answer is, not what it is: it leads only when
nothing else may.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from ragloop.language.text import Reading, stem, term_set
from ragloop.language.vocabulary import vocabulary
from ragloop.retrieval.languages import month_names

# The weights of the readings; chosen on the tuning sets named in benchmarks/RESULTS.md
# (hotpotqa-dev, squad-it-dev, cmrc2018-trial subsets and the hard dev split).
MEANING, TERMS, NEW, KIND = 0.45, 0.35, 0.10, 0.15
POINTER = 0.3  # taken off a sentence that points elsewhere
CONTEXT_SHARE = 0.5  # a question term only in the sentence's title or passage counts this much
NEW_TERMS_FULL = 3  # this many terms the question lacks: "says something new" in full
ADDS_SHARE = 0.25  # a second sentence must bring this share of the question's term weight
_DIGITS = re.compile(r"\d")
_YEAR = re.compile(r"(?<!\d)(1[0-9]|20)\d\d(?!\d)")


@cache
def _kind_words(code: str | None) -> dict[str, tuple[str, ...]]:
    try:
        table = vocabulary(code).table("answer_kinds")
    except KeyError:  # a language file written before the key: English's
        table = vocabulary(None).table("answer_kinds")
    return {k: tuple(v) for k, v in table.items() if not k.startswith("_")}


@cache
def _months(code: str | None) -> tuple[str, ...]:
    try:
        return month_names(code) if code else month_names()
    except KeyError:  # a language without month names: English's
        return month_names()


@cache
def _see_words(code: str | None) -> tuple[str, ...]:
    return tuple(w.casefold() for w in vocabulary(code).words("see_words"))


def points_elsewhere(sentence: str, rd: Reading) -> bool:
    """The sentence starts with one of the language's "see" words."""
    spaced = vocabulary(rd.code).spaced if rd.code else True
    low = sentence.casefold().lstrip(" ([*-")
    return any(low.startswith(w) and (not spaced or not low[len(w):len(w) + 1].isalnum())
               for w in _see_words(rd.code))


def _has_phrase(text: str, phrase: str, spaced: bool) -> bool:
    if not spaced:
        return phrase in text
    return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def asked_kind(question: str, rd: Reading) -> str | None:
    """The kind of thing the question asks for, read from its words for each kind."""
    words = _kind_words(rd.code)
    spaced = vocabulary(rd.code).spaced if rd.code else True
    low = question.casefold().strip()
    first = low.split()[0] if spaced and low.split() else ""
    for kind in ("number", "date", "name"):
        if any(_has_phrase(low, w, spaced) for w in words.get(kind, ())):
            return kind
    yes_no = words.get("yes_no", ())
    if (spaced and first in yes_no) or (not spaced and any(low.rstrip("?？").endswith(w)
                                                           for w in yes_no)):
        return "yes_no"
    return None


def holds_kind(sentence: str, question: str, kind: str | None, rd: Reading) -> bool:
    """The sentence holds something of the asked kind that the question does not."""
    if kind == "number":
        return bool(_DIGITS.search(sentence)) and not _same_digits(sentence, question)
    if kind == "date":
        low = sentence.casefold()
        return (bool(_YEAR.search(sentence)) and not _same_years(sentence, question)) or \
            any(_has_phrase(low, m, True) for m in _months(rd.code)) or \
            any(q.kind == "date" for q in rd.quantities(sentence))
    if kind == "name":
        asked = {w.casefold() for w in term_set(question)}
        return any(not {w.casefold() for w in term_set(n)} <= asked
                   for n in rd.name_spans(sentence))
    return False


def _same_digits(sentence: str, question: str) -> bool:
    return set(re.findall(r"\d+", sentence)) <= set(re.findall(r"\d+", question))


def _same_years(sentence: str, question: str) -> bool:
    return {m.group(0) for m in _YEAR.finditer(sentence)} <= \
        {m.group(0) for m in _YEAR.finditer(question)}


def idf(sentences: Sequence[str]) -> dict[str, float]:
    """Each stemmed term's inverse document frequency over `sentences`."""
    df: dict[str, int] = {}
    for s in sentences:
        for t in {stem(w) for w in term_set(s)}:
            df[t] = df.get(t, 0) + 1
    n = len(sentences)
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


@dataclass
class Choice:
    """The per-question readings shared by every candidate sentence."""

    question: str
    terms: set[str]  # the question's stemmed content terms
    weights: dict[str, float]
    kind: str | None
    rd: Reading

    @classmethod
    def of(cls, question: str, sentences: Sequence[str], rd: Reading) -> Choice:
        terms = {stem(t) for t in rd.content_terms(question)}
        table = idf(sentences)
        top = max(table.values(), default=1.0)
        return cls(question, terms, {t: table.get(t, top) for t in terms},
                   asked_kind(question, rd), rd)

    def covered(self, sentence: str) -> set[str]:
        return self.terms & {stem(w) for w in term_set(sentence)}

    def score(self, sentence: str, title: str, passage: str, meaning: float) -> float:
        """How well `sentence`, of a section titled `title` holding `passage`, answers. A
        question term in the title counts in full (the section is about it, whatever its
        sentences repeat), one elsewhere in the passage half."""
        total = sum(self.weights.values())
        have = self.covered(sentence) | self.covered(title)
        around = self.covered(passage) - have
        terms = ((sum(self.weights[t] for t in have)
                  + CONTEXT_SHARE * sum(self.weights[t] for t in around)) / total
                 if total else 0.0)
        own = {stem(w) for w in term_set(sentence)}
        new = min(1.0, len(own - self.terms) / NEW_TERMS_FULL)
        kind = float(holds_kind(sentence, self.question, self.kind, self.rd))
        pointer = float(points_elsewhere(sentence, self.rd))
        return MEANING * meaning + TERMS * terms + NEW * new + KIND * kind - POINTER * pointer

    def links(self, lead: str, title: str) -> bool:
        """The lead names what another section is titled, beyond what the question names:
        that section is the next hop ("… along with Ruprekha Banerjee" → the section
        "Ruprekha Banerjee" says where she was born)."""
        want = {stem(w) for w in self.rd.content_terms(title)}
        return bool(want) and not want <= self.terms and \
            want <= {stem(w) for w in term_set(lead)}

    def adds(self, said: str, other: str) -> bool:
        """`other` holds question terms that `said` (the chosen sentences' sections) does
        not, weighing at least ADDS_SHARE of the question: context that adds something (the
        second hop of a question), not one more word of it."""
        total = sum(self.weights.values())
        gained = (self.terms - self.covered(said)) & self.covered(other)
        return bool(gained) and sum(self.weights[t] for t in gained) >= ADDS_SHARE * total
