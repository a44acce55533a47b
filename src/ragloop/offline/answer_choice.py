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
  a year or month, a name the question does not hold). Where no such word says it, the
  question's form does (in a language written with spaces): an interrogative followed by a
  content word ("Which status code …", "What header …") asks for a particular value, which a
  sentence holds when it has a figure, a name or a code-like identifier (`lru_cache`,
  `Jinja2`) the question lacks; an interrogative, an auxiliary and a short subject ("What is
  a middleware?", "What does Dependency Injection mean?") asks for a definition, which a
  sentence holds when it opens with that subject followed by the question's own predicate
  ("A middleware is a function …", "Dependency Injection means …"); a question opening with
  an auxiliary asks yes or no, and the answer says which (`polarity`).

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

from ragloop.language.text import Reading
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
# A code-like identifier: snake_case, dotted, called, camelCase or letters with digits.
_IDENT = re.compile(r"(?<![\w.])[A-Za-z][\w.-]*(?:_|\.\w|\(\)|[a-z][A-Z]|[A-Za-z]\d)[\w.()-]*")
_TOKEN = re.compile(r"[\w'’.-]+")
COMMON_SHARE, COMMON_MIN = 0.2, 5  # a word in this share of 5+ sentences is common
DEFINITION_SUBJECT = 4  # at most this many content words make a definition's subject
DEFINITION_OPENING = 6  # at most this many words before the subject ("In this case, …")
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
    return month_names(code)  # a language without month names reads English's


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
    """The kind of thing the question asks for, read from its words for each kind, else from
    its form (see the module notes): "number", "date", "name", "yes_no", "definition" or
    "value"."""
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
        # "Was A or B born first?" asks which, not whether
        if any(_has_phrase(low, w, spaced) for w in words.get("alternatives", ())):
            return None
        return "yes_no"
    if not spaced:
        return None
    if definition_form(question, rd) is not None:
        return "definition"
    toks = _TOKEN.findall(low)
    content = {w.casefold() for w in rd.content_words(question)}
    if len(toks) > 1 and toks[0] not in content and toks[1] in content:
        return "value"
    return None


def definition_form(question: str, rd: Reading) -> tuple[list[str], list[str]] | None:
    """For "<interrogative> <auxiliary> <subject> [<verb>] …?", the subject's stemmed terms and
    the predicates a defining sentence would put after it (the auxiliary; the last word, when
    the question ends on a verb of its own: "What does X mean?")."""
    aux = _kind_words(rd.code).get("yes_no", ())
    toks = _TOKEN.findall(question.casefold())
    if len(toks) < 3 or toks[1] not in aux or toks[0] in aux:
        return None
    content = {w.casefold() for w in rd.content_words(question)}
    articles = set(vocabulary(rd.code).words("articles")) | \
        set(vocabulary(rd.code).words("indefinite_articles"))
    subject: list[str] = []
    end = len(toks)
    for k, t in enumerate(toks[2:], start=2):
        if t in content:
            subject.append(t)
        elif t in articles and not subject:
            continue
        else:
            end = k
            break
    if not subject or len(subject) > DEFINITION_SUBJECT or toks[0] in content:
        return None
    predicates = [rd.stem(toks[1])]
    if end == len(toks) - 1:  # one word after the subject ends the question: its verb
        predicates.append(rd.stem(toks[-1]))
    elif end == len(toks) and len(subject) > 1:  # the subject's last word may be the verb
        predicates.append(rd.stem(subject[-1]))
    return [rd.stem(t) for t in subject], predicates


def defines(sentence: str, form: tuple[list[str], list[str]], rd: Reading) -> bool:
    """The sentence puts the subject right before the question's predicate ("In this case,
    OpenAPI is a specification …"; not "The last middleware added is …"), early in it."""
    subject, predicates = form
    toks = [rd.stem(t.strip("'’.-")) for t in _TOKEN.findall(sentence.casefold())]
    for pred in predicates:
        want = [t for t in subject if t != pred]
        for k, t in enumerate(toks[:DEFINITION_OPENING + len(want) + 1]):
            if t == pred and k >= len(want) and set(toks[k - len(want):k]) == set(want):
                return True
    return False


def polarity(sentence: str, question: str, rd: Reading) -> str | None:
    """The language's word for yes or no: no when exactly one of the question and the sentence
    is negative (a negation word of the language data)."""
    words = _kind_words(rd.code)
    answers = words.get("yes_no_answers", ())
    if len(answers) != 2:
        return None
    spaced = vocabulary(rd.code).spaced if rd.code else True

    def negative(text: str) -> bool:
        low = text.casefold().replace("’", "'")
        if not spaced:
            return any(w in low for w in words.get("negation", ()))
        toks = _TOKEN.findall(low)
        negation = set(words.get("negation", ()))
        endings = tuple(words.get("negation_endings", ()))  # English "n't"
        return any(t in negation or (endings and t.endswith(endings)) for t in toks)

    return answers[1] if negative(sentence) != negative(question) else answers[0]


def holds_kind(sentence: str, question: str, kind: str | None, rd: Reading,
               common: frozenset[str] = frozenset()) -> bool:
    """The sentence holds something of the asked kind that the question does not; for a
    "value", a name or identifier whose terms are all `common` (in many of the evidence's
    sentences: the product a whole manual names) is not one."""
    if kind == "number":
        return bool(_DIGITS.search(sentence)) and not _same_digits(sentence, question)
    if kind == "date":
        low = sentence.casefold()
        return (bool(_YEAR.search(sentence)) and not _same_years(sentence, question)) or \
            any(_has_phrase(low, m, True) for m in _months(rd.code)) or \
            any(q.kind == "date" for q in rd.quantities(sentence))
    if kind in ("name", "value"):
        asked = {w.casefold() for w in rd.term_set(question)}
        known = asked | (common if kind == "value" else frozenset())
        if any(not {w.casefold() for w in rd.term_set(n)} <= known
               for n in rd.name_spans(sentence)):
            return True
        if kind == "name":
            return False
        low = question.casefold()
        return (bool(_DIGITS.search(sentence)) and not _same_digits(sentence, question)) or \
            any(m.group(0).casefold().rstrip(".") not in low
                and not {w.casefold() for w in rd.term_set(m.group(0))} <= common
                for m in _IDENT.finditer(sentence))
    if kind == "definition":
        form = definition_form(question, rd)
        return form is not None and defines(sentence, form, rd)
    return False


def _same_digits(sentence: str, question: str) -> bool:
    return set(re.findall(r"\d+", sentence)) <= set(re.findall(r"\d+", question))


def _same_years(sentence: str, question: str) -> bool:
    return {m.group(0) for m in _YEAR.finditer(sentence)} <= \
        {m.group(0) for m in _YEAR.finditer(question)}


def _frequency(word_sets: Sequence[set[str]]) -> dict[str, int]:
    """In how many of the sets each word is."""
    df: dict[str, int] = {}
    for words in word_sets:
        for w in words:
            df[w] = df.get(w, 0) + 1
    return df


def idf(word_sets: Sequence[set[str]], rd: Reading) -> dict[str, float]:
    """Each stemmed term's inverse document frequency over the sentences' words (term_set)."""
    n = len(word_sets)
    df = _frequency([{rd.stem(w) for w in words} for words in word_sets])
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


def common_words(word_sets: Sequence[set[str]]) -> frozenset[str]:
    """The words (case-folded) in at least COMMON_SHARE of the sentences' words (of COMMON_MIN
    or more sentences): the name every page of a manual repeats tells no sentence apart."""
    if len(word_sets) < COMMON_MIN:
        return frozenset()
    df = _frequency([{w.casefold() for w in words} for words in word_sets])
    return frozenset(w for w, d in df.items() if d >= COMMON_SHARE * len(word_sets))


@dataclass
class Choice:
    """The per-question readings shared by every candidate sentence."""

    question: str
    terms: set[str]  # the question's stemmed content terms
    weights: dict[str, float]
    kind: str | None
    rd: Reading
    common: frozenset[str] = frozenset()  # words in COMMON_SHARE of the evidence's sentences

    @classmethod
    def of(cls, question: str, sentences: Sequence[str], rd: Reading) -> Choice:
        terms = {rd.stem(t) for t in rd.content_terms(question)}
        word_sets = [rd.term_set(s) for s in sentences]  # read once, for both tables
        table = idf(word_sets, rd)
        top = max(table.values(), default=1.0)
        return cls(question, terms, {t: table.get(t, top) for t in terms},
                   asked_kind(question, rd), rd, common_words(word_sets))

    def covered(self, sentence: str) -> set[str]:
        return self.terms & {self.rd.stem(w) for w in self.rd.term_set(sentence)}

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
        own = {self.rd.stem(w) for w in self.rd.term_set(sentence)}
        new = min(1.0, len(own - self.terms) / NEW_TERMS_FULL)
        kind = float(holds_kind(sentence, self.question, self.kind, self.rd, self.common))
        pointer = float(points_elsewhere(sentence, self.rd))
        return MEANING * meaning + TERMS * terms + NEW * new + KIND * kind - POINTER * pointer

    def links(self, lead: str, title: str) -> bool:
        """The lead names what another section is titled, beyond what the question names:
        that section is the next hop ("… along with Ruprekha Banerjee" → the section
        "Ruprekha Banerjee" says where she was born)."""
        want = {self.rd.stem(w) for w in self.rd.content_terms(title)}
        return bool(want) and not want <= self.terms and \
            want <= {self.rd.stem(w) for w in self.rd.term_set(lead)}

    def adds(self, said: str, other: str) -> bool:
        """`other` holds question terms that `said` (the chosen sentences' sections) does
        not, weighing at least ADDS_SHARE of the question: context that adds something (the
        second hop of a question), not one more word of it."""
        total = sum(self.weights.values())
        gained = (self.terms - self.covered(said)) & self.covered(other)
        return bool(gained) and sum(self.weights[t] for t in gained) >= ADDS_SHARE * total
