"""The offline clarifier: ask the user back when the evidence a question found splits into
groups that answer it differently, instead of guessing one or answering all of them.

Decided from what retrieval returns, not from the question's wording (issue 40, point 5),
the same for every language. The kept hits are grouped by document (a group's strength: its
best grade score; its weight: the sum of its hits' scores, strength and share of the
evidence together); the candidates are the groups within COMPARABLE of the best. Then, the
first that holds:
1. a *family* of documents: candidates whose titles name variants of one kind. Two titles
   are kin when they share content words (SHARED of the shorter one's at least) and differ;
   a family is the largest set of candidates kin with one of them; its common words name
   the kind ("sensor datasheet"), the rest of each title the variant, in a name's length
   (MAX_NAME_WORDS) and never empty (a title that is only the kind is a general page, no
   variant). The question must not pin a variant: a word only one member's title has
   chose it (or several, to compare); a word some members share keeps those; a title word
   of a stronger group outside the family chose that group;
2. a family of sections (titled by their headings), as in 1, for readings that are
   sections of one page or several; a section and one inside it (a page's top section
   holds them all) are one reading, the outer one answering.
A family whose heaviest member weighs DOMINANT times the next is answered by it.
Words are the knowledge base's own content terms (its analyzer's stop words left out). The
options are the titles or headings as written (a variant's codes alone when it has them:
words with a digit, S200, Q3); two pages of one title are told apart by their best kept
heading. Each option's evidence is the documents it leads to.

Pure: the question, the kept hits and the knowledge base's vocabulary in, a
`Clarification` or None out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragloop.core.conversation import Clarification
from ragloop.core.types import Hit
from ragloop.language.text import Reading
from ragloop.language.vocabulary import Vocabulary

MIN_OPTIONS = 2
MAX_OPTIONS = 5
# A group is a candidate reading when its best score is at least this share of the best.
COMPARABLE = 0.75
# Two titles name variants of one kind when this share of the shorter one's words is shared.
SHARED = 0.5
# A variant's own title words (what the user chooses by): more than this is no name.
MAX_NAME_WORDS = 4
# A family whose heaviest member holds this many times the evidence of the next is answered
# by that member (it dominates).
DOMINANT = 2.0


@dataclass(frozen=True)
class _Group:
    key: tuple[str, str]  # (doc_id, "") for a document, (doc_id, section) for a section
    title: str
    terms: frozenset[str]
    best: float


def _score(h: Hit) -> float:
    return h.grade_score if h.grade_score is not None else h.score


def _groups(kept: Sequence[Hit], key: Callable[[Hit], tuple[str, str]],
            title: Callable[[Hit], str], rd: Reading) -> list[_Group]:
    best: dict[tuple[str, str], _Group] = {}
    for h in kept:
        score = _score(h)
        k = key(h)
        g = best.get(k)
        if g is None or score > g.best:
            t = title(h) or h.doc_id
            best[k] = _Group(k, t, frozenset(rd.content_terms(t)), score)
    return sorted(best.values(), key=lambda g: -g.best)


def _nested(sections: list[_Group]) -> bool:
    """One section holds another (a page's top section "0" holds them all): the outer one
    is the general reading that answers, as a general page does beside its subtopics."""
    def inside(a: tuple[str, str], b: tuple[str, str]) -> bool:
        return a[0] == b[0] and a != b and (b[1] == "0" or a[1].startswith(b[1] + "."))
    return any(inside(a.key, b.key) for a in sections for b in sections)


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
    tie), best first; empty when there is none or one member is only the common kind (a
    general page beside its subtopics is no variant)."""
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


def _dominated(groups: list[_Group], kept: Sequence[Hit],
               key: Callable[[Hit], tuple[str, str]]) -> bool:
    """The heaviest of `groups` (the sum of its kept hits' scores: its strength and how much
    of the evidence it holds) weighs DOMINANT times the next or more."""
    keys = {g.key for g in groups}
    mass: dict[tuple[str, str], float] = {}
    for h in kept:
        if key(h) in keys:
            mass[key(h)] = mass.get(key(h), 0.0) + _score(h)
    heavy = sorted(mass.values(), reverse=True)
    return len(heavy) < MIN_OPTIONS or heavy[0] >= DOMINANT * heavy[1]


def _label(g: _Group, common: frozenset[str], rd: Reading) -> str:
    own = [w for w in rd.content_words(g.title) if rd.stem(w) not in common]
    # a code (a word with a digit: S200, Q3) names a variant on its own, in any language;
    # otherwise the title as the page writes it (never the words left once the shared go)
    coded = [w for w in own if any(c.isdigit() for c in w)]
    return " ".join(coded) or g.title


def _join(options: Sequence[str], words_: Vocabulary) -> str:
    if len(options) == 1:
        return options[0]
    glue = " " if words_.spaced else ""
    return ", ".join(options[:-1]) + f"{glue}{words_.text('clarify.or')}{glue}" + options[-1]


def _options(groups: list[_Group], common: frozenset[str], rd: Reading,
             heading: dict[tuple[str, str], str]) -> dict[str, list[str]]:
    """Each option's label and the documents it leads to; two groups of one title are told
    apart by their best section's heading."""
    labels = [_label(g, common, rd) for g in groups[:MAX_OPTIONS]]
    options: dict[str, list[str]] = {}
    for g, label in zip(groups[:MAX_OPTIONS], labels, strict=True):
        if labels.count(label) > 1 and heading.get(g.key) and heading[g.key] != label:
            label = f"{label}: {heading[g.key]}"
        ids = options.setdefault(label, [])
        if g.key[0] not in ids:
            ids.append(g.key[0])
    return options


def _narrow(asked: frozenset[str], family: list[_Group]) -> list[_Group] | None:
    """The members the question leaves open: None when it names one by a word only that
    member's title has (it chose; several named: it compares them); else the members
    holding every word of the question that only some members share ("header parameter
    models" among query, header and form models: those two)."""
    common = frozenset.intersection(*(g.terms for g in family))
    for g in family:
        if asked & (g.terms - frozenset().union(*(o.terms for o in family if o is not g))):
            return None
    shared = asked & (frozenset.union(*(g.terms for g in family)) - common)
    return [g for g in family if shared <= g.terms]


def _decide(asked: frozenset[str], kept: Sequence[Hit], rd: Reading
            ) -> tuple[list[_Group], str, str] | None:
    """(the readings, their level, how they differ), or None: a family of documents, else a
    family of sections. Documents of comparable strength that are no family are not readings:
    two sources on one fact (a report and a press release) answer it together, and their
    disagreement is stated as a conflict, not asked."""
    by_doc: Callable[[Hit], tuple[str, str]] = lambda h: (h.doc_id, "")  # noqa: E731
    docs = _strong(_groups(kept, by_doc, lambda h: h.doc_title, rd))
    if family := _family(docs):
        if any(asked & (g.terms - frozenset.union(*(f.terms for f in family)))
               for g in docs if g.best > family[0].best):
            return None  # it names a stronger group that is none of the variants: that one
        left = _narrow(asked, family)
        if not left or _dominated(left, kept, by_doc):
            return None  # the question chose, or one variant holds most of the evidence
        return left, "documents", "whose titles are variants of one kind"
    by_section: Callable[[Hit], tuple[str, str]] = lambda h: (h.doc_id, h.section)  # noqa: E731
    secs = _strong(_groups(kept, by_section, lambda h: h.section_title, rd))
    if (family := _family(secs)) and not _nested(family):
        left = _narrow(asked, family)
        if left and not _dominated(left, kept, by_section):
            return left, "sections", "whose headings are variants of one kind"
    return None


def clarify(question: str, kept: Sequence[Hit], words_: Vocabulary,
            rd: Reading) -> Clarification | None:
    """A clarifying question when `kept` (the graded evidence of `question`) splits into
    readings the question does not choose between: a family of comparable documents whose
    titles are variants of one kind, else a family of sections; None otherwise."""
    decided = _decide(frozenset(rd.content_terms(question)), kept, rd)
    if decided is None:
        return None
    readings, level, how = decided
    # codes are read off the variants' own words
    common = frozenset.intersection(*(g.terms for g in readings))
    heading = {(h.doc_id, ""): h.section_title for h in sorted(kept, key=_score)}
    options = _options(readings, common, rd, heading)
    if len(options) < MIN_OPTIONS:
        return None
    names = list(options)
    return Clarification(
        question=words_.text("clarify.question").format(options=_join(names, words_)),
        options=tuple(names),
        reason=(f"the kept evidence splits into {len(names)} {level} of comparable score"
                f" {how} ({'; '.join(names)}); the question names none of them"),
        evidence={o: tuple(ids) for o, ids in options.items()})


class RuleClarifier:
    """The `core.decisions.Clarifier` of an offline run: `clarify` above, with the knowledge
    base's vocabulary and reading (its stop words)."""

    def __init__(self, words_: Vocabulary, reading_: Reading) -> None:
        self.words = words_
        self.reading = reading_

    def clarify(self, question: str, kept: list[Hit]) -> Clarification | None:
        return clarify(question, kept, self.words, self.reading)
