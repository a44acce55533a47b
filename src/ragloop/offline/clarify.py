"""The offline clarify rule: ask the user back when a question has several readings that the
knowledge base answers differently, instead of guessing one or answering all of them.

The readings are read off the graded evidence. Kept passages come from *sibling* documents
when their titles are the same apart from a name ("S100 … Sensor Datasheet", "S200 … Sensor
Datasheet"; "Quarterly Sales Report: Q1 FY2024", "… Q3 FY2024"; "Pulse Release Notes", "Edge
G2 Firmware Release Notes"). A name is a code (S200, Q1 FY2024) or a word the passages never
write in lower case (Pulse, Edge); a title word that they do (wireless, installation,
product) is a description, so an installation guide and a product guide of one gateway are
not two readings. When at least two siblings with different names are kept and the question
names none of them — nor any other kept document by a code of its title ("the Edge G2
gateway") — the run should end with a clarifying question whose options are those names.
A question that names some of them (Q3, of "Q3 FY2024" and "Q3 FY2025") keeps the ones it
names: one left is no ambiguity.

And the question must refer to the siblings: by part of their names (Q3), or by what they
share, a word of every sibling's title ("the sensor" of the sensor datasheets, "the quarter"
of the quarterly reports), not asked about ("which quarter …?", "any sensor"). A question
that names no reading but is not about that kind of thing (a customer's deployment that two
quarterly reports mention differently) is answered, conflicts and all. A question that
names a reading whole, or several (a comparison), chose them; one with a number ("at 30 June
2024", "the last quarter of 2023") says which by something the rule does not read: both are
answered.

The options must be things a user could choose between, hence these guards (issue 30, after
false positives on BEIR sets the rule was never tuned on):
- only titles that label a document form sibling groups: one that reads as a sentence (it
  ends with a full stop) or a headline (more than MAX_TITLE_WORDS words) is about one
  finding or event, and two such titles sharing generic words are no kind of thing;
- an option is a name: a few (MAX_NAME_WORDS) adjacent words of its title, not what is left
  of a title once the words its siblings share are taken out;
- the question refers to the siblings by a shared word written as a description ("the
  sensor"), not by a shared name it capitalises ("Astor" of "John Jacob Astor III" and
  "… IV": namesakes, told apart by a suffix no one would choose from), and not after an
  indefinite article ("a song that …" asks to find one song by what it says of it).

Pure: the question, the kept hits and the words of the knowledge base's language in, a
`Clarification` or None out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragloop.core.conversation import Clarification
from ragloop.core.script import ends_sentence
from ragloop.core.types import Hit
from ragloop.language.text import Reading, code_family, stem, words
from ragloop.language.vocabulary import Vocabulary

MIN_OPTIONS = 2
MAX_OPTIONS = 5
# A title of more words than this reads as a headline or a sentence ("Halden Instruments
# expands Austin office to support North American growth"), not as the label of one of a
# kind of document; the longest label of the examples is 7 ("S300 Hazardous-Area Vibration
# and Temperature Sensor Datasheet").
MAX_TITLE_WORDS = 8
# An option is a name a user could type: a few adjacent words of its title ("Edge G2",
# "Q1 FY2024"), never what is left of a title once the shared words are taken out.
MAX_NAME_WORDS = 3
# Two titles are siblings when, without their codes, this share of the shorter one's words
# is in the other ("Pulse Release Notes" / "Edge G2 Firmware Release Notes": 2 of 3).
SIBLING_OVERLAP = 0.6


@dataclass(frozen=True)
class _Doc:
    doc_id: str
    title: str
    tokens: tuple[str, ...]  # the title's words as written
    best: float  # the best grade score of its kept passages


def _docs(kept: Sequence[Hit]) -> list[_Doc]:
    best: dict[str, _Doc] = {}
    for h in kept:
        score = h.grade_score if h.grade_score is not None else h.score
        d = best.get(h.doc_id)
        if d is None or score > d.best:
            best[h.doc_id] = _Doc(h.doc_id, h.doc_title, tuple(words(h.doc_title)), score)
    return sorted(best.values(), key=lambda d: -d.best)


def _plain(tokens: Sequence[str], rd: Reading) -> set[str]:
    return {t.lower() for t in tokens if not rd.is_code(t)}


def _label(title: str) -> bool:
    """A title that labels a document (a datasheet, release notes, a report), not one that
    reads as a sentence or a headline: those are about one thing each, and two that share
    words ("… antiretroviral therapy …") are no kind of thing with several named members."""
    t = title.strip()
    return bool(t) and not ends_sentence(t) and len(t.split()) <= MAX_TITLE_WORDS


def _siblings(a: _Doc, b: _Doc, rd: Reading) -> bool:
    pa, pb = _plain(a.tokens, rd), _plain(b.tokens, rd)
    if not pa or not pb or a.title == b.title or not (_label(a.title) and _label(b.title)):
        return False
    return len(pa & pb) / min(len(pa), len(pb)) >= SIBLING_OVERLAP


def _lower_words(kept: Sequence[Hit]) -> set[str]:
    """Words the passages write in lower case somewhere: descriptions, not names."""
    return {w for h in kept for w in words(f"{h.section_title} {h.text}") if w.islower()}


def _as_name(doc: _Doc, chosen: Sequence[str]) -> str:
    """`chosen` words of `doc`'s title as an option, when they are a name: adjacent in the
    title and at most MAX_NAME_WORDS; else "" (what is left of "Antiretroviral Therapy for
    Prevention of Tuberculosis in Adults with HIV" without the words a sibling shares is no
    name a user could choose)."""
    at = [i for i, t in enumerate(doc.tokens) if t in chosen]
    if not at or len(chosen) > MAX_NAME_WORDS or at[-1] - at[0] + 1 != len(chosen):
        return ""
    return " ".join(chosen)


def _name(doc: _Doc, common: set[str], lower: set[str], rd: Reading) -> str:
    """What tells `doc` from its siblings: its codes when it has any there, else its title
    words that are not in every sibling's title and are never written in lower case — unless
    the titles share a code: then they are documents of one named thing ("Edge G2 Gateway
    Product Guide", "… Installation Guide"), and words alone do not make another reading.
    Either way only when those words are a name (`_as_name`)."""
    differ = [t for t in doc.tokens if t.lower() not in common]
    found = [t for t in differ if rd.is_code(t)]
    if not found and any(rd.is_code(t) for t in common):
        return ""
    if found:
        # a code's neighbouring name word stays with it ("Edge G2"), a description does not
        at = [i for i, t in enumerate(differ) if rd.is_code(t)]
        lead = differ[at[0] - 1] if at[0] > 0 else ""
        if lead and not rd.is_code(lead) and lead.lower() not in lower and lead[:1].isupper():
            found.insert(0, lead)
        return _as_name(doc, found)
    return _as_name(doc, [t for t in differ if t.lower() not in lower and t[:1].isupper()])


def _family(docs: list[_Doc], rd: Reading) -> list[_Doc]:
    """The largest group of sibling documents among the kept ones (best-scored first)."""
    best: list[_Doc] = []
    for d in docs:
        group = [d, *(o for o in docs if o is not d and _siblings(d, o, rd))]
        if len(group) > len(best):
            best = group
    return best


def _named(question_tokens: set[str], name: str) -> bool:
    return bool({t.lower() for t in words(name)} & question_tokens)


def _refers_to_family(question: str, common: set[str], asking: set[str],
                      rd: Reading) -> bool:
    """The question holds a word every sibling's title has (by stem: "quarter" for
    "Quarterly") and never asks for one ("in which quarter …", "any sensor", "a sensor
    that …": an indefinite article, like a question word, asks to find the one the rest of
    the question describes, where "the sensor" takes one as known). It writes that
    word as a description, in lower case ("the sensor"), unless it opens the question: a
    shared word it capitalises is a name the siblings share ("Astor" of "John Jacob Astor
    III" and "… IV"), which names one person or thing, not a kind of them."""
    shared = {stem(t) for t in common if not rd.is_code(t)}
    written = words(question)
    tokens = [t.lower() for t in written]
    at = [i for i, t in enumerate(tokens) if stem(t) in shared
          and (i == 0 or not written[i][:1].isupper())]
    return bool(at) and not any(i > 0 and tokens[i - 1] in asking for i in at)


def _points_at_readings(question: str, names: Sequence[str]) -> bool:
    """The question names a reading whole (every word of it), or holds a number (a date, a
    year, an amount): it says which reading by something the rule does not read."""
    q = {t.lower() for t in words(question)}
    return (any(all(t.lower() in q for t in words(n)) for n in names)
            or any(t.isdigit() for t in q))


def _join(options: Sequence[str], words_: Vocabulary) -> str:
    if len(options) == 1:
        return options[0]
    glue = " " if words_.spaced else ""
    return ", ".join(options[:-1]) + f"{glue}{words_.text('clarify.or')}{glue}" + options[-1]


def clarify(question: str, kept: Sequence[Hit], words_: Vocabulary,
            rd: Reading) -> Clarification | None:
    """A clarifying question when `kept` (the graded evidence of `question`) answers several
    readings the question does not choose between; None when it does not. `words_` and `rd`:
    the knowledge base's language's vocabulary and reading."""
    docs = _docs(kept)
    family = _family(docs, rd)
    if len(family) < MIN_OPTIONS:
        return None
    common = set.intersection(*({t.lower() for t in d.tokens} for d in family))
    lower = _lower_words(kept)
    names: dict[str, list[str]] = {}
    for d in family:
        n = _name(d, common, lower, rd)
        if n:
            names.setdefault(n, []).append(d.doc_id)
    if len(names) < MIN_OPTIONS:
        return None
    if _points_at_readings(question, list(names)):
        return None  # it chose its readings (one, or several to compare), or dates them
    q = {t.lower() for t in words(question)}
    q_codes = {t.lower() for t in words(question) if rd.is_code(t)}
    outside = [d for d in docs if d not in family]
    if any(q_codes & {t.lower() for t in d.tokens} for d in outside):
        return None  # the question names another kept document ("the Edge G2 gateway")
    named = [n for n in names if _named(q, n)]
    asking = {*words_.words("question_words"), *words_.words("indefinite_articles")}
    if not named and not _refers_to_family(question, common, asking, rd):
        return None  # not about the kind of thing the siblings are
    options = named if named else list(names)
    if named and len(named) < MIN_OPTIONS:
        return None  # the question chose its reading
    families = {code_family(t) for n in names for t in words(n) if rd.is_code(t)}
    if not named and any(code_family(c) in families for c in q_codes):
        return None  # it names a code of the readings' kind (another quarter, another model)
    options = options[:MAX_OPTIONS]
    return Clarification(
        question=words_.text("clarify.question").format(options=_join(options, words_)),
        options=tuple(options),
        reason=(f"the kept passages come from {len(names)} sibling documents told apart by"
                f" {', '.join(names)}; the question names"
                f" {f'{len(named)} of them' if named else 'none of them'}"),
        evidence={o: tuple(names[o]) for o in options})


class RuleClarifier:
    """The `core.decisions.Clarifier` of an offline run: `clarify` above, in the knowledge
    base's language."""

    def __init__(self, words_: Vocabulary, reading_: Reading) -> None:
        self.words = words_
        self.reading = reading_

    def clarify(self, question: str, kept: list[Hit]) -> Clarification | None:
        return clarify(question, kept, self.words, self.reading)
