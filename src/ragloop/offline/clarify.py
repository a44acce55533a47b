"""The offline clarifier: ask the user back when the evidence a question found splits into
groups that answer it differently, instead of guessing one or answering all of them.

Decided from what retrieval returns, not from the question's wording (issue 40, point 5),
the same for every language:
- the kept hits are grouped by document (a group's strength: its best grade score), and
  the candidates are the groups of comparable strength, within COMPARABLE of the best;
- among them, a *family*: groups whose titles name variants of one kind. Two titles are
  kin when they share content words (SHARED of the shorter one's at least) and differ; a
  family is the largest set of candidates kin with one of them. Its common words name the
  kind ("sensor datasheet", "status code"), the rest of each title names the variant.
  Every member must have words of its own: a title that is only the kind ("Rate limits"
  beside "Rate limit headers") is a general page that answers, not one reading; and no
  more than a name's (MAX_NAME_WORDS): titles that differ by a phrase are separate topics;
- no family of documents: the same over the kept sections (titled by their headings), for
  readings that are sections of one page or of several;
- the question must not pin a variant: when it holds a word that is some member's own, it
  chose (one, or several to compare) and is answered; nor name a group stronger than the
  family (by a title word no member has): it chose that one.
Words are the knowledge base's own content terms (its analyzer's stop words left out). The
options are the members' own title words, in their order (the codes alone when they have
any: words with a digit, S200, Q3).

Pure: the question, the kept hits and the knowledge base's vocabulary in, a
`Clarification` or None out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragloop.core.conversation import Clarification
from ragloop.core.types import Hit
from ragloop.language.text import ENGLISH_READING, Reading, stem
from ragloop.language.vocabulary import Vocabulary

MIN_OPTIONS = 2
MAX_OPTIONS = 5
# A group is a candidate reading when its best score is at least this share of the best.
COMPARABLE = 0.75
# Two titles name variants of one kind when this share of the shorter one's words is shared.
SHARED = 0.5
# A variant's own title words (what the user chooses by): more than this is no name.
MAX_NAME_WORDS = 4


@dataclass(frozen=True)
class _Group:
    key: tuple[str, str]  # (doc_id, "") for a document, (doc_id, section) for a section
    title: str
    terms: frozenset[str]
    best: float


def _groups(kept: Sequence[Hit], key: Callable[[Hit], tuple[str, str]],
            title: Callable[[Hit], str], rd: Reading) -> list[_Group]:
    best: dict[tuple[str, str], _Group] = {}
    for h in kept:
        score = h.grade_score if h.grade_score is not None else h.score
        k = key(h)
        g = best.get(k)
        if g is None or score > g.best:
            t = title(h) or h.doc_id
            best[k] = _Group(k, t, frozenset(rd.content_terms(t)), score)
    return sorted(best.values(), key=lambda g: -g.best)


def _kin(a: _Group, b: _Group) -> bool:
    shared = len(a.terms & b.terms)
    return a.terms != b.terms and shared > 0 and \
        shared >= SHARED * min(len(a.terms), len(b.terms))


def _strong(groups: list[_Group]) -> list[_Group]:
    if not groups or groups[0].best <= 0:
        return []
    return [g for g in groups if g.best >= COMPARABLE * groups[0].best]


def _family(strong: list[_Group]) -> list[_Group]:
    """The largest set of comparable groups kin with one of them (the strongest seed wins a
    tie), best first; empty when there is none or one member is only the common kind."""
    family: list[_Group] = []
    for seed in strong:
        f = [g for g in strong if g is seed or _kin(g, seed)]
        if len(f) > len(family):
            family = f
    if len(family) < MIN_OPTIONS:
        return []
    common = frozenset.intersection(*(g.terms for g in family))
    own = [len(g.terms - common) for g in family]
    # variants are told apart by a name; titles that differ by more are separate topics
    return family if common and all(0 < n <= MAX_NAME_WORDS for n in own) else []


def _label(g: _Group, common: frozenset[str], rd: Reading) -> str:
    own = [w for w in rd.content_words(g.title) if stem(w) not in common]
    # a code (a word with a digit: S200, Q3) names a variant on its own, in any language
    coded = [w for w in own if any(c.isdigit() for c in w)]
    return " ".join(coded or own) or g.title


def _join(options: Sequence[str], words_: Vocabulary) -> str:
    if len(options) == 1:
        return options[0]
    glue = " " if words_.spaced else ""
    return ", ".join(options[:-1]) + f"{glue}{words_.text('clarify.or')}{glue}" + options[-1]


def clarify(question: str, kept: Sequence[Hit], words_: Vocabulary,
            rd: Reading = ENGLISH_READING) -> Clarification | None:
    """A clarifying question when `kept` (the graded evidence of `question`) holds a family
    of comparable documents (else sections) that are variants of one kind the question
    does not choose between; None otherwise."""
    level = "documents"
    strong = _strong(_groups(kept, lambda h: (h.doc_id, ""), lambda h: h.doc_title, rd))
    family = _family(strong)
    if not family:
        level = "sections"
        strong = _strong(_groups(kept, lambda h: (h.doc_id, h.section),
                                 lambda h: h.section_title, rd))
        family = _family(strong)
    if not family:
        return None
    common = frozenset.intersection(*(g.terms for g in family))
    kind = frozenset.union(*(g.terms for g in family))
    asked = frozenset(rd.content_terms(question))
    if any(asked & (g.terms - common) for g in family):
        return None  # the question names a variant (or several, to compare): it chose
    if any(asked & (g.terms - kind) for g in strong if g.best > family[0].best):
        return None  # it names a stronger group that is none of the variants: that one
    options: dict[str, list[str]] = {}
    for g in family[:MAX_OPTIONS]:
        ids = options.setdefault(_label(g, common, rd), [])
        if g.key[0] not in ids:
            ids.append(g.key[0])
    if len(options) < MIN_OPTIONS:
        return None
    names = list(options)
    return Clarification(
        question=words_.text("clarify.question").format(options=_join(names, words_)),
        options=tuple(names),
        reason=(f"the kept evidence splits into {len(names)} {level} of comparable score"
                f" (within {COMPARABLE:.0%} of the best) whose titles are variants of one"
                f" kind ({', '.join(names)}); the question names none of them"),
        evidence={o: tuple(ids) for o, ids in options.items()})


class RuleClarifier:
    """The `core.decisions.Clarifier` of an offline run: `clarify` above, with the knowledge
    base's vocabulary and reading (its stop words)."""

    def __init__(self, words_: Vocabulary, reading_: Reading = ENGLISH_READING) -> None:
        self.words = words_
        self.reading = reading_

    def clarify(self, question: str, kept: list[Hit]) -> Clarification | None:
        return clarify(question, kept, self.words, self.reading)
