"""The offline clarifier: ask the user back when the evidence a question found splits into
groups that answer it differently, instead of guessing one or answering all of them.

Decided from what retrieval returns, not from the question's wording (issue 40, point 5),
the same for every language:
- the kept hits are grouped by document; a group's strength is its best grade score;
- the candidate groups are those of comparable strength: within COMPARABLE of the best one
  (no group dominating);
- they must be variants of one kind of thing, told apart by a name: their titles share
  words (SHARED of the shorter title at least) and each has words the others lack; titles
  that share nothing are separate topics a question happened to touch, not readings;
- the question must not pin a group: when it holds a word that only some groups' titles
  have (by stem), it chose those (one, or several to compare) and is answered.
The options are the groups' distinguishing title words (their codes when they have any:
words with a digit), else their titles.

Pure: the question, the kept hits and the knowledge base's vocabulary in, a
`Clarification` or None out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragloop.core.conversation import Clarification
from ragloop.core.types import Hit
from ragloop.language.text import ENGLISH_READING, Reading, stem, words
from ragloop.language.vocabulary import Vocabulary

MIN_OPTIONS = 2
MAX_OPTIONS = 5
# A group is a candidate reading when its best score is at least this share of the best.
COMPARABLE = 0.75
# Two titles name variants of one kind when this share of the shorter one's words is shared.
SHARED = 0.5
# An option longer than this many words is no name to choose from: the full title is shown.
MAX_NAME_WORDS = 4


@dataclass(frozen=True)
class _Group:
    doc_id: str
    title: str
    stems: frozenset[str]
    best: float


def _groups(kept: Sequence[Hit]) -> list[_Group]:
    best: dict[str, _Group] = {}
    for h in kept:
        score = h.grade_score if h.grade_score is not None else h.score
        g = best.get(h.doc_id)
        if g is None or score > g.best:
            title = h.doc_title or h.doc_id
            best[h.doc_id] = _Group(h.doc_id, title,
                                    frozenset(stem(w.lower()) for w in words(title)), score)
    return sorted(best.values(), key=lambda g: -g.best)


def _label(g: _Group, common: frozenset[str]) -> str:
    differ = [w for w in words(g.title) if stem(w.lower()) not in common]
    # a code (a word with a digit: S200, Q3) names a variant on its own, in any language
    coded = [w for w in differ if any(c.isdigit() for c in w)]
    differ = coded or differ
    return " ".join(differ) if 0 < len(differ) <= MAX_NAME_WORDS else g.title


def _join(options: Sequence[str], words_: Vocabulary) -> str:
    if len(options) == 1:
        return options[0]
    glue = " " if words_.spaced else ""
    return ", ".join(options[:-1]) + f"{glue}{words_.text('clarify.or')}{glue}" + options[-1]


def clarify(question: str, kept: Sequence[Hit], words_: Vocabulary,
            rd: Reading = ENGLISH_READING) -> Clarification | None:
    """A clarifying question when `kept` (the graded evidence of `question`) splits into
    groups of comparable strength that are variants of one kind the question does not
    choose between; None otherwise."""
    del rd  # one method for every language: nothing language-specific is read
    groups = _groups(kept)
    if len(groups) < MIN_OPTIONS or groups[0].best <= 0:
        return None
    top = groups[0]
    strong = [g for g in groups if g.best >= COMPARABLE * top.best]
    kin = [g for g in strong if g is top or (
        g.stems != top.stems
        and len(g.stems & top.stems) >= SHARED * min(len(g.stems), len(top.stems)))]
    if len(kin) < MIN_OPTIONS:
        return None
    common = frozenset.intersection(*(g.stems for g in kin))
    q = {stem(w.lower()) for w in words(question)}
    if any(q & (g.stems - common) for g in kin):
        return None  # the question names a variant (or several, to compare): it chose
    options: dict[str, list[str]] = {}
    for g in kin[:MAX_OPTIONS]:
        options.setdefault(_label(g, common), []).append(g.doc_id)
    if len(options) < MIN_OPTIONS:
        return None
    names = list(options)
    return Clarification(
        question=words_.text("clarify.question").format(options=_join(names, words_)),
        options=tuple(names),
        reason=(f"the kept evidence splits into {len(names)} documents of comparable score"
                f" (within {COMPARABLE:.0%} of the best) whose titles are variants of one"
                f" kind ({', '.join(names)}); the question names none of them"),
        evidence={o: tuple(ids) for o, ids in options.items()})


class RuleClarifier:
    """The `core.decisions.Clarifier` of an offline run: `clarify` above, in the knowledge
    base's language."""

    def __init__(self, words_: Vocabulary, reading_: Reading = ENGLISH_READING) -> None:
        self.words = words_
        self.reading = reading_

    def clarify(self, question: str, kept: list[Hit]) -> Clarification | None:
        return clarify(question, kept, self.words, self.reading)
