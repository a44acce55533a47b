"""The offline condense rule: a conversation's new question made standalone before searching.

A question refers back when it opens with a follow-up phrase ("and …", "what about …",
"why …", "going back to …"), uses a pronoun before naming anything of its own ("how do I pair
it?"), or is too short to carry a subject ("is there a free trial?"). It is then rewritten
with the subject of the turn it refers to: the last turn (its standalone question, already
resolved, so a subject is never taken from further back than that turn carried it), or for
"going back to X" the latest earlier turn whose question (else answer) shares a word with X.
When that turn asked with few words and no name of its own ("can we get more?") and its
answer introduced a phrase that heads a part of the knowledge base (`headings`, given by whoever
knows the KB: "an extended warranty", a line of its own in the warranty terms), that phrase
comes first in the subject: "what's the price?" asks about it, not about what it was carried
with. For a person's pronoun the subject is the first new name that turn's answer gave; else its
question's names, each with the word that says what it names ("the Austin office", "error
code E201"); for a "which …?" question without a name, the codes (else names) its answer
stated, not what a clause of it denies; else the question's content words. An answer is
read without its citation markers ("[1]"), its declines and its bare figures, and
"they"/"them" are never read as numbers. A name or word in nearly every document of the
knowledge base (the company's own name; `common`, given by whoever knows the KB) is never
carried: it tells no document apart. "Who is that?" reads "that" as a person. A name's
possessive is the name ("E103's" → "E103"), and "it's" keeps its verb ("E103 is …").

Before that, two readings name what the question points at in words of its own: "the one
above (it)", "the cheap one", "the other one" are another code of the family the conversation
is about (`siblings`, given by whoever knows the KB: S300 after the S200), and "that quarter",
"that policy" are what the latest turn that named the noun meant by it (its period; its
subject; the name in its answer or cited titles that holds the noun, "Data Retention Policy");
"the enterprise one" is the name a turn gave that holds the word ("WPA2-Enterprise"), and "the
total for the year" in a question naming no period is the year of the period talked about
(FY2024 after Q2 FY2024), with what that turn asked of it.
One person ("he", "who is that?") is the first name the answer gave that its question did
not ask with, never the titles after it; a pronoun after "someone" or opening a clause
("anything that …") points back at nothing.

- "what about X" puts X in place of the earlier name of the same shape (S300 for S200, Q1
  FY2025 for Q3 FY2024, £60,000 for £20,000, Rotterdam for Austin); X with no name is a new
  aspect of the same subject ("what about the battery?" → "the battery (S200)");
- a pronoun is replaced by the subject ("how long does its battery last?" → "… S200 battery …");
  beside a sibling code of the question's own ("is it the same for the S100?" after the S300's
  warranty) it is what was asked, the warranty, not the S300;
- "and for X" asks the last question again, X in place of the carried name; "it" beside a
  plain name of the question's own, where it asks for sameness ("is it the same in
  Rotterdam?"), is what was asked, of that name;
- "they" stands for the last question's head noun phrase, "all this" never for a figure, and
  after "is the S200 waterproof?" the word after the name is no kind of it;
- "what about X, do I … those too?" and "going back to X, what … are they?" read the
  pronoun as X, the referred turn's subject added in brackets;
- anything else that refers back gets the subject added, without the earlier turn's aspect
  ("and the warranty?" after the S300's temperature range → "the warranty (S300)?"), unless it
  asks the same again of something relative ("and a quarter later?").

A question with no such sign stands alone and is left as typed; when it shares no word with
the last turn it is a new topic, and the history is dropped. A short question with "we"/"our"
and words of its own to search ("who's our biggest customer?") has such a subject.

Pure: the history, the question and the words of the knowledge base's language
(`language/lang/<code>.json`, key "conversation") in, a `Condensed` out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragloop.core.conversation import Condensed, Turn, TurnKind, narrowed
from ragloop.core.types import Usage
from ragloop.language.support import CITATION
from ragloop.language.text import ENGLISH_READING, Reading, code_family, stem, words
from ragloop.language.vocabulary import Vocabulary, alternation, as_list

# A money amount or number as written: "£20,000", "2.5.0", "10,000".
_AMOUNT = re.compile(r"(?<![\w.,])[£$€]?\d(?:[\d,.]*\d)?(?![\w])")
# a version ("2.5.0"): written as an amount, but a name of a release, not a figure
_VERSION = re.compile(r"\d+\.\d+\.\d+")
# a possessive ending glued to a word ("E103's")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s(?!\w)")
# "'s" right after a pronoun: "it's", read as "it is"
_CONTRACTION = re.compile(r"^['’]s(?!\w)")
# a run of Chinese/Japanese characters: the capitalisation of a name is not there to read
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
# what separates "what about X" from a clause that follows it: "what about 2.5.0, what did it add?"
_CLAUSE_BREAK = re.compile(r"\s*(?:[,;:](?=\s)|\s[—–-]\s)\s*")
# where one clause of an answer's sentence ends and the next begins ("…; the S300 is …")
_CLAUSES = re.compile(r"\s*[;:]\s+")
# A lower-case word put before a fragment so that its first capitalised word reads as a name
_LEAD = "about"
# at most this many content words of an earlier question are carried when it has no names
MAX_CARRIED_WORDS = 6
# a word that occurs in most of the knowledge base's documents ("common", passed in by whoever
# knows the KB): no word of the KB is common when nothing is known of it
Common = Callable[[str], bool]


# the codes of one family in the knowledge base, in order ("S200" → S100, S200, S300; passed
# in by whoever knows the KB): what "the one above", "the cheap one" step through
Siblings = Callable[[str], Sequence[str]]


# whether a phrase heads a document, section or line of the knowledge base ("Extended
# warranty"; passed in by whoever knows the KB): a thing the KB has, not a phrase in passing
Headings = Callable[[str], bool]


def _nothing_common(word: str) -> bool:
    return False


def _no_headings(phrase: str) -> bool:
    return False


def _no_siblings(code: str) -> Sequence[str]:
    return ()


def _distinct(names: list[str], common: Common) -> list[str]:
    """The names that tell documents apart: a name all of whose words occur in most of the
    knowledge base's documents (the company's own name) distinguishes nothing."""
    return [n for n in names if not all(common(x) for x in words(n))]


@dataclass(frozen=True)
class ConversationWords:
    """The compiled "conversation" words of one language."""

    continuation: re.Pattern[str]
    about: re.Pattern[str]
    again: re.Pattern[str]  # "and for X", "same for X": the last question asked of X
    why: re.Pattern[str]
    back: re.Pattern[str]
    pronoun: re.Pattern[str]
    person: re.Pattern[str]
    plural: re.Pattern[str]
    person_question: re.Pattern[str]  # "who …?": asks for a person
    # "we", "our": the asker's own side, not a pointer back at an earlier turn
    speaker: re.Pattern[str]
    demonstrative: re.Pattern[str]  # "that", "this": a person when the question asks who
    broad: re.Pattern[str]  # "all this": everything asked, never one figure of it
    sameness: re.Pattern[str]  # "the same": asks what was asked of another one
    # a question whose answer names its subject ("which sensor is certified …?")
    by_name: re.Pattern[str]
    negation: re.Pattern[str]
    later: re.Pattern[str]  # "and a quarter later?": the same question of the next period
    earlier: re.Pattern[str]
    # the period kinds a follow-up may move by: (its words, its code, how many in a year);
    # the year's words, and the financial year's code
    periods: tuple[tuple[re.Pattern[str], str, int], ...]
    year: re.Pattern[str]
    year_code: str
    not_claims: tuple[str, ...]  # an answer's sentences with these state nothing
    article: re.Pattern[str]  # "the" right before a name: "the Austin office"
    # a verb's helper right before a name (or its article): the word after the name is the
    # verb ("does the S300 cost?"), not the kind of thing the name is
    auxiliary: re.Pattern[str]
    # "is the S200 waterproof?": a question opening with a copula, the word after the name
    # is what is asked of it, not the kind of thing it is
    copula: re.Pattern[str]
    lead_in: str  # an auxiliary or an article, as a pattern: what comes before a code's kind
    period_joiner: str  # "in": what joins a period to a question ("… in Q3 FY2024?")
    ellipsis_words: int
    # "anything that …": a pronoun right after one of these opens a relative clause
    relative: re.Pattern[str]
    # "that quarter", "that policy": a determiner and the noun it points back with
    determiner: re.Pattern[str]
    # "the one above", "the cheap one", "the other one": another code of the same family, by
    # the step it takes (+1, -1, the first, the last, the one not talked about), and a
    # pronoun right after it ("the one above it") anchors it at the last turn
    siblings: tuple[tuple[re.Pattern[str], str], ...]
    deictic: re.Pattern[str]  # "this year": the period we are in, pointing back at none
    indefinite: re.Pattern[str]  # "someone": what a later pronoun of the question points at
    # "the total for the year": an article before a period word, the period talked about
    period_article: re.Pattern[str]
    kind_one: re.Pattern[str]  # "the enterprise one": what an earlier turn named with the word
    first_talked: re.Pattern[str]  # "the first one": what the conversation's first turn was about
    ordinals: frozenset[str]  # "first", "last": which one of several, not what kind of one

    @classmethod
    def of(cls, v: Vocabulary) -> ConversationWords:
        def opener(key: str) -> re.Pattern[str]:
            return re.compile(rf"^\s*{v.alternatives('conversation.' + key)}{v.edge}[\s,:;]*",
                              re.IGNORECASE)

        def anywhere(key: str) -> re.Pattern[str]:
            return re.compile(rf"{v.edge}{v.alternatives('conversation.' + key)}{v.edge}",
                              re.IGNORECASE)

        period_words = [*(x for k in ("quarter", "half") for x in as_list(v.periods[k]["word"])),
                        *as_list(v.get("conversation.year_words"))]
        return cls(opener("continuations"), opener("about_openers"), opener("again_openers"),
                   opener("why"),
                   opener("back_openers"), anywhere("pronouns"), anywhere("person_pronouns"),
                   anywhere("plural_pronouns"), anywhere("person_questions"),
                   anywhere("speakers"),
                   anywhere("demonstratives"), anywhere("broad_pronouns"),
                   anywhere("sameness"), anywhere("answered_by_name"),
                   anywhere("negations"), anywhere("later"), anywhere("earlier"),
                   tuple((re.compile(rf"{v.edge}{alternation(as_list(v.periods[k]['word']))}"
                                     rf"{v.edge}", re.IGNORECASE),
                          v.periods[k]["code"], int(v.periods[k]["count"]))
                         for k in ("quarter", "half")),
                   anywhere("year_words"), v.periods["financial_year"]["code"],
                   tuple(p.lower() for p in v.not_claims),
                   re.compile(rf"{v.edge}{v.alternatives('articles')}\s+$", re.IGNORECASE),
                   re.compile(rf"{v.edge}{v.alternatives('conversation.auxiliaries')}\s+"
                              rf"(?:{v.alternatives('articles')}\s+)?$", re.IGNORECASE),
                   re.compile(rf"^\s*{v.alternatives('conversation.copulas')}\s+"
                              rf"(?:{v.alternatives('articles')}\s+)?$", re.IGNORECASE),
                   rf"{v.edge}(?:{v.alternatives('conversation.auxiliaries')}"
                   rf"|{v.alternatives('articles')})",
                   v.text("conversation.period_joiner"),
                   int(v.get("conversation.ellipsis_words")),
                   re.compile(rf"{v.edge}{v.alternatives('conversation.relative_heads')}\s*$",
                              re.IGNORECASE),
                   re.compile(rf"{v.edge}{v.alternatives('conversation.determiners')}\s*"
                              r"(\w[\w-]*)", re.IGNORECASE),
                   tuple((re.compile(rf"{v.edge}{v.alternatives('conversation.sibling_' + k)}"
                                     rf"(?:\s*({v.alternatives('conversation.pronouns')}))?"
                                     rf"{v.edge}", re.IGNORECASE), k)
                         for k in ("up", "down", "lowest", "highest", "other")),
                   re.compile(rf"{v.alternatives('conversation.deictic')}{v.edge}",
                              re.IGNORECASE),
                   anywhere("indefinites"),
                   re.compile(rf"{v.edge}{v.alternatives('conversation.period_articles')}\s*"
                              rf"({alternation(period_words)}){v.edge}", re.IGNORECASE),
                   re.compile(rf"{v.edge}{v.alternatives('articles')}\s+(\w[\w-]*)\s+"
                              rf"{v.alternatives('conversation.kind_ones')}{v.edge}",
                              re.IGNORECASE),
                   anywhere("first_talked"),
                   frozenset(o.lower() for k in ("quarter", "half")
                             for o in v.periods[k].get("ordinals", {})))


_COMPILED: dict[str, ConversationWords] = {}


def conversation_words(v: Vocabulary) -> ConversationWords:
    if v.code not in _COMPILED:
        _COMPILED[v.code] = ConversationWords.of(v)
    return _COMPILED[v.code]


@dataclass(frozen=True)
class _Opening:
    kind: str | None  # "back", "about", "why", "and" or None
    focus: str  # X of "what about X" / "going back to X" ("" otherwise)
    body: str  # the rest of the question, still to be read
    again: bool = False  # "and for X": the same question asked of X


def _opening(q: str, w: ConversationWords) -> _Opening:
    for kind, pattern in (("back", w.back), ("about", w.about)):
        m = pattern.match(q)
        if m:
            rest = q[m.end():].strip()
            parts = _CLAUSE_BREAK.split(rest, maxsplit=1)
            focus, body = (parts[0], parts[1]) if len(parts) == 2 else (rest, "")
            again = kind == "about" and w.again.match(q) is not None
            return _Opening(kind, focus.rstrip("?!. "), body, again)
    m = w.why.match(q)
    if m:
        return _Opening("why", "", q)
    m = w.continuation.match(q)
    if m:
        return _Opening("and", "", q[m.end():].strip())
    return _Opening(None, "", q)


def _names(text: str, rd: Reading) -> list[str]:
    """The names of a text, in order: multi-word names and codes, then amounts."""
    # a name's possessive is the name: "E103's" → "E103"
    text = _POSSESSIVE.sub("", text)
    out = [n for n in rd.name_spans(text) if not _CJK.search(n)]
    out += [c for c in words(text) if rd.is_code(c) and not any(c in n for n in out)]
    out += [a for a in _AMOUNT.findall(text) if not any(a in n for n in out)]
    return list(dict.fromkeys(out))


def _shape(name: str, rd: Reading) -> tuple[str, frozenset[str]]:
    families = frozenset(code_family(t) for t in words(name) if rd.is_code(t))
    if families - {""}:
        return "code", families - {""}
    if _AMOUNT.fullmatch(name.strip()):
        return "amount", frozenset()
    return "name", frozenset()


def _same_shape(a: str, b: str, rd: Reading) -> bool:
    (ka, fa), (kb, fb) = _shape(a, rd), _shape(b, rd)
    return ka == kb and (ka != "code" or bool(fa & fb))


def _pronoun_refers_back(body: str, w: ConversationWords, rd: Reading) -> re.Match[str] | None:
    """The first pronoun of `body` when nothing is named before it (in "can a Starter tenant
    change its region" the pronoun points at the tenant, not back at the history; in "when
    someone leaves …" at the someone), and it opens no relative clause ("anything that …")."""
    for m in w.pronoun.finditer(body):
        # "when someone leaves, how quickly is their access removed?": its own someone
        if _names(body[:m.start()], rd) or w.indefinite.search(body[:m.start()]):
            return None
        # "is there anything that doesn't work on it?": "that" opens a clause, "it" points back
        if not w.relative.search(body[:m.start()]):
            return m
    return None


def _turn_text(t: Turn) -> str:
    return " ".join([t.searched, t.answer, *t.cited])


def _stems(text: str, rd: Reading) -> set[str]:
    return {stem(x) for x in rd.content_words(text)}


def _referred(history: Sequence[Turn], opening: _Opening, rd: Reading) -> int:
    """Index of the turn a follow-up refers to: the last, or, for "going back to X", the
    latest earlier turn whose question shares a word with X (else whose answer or cited
    titles do: an answer names many things in passing, a question only what it asked)."""
    last = len(history) - 1
    if opening.kind != "back":
        return last
    want = _stems(opening.focus, rd)
    for text in (lambda t: t.searched, _turn_text):
        for i in range(last - 1, -1, -1):
            if want & _stems(text(history[i]), rd):
                return i
    return max(last - 1, 0)


def _answer_sentences(answer: str, rd: Reading) -> list[str]:
    """An earlier answer's sentences, without its citation markers ("[1]")."""
    return rd.split_sentences(CITATION.sub(" ", answer))


def _put(q: str, m: re.Match[str], text: str) -> str:
    """`q` with what `m` matched in it read as `text`."""
    return f"{q[:m.start()]}{text}{q[m.end():]}"


def _period_kind(noun: str, w: ConversationWords) -> bool:
    """Whether `noun` names a kind of period ("quarter", "year"), not a thing."""
    return w.year.fullmatch(noun) is not None or any(k.fullmatch(noun) for k, _, _ in w.periods)


def _said(answer: str, w: ConversationWords, rd: Reading) -> list[str]:
    """The names an answer states: not its citation markers ("[1]"), not its sentences that
    state nothing (a decline), not what a clause denies ("the S100 is not certified; the S300
    is" names the S300), and no bare amounts (an answer's figures are no subject)."""
    out: list[str] = []
    for sentence in _answer_sentences(answer, rd):
        if any(p in sentence.lower() for p in w.not_claims):
            continue
        for clause in _CLAUSES.split(sentence):
            if not w.negation.search(clause):
                out += [n for n in _names(clause, rd)
                        if _shape(n, rd)[0] != "amount" or _VERSION.fullmatch(n)]
    return list(dict.fromkeys(out))


def _head(text: str, rd: Reading, common: Common) -> list[str]:
    """The longest run of adjacent content words of `text` (the last of equal ones): the
    noun phrase a pronoun stands for ("biggest customer" of "who's our biggest customer (cash
    end year)?"), not every word the question carried."""
    own = re.sub(r"\([^)]*\)", " ", text)  # what was carried in brackets is not its head
    text = own if rd.content_words(own) else text
    content = {x.lower() for x in rd.content_words(text) if not _AMOUNT.fullmatch(x)
               and not common(x)}
    runs: list[list[str]] = [[]]
    for part in re.split(r"[()\[\],;:]", text):
        unit = False  # the word after a number is its unit ("90 days"): a figure, no head
        for x in words(part):
            if x.lower() in content and x not in runs[-1] and not unit:
                runs[-1].append(x)
            elif runs[-1]:
                runs.append([])
            unit = _AMOUNT.fullmatch(x) is not None
        runs.append([])
    return max(reversed(runs), key=len)  # of equal runs the last: a head noun comes late


def _subject(turn: Turn, person: bool, plural: bool, w: ConversationWords,
             rd: Reading, common: Common = _nothing_common, broad: bool = False,
             head: bool = True) -> list[str]:
    """What a later turn carries over from `turn`: the names of its (standalone) question;
    for a person's pronoun ("who is that person?", "where is he based?") the first new name its
    answer gave (all of them for "they"), when it gave any; for a "which …?" question with a
    name, the version its answer gave first ("2.5.0") before the question's names; for a
    question with no name that its answer names ("which sensor is …?") the codes (else names)
    the answer gave; else the question's content words. "They"
    and "them" are never read as bare numbers. A name common to most of the knowledge base's
    documents is no subject, nor is such a word carried. "They" stands for the question's
    head noun phrase, not every word it carried (unless it is read as something else and
    the subject only added: not `head`); "all this" (`broad`) for what was asked, never a
    figure of it."""
    said = _distinct(_said(turn.answer, w, rd), common)
    if person and said:
        # one person ("he", "who is that?") is the first name the answer gave that its question
        # did not ask with: "Priya Raman", not her whole title after it ("Chief Technology
        # Officer", "Chair of …"), which would outweigh what the follow-up asks of her
        new = [n for n in said if n.lower() not in turn.searched.lower()]
        return (new or said)[:1] if not plural else said
    names = _distinct(_names(turn.searched, rd), common)
    if plural or broad:
        names = [n for n in names if _shape(n, rd)[0] != "amount"]
    if said and w.by_name.search(turn.searched):
        if not names:
            return [n for n in said if _shape(n, rd)[0] == "code"] or said
        # "which firmware fixed the Modbus leak?": what the answer named that the question
        # did not ("2.5.0") is what a later turn asks of, with the question's own names
        # (a release, a version: a name that a plain name of the answer is not)
        asked = {x.lower() for x in words(turn.searched)}
        new = [n for n in said if _VERSION.fullmatch(n) and n.lower() not in asked]
        if new:
            return [new[0], *_with_kind(turn.searched, names, w, rd)]
    if names:
        return _with_kind(turn.searched, names, w, rd)
    if plural and head:
        return _head(turn.searched, rd, common)
    return [x for x in rd.content_words(turn.searched)
            if not _AMOUNT.fullmatch(x) and not common(x)][:MAX_CARRIED_WORDS]


def _named_by_answer(turn: Turn, w: ConversationWords, rd: Reading, common: Common,
                     headings: Headings) -> str | None:
    """What `turn`'s answer named that its typed question did not: when the question named
    nothing of its own ("can we get more?", its subject carried), the first phrase of a
    claim of the answer that puts a word of its own before a word of what was searched ("an
    extended warranty" after "… (Edge G2 warranty)"); None otherwise. The answer introduced
    it, and a later "what's the price?" asks about it, not the subject it was carried with."""
    if _names(turn.question, rd) or len(rd.content_words(turn.question)) > w.ellipsis_words:
        return None
    typed, searched = _stems(turn.question, rd), _stems(turn.searched, rd)
    carried = turn.searched.lower()
    for sentence in _answer_sentences(turn.answer, rd):
        if any(p in sentence.lower() for p in w.not_claims):
            continue
        content = {x.lower() for x in rd.content_words(sentence)}
        ws = words(sentence)
        for i in range(1, len(ws)):
            x, head = ws[i - 1], ws[i]
            # the word before is new to what was searched, or was carried with it already
            if (stem(head) in searched and stem(head) not in typed and stem(x) not in typed
                    and (stem(x) not in searched or f"{x.lower()} {head}" in carried)
                    and x.isalpha() and x.lower() in content and head.lower() in content
                    and head.isalpha() and head.islower() and not common(x)
                    # a capital mid-sentence is part of a name, not a word put before one
                    and (i == 1 or x[:1].islower()) and headings(f"{x} {head}")):
                return f"{x.lower()} {head}"
    return None


def _moved(name: str, q: str, w: ConversationWords, kind: str = "") -> str | None:
    """`name` (a period: "Q2 FY2024", "FY2024") moved by the step `q` asks for ("a quarter
    later" → "Q3 FY2024", "a year earlier" → "FY2023"); None when `q` asks none of it. The
    period kind is read from `kind` when given (the step's own words name none)."""
    step = 1 if w.later.search(q) else -1 if w.earlier.search(q) else 0
    q = kind or q
    year = re.search(rf"{re.escape(w.year_code)}(\d{{4}})", name)
    if not step or year is None:
        return None
    y = int(year.group(1))
    for words_, code, count in w.periods:
        part = re.search(rf"(?<!\w){re.escape(code)}([1-{count}])(?!\w)", name)
        if part and words_.search(q):
            n = int(part.group(1)) - 1 + step
            y, n = y + n // count, n % count
            name = name[:part.start(1)] + str(n + 1) + name[part.end(1):]
            return name.replace(year.group(0), f"{w.year_code}{y}")
    if w.year.search(q):
        return name.replace(year.group(0), f"{w.year_code}{y + step}")
    return None


def _with_kind(text: str, names: list[str], w: ConversationWords, rd: Reading) -> list[str]:
    """Each name with the content word written right after it when an article comes before
    it or the question ends after it: what kind of thing it names ("the Austin office", "the
    S200 sensor", "who leads Austin office?"; not the verb of "does the S300 cost?")."""
    typed = text
    text = _POSSESSIVE.sub("", text)  # "the S200's battery": the S200 battery
    content = {x.lower() for x in rd.content_words(text)}
    out = []
    for n in names:
        m = re.search(rf"(?<!\w){re.escape(n)}\s+(\w[\w-]*)(\s*[?!.？]?\s*$)?", text)
        before = text[:m.start()] if m else ""
        # after a copula the next word is asked of the name, unless the name owns it ("S200's")
        asked = w.copula.match(before) is not None and not re.search(
            rf"(?<!\w){re.escape(n)}['’]s(?!\w)", typed)
        kind = m.group(1) if m and not w.auxiliary.search(before) and not asked and (
            m.group(2) is not None or w.article.search(before)) else ""
        if kind.lower() in content and not rd.is_code(kind) and not any(kind in o for o in names):
            out.append(f"{n} {kind}")
            continue
        # a code's kind may come before it: "does error code E201 …", "the error E104"
        m = re.search(rf"{w.lead_in}\s+((?:[\w-]+\s+){{1,2}}){re.escape(n)}(?!\w)", text,
                      re.IGNORECASE)
        lead = m.group(1).split() if m and _shape(n, rd)[0] == "code" else []
        ok = bool(lead) and all(x.lower() in content and not rd.is_code(x) for x in lead)
        out.append(f"{' '.join(lead)} {n}" if ok else n)
    return out


def _aspect(turn: Turn, subject: list[str], rd: Reading,
            common: Common = _nothing_common) -> list[str]:
    """What `turn` asked about its subject: its question's content words, not the subject's
    ("operating temperature range" of "… range of the S300?")."""
    held = {x.lower() for s in subject for x in words(s)}
    return [x for x in rd.content_words(turn.searched)
            if x.lower() not in held and not common(x)][:MAX_CARRIED_WORDS]


def _substitute(question: str, old_names: list[str], new: list[str],
                rd: Reading) -> tuple[str, list[str]]:
    """`question` with each new name in place of its latest earlier name of the same shape;
    the new names that found no place are returned."""
    unplaced = []
    for n in new:
        same = [o for o in old_names if _same_shape(o, n, rd) and o in question]
        if same:
            question = question.replace(same[-1], n)
        else:
            unplaced.append(n)
    return question, unplaced


def _tidy(text: str, like: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" ,;:")
    text = re.sub(r"\s+([?.!,])", r"\1", text)
    if like.rstrip().endswith("?") and not text.endswith("?"):
        text = text.rstrip(".!") + "?"
    return text[:1].upper() + text[1:]


def _with_subject(text: str, subject: list[str], w: ConversationWords, rd: Reading) -> str:
    """`text` with the subject it lacks added: a period joined as one ("the churn in Q1
    FY2025", which the search reads as the period asked about), the rest in brackets."""
    missing = list(dict.fromkeys(s for s in subject if s.lower() not in text.lower()))
    if not missing:
        return text
    periods = [s for s in missing if all(rd.is_period(x) for x in s.split())]
    rest = [s for s in missing if s not in periods]
    text = text.rstrip("?!. ")
    if periods:
        text = f"{text} {w.period_joiner} {' '.join(periods)}" if w.period_joiner else \
            f"{text}{' '.join(periods)}"
    return f"{text} ({' '.join(rest)})?" if rest else f"{text}?"


def _a_choice(q: str, w: ConversationWords, rd: Reading) -> bool:
    """An answer to a clarifying question: one of its options or a few words ("S200", "the
    Pulse one"), not a question of its own."""
    return not q.rstrip().endswith(("?", "？")) and len(rd.content_words(q)) <= w.ellipsis_words


def condense(history: Sequence[Turn], question: str, words: Vocabulary,
             rd: Reading = ENGLISH_READING, common: Common = _nothing_common,
             siblings: Siblings = _no_siblings, headings: Headings = _no_headings) -> Condensed:
    """`question` made standalone from `history` (oldest turn first), read with `words`, the
    knowledge base's language's vocabulary (`language.vocabulary.vocabulary(code)`), `rd`,
    its reading (`language.text.reading(code)`), and `common`, which says of a word whether
    it occurs in most of the knowledge base's documents, `siblings`, which gives the codes
    of a code's family in the knowledge base, in order, and `headings`, which says of a
    phrase whether it heads a document, section or line of it.

    The rule's shape: the first turn, the choice answering a clarifying question and a
    question with no sign of referring back are taken as they come; any other is read against
    the turn it refers to (`_follow_up`) and rewritten by the first of `_REWRITES` that
    reads it."""
    q = " ".join(question.split())
    if not q:
        raise ValueError("the question is empty")
    if not history:
        return Condensed(q, TurnKind.STANDALONE, "the first turn: nothing to refer to")
    w = conversation_words(words)
    if history[-1].asked_back and _a_choice(q, w, rd):
        return _chosen(history, q)
    typed, q = q, _sibling_named(history, q, w, rd, siblings)
    pointed = _pointed_at(history, q, w, rd, common)
    if pointed is not None:
        q, at, what = pointed
        opening = _opening(q, w)
        if _pronoun_refers_back(opening.body, w, rd) is None:
            body = opening.body if opening.kind == "and" else q
            return Condensed(_tidy(body, q), TurnKind.FOLLOW_UP,
                             f"'{what}' read as what turn {at + 1} named", subject=what,
                             refers_to=at)
    period = _the_period(history, q, w, rd)
    if period is not None:
        q, at, what = period
        if _pronoun_refers_back(_opening(q, w).body, w, rd) is None:
            # "what was the total for the year?" asks the year of what that turn asked about
            subject = [s for s in _subject(history[at], False, False, w, rd, common)
                       if not all(rd.is_period(x) for x in s.split())]
            return Condensed(_tidy(_with_subject(q, subject, w, rd), q), TurnKind.FOLLOW_UP,
                             f"'{what}' read as the period turn {at + 1} was about, with its"
                             " subject", subject=" ".join([what, *subject]), refers_to=at)
    opening = _opening(q, w)
    pronoun = _pronoun_refers_back(opening.body, w, rd)
    opening = _and_with_a_name(opening, pronoun, w, rd)
    if opening.kind is None and pronoun is None and not _too_short(q, w, rd):
        if q != typed:  # "can the other one …?": its sibling named, a follow-up all the same
            return Condensed(_tidy(q, q), TurnKind.FOLLOW_UP,
                             "a relative reference: the code it means named",
                             refers_to=len(history) - 1)
        return _stands_alone(history[-1], q, rd)
    f = _follow_up(history, q, opening, pronoun, w, rd, common, headings)
    text, how = next(done for rewrite in _REWRITES if (done := rewrite(f, w, rd)) is not None)
    return Condensed(_tidy(text, q), TurnKind.FOLLOW_UP, f"{f.sign}: {'; '.join([*f.how, how])}",
                     subject=" ".join(f.subject), refers_to=f.at)


# -- what a question points back at with words of its own -------------------------------------

def _sibling_named(history: Sequence[Turn], q: str, w: ConversationWords, rd: Reading,
                   siblings: Siblings) -> str:
    """`q` with "the one above", "the cheap one", "the other one" replaced by the code it
    means: another of the family of the code the conversation is about (`siblings`), or as
    typed. A
    reference with a pronoun ("the one above it") steps from the last turn's code; one without
    ("and the one below?" after "and the one above it?") from the code the earlier relative
    references stepped from too."""
    for pattern, step in w.siblings:
        m = pattern.search(q)
        if m is None:
            continue
        at = len(history) - 1
        if m.group(1) is None and step != "other":
            while at > 0 and any(p.search(history[at].question) for p, _ in w.siblings):
                at -= 1
        for code in (c for c in _names(history[at].searched, rd)
                     if rd.is_code(c) and not rd.is_period(c)):
            family = [c.upper() for c in siblings(code)]
            if code.upper() not in family or len(family) < 2:
                continue
            i = family.index(code.upper())
            # "the other one": the one of two talked about that the last turn was not about;
            # with only one talked about, the one left of a family of three
            talked = {c.upper() for t in history for c in words(t.searched)}
            spoken = [c for c in family if c in talked and c != family[i]]
            left = [c for c in family if c not in talked]
            other = spoken if spoken else left
            target = {"up": family[i + 1] if i + 1 < len(family) else None,
                      "down": family[i - 1] if i > 0 else None,
                      "lowest": family[0], "highest": family[-1],
                      "other": other[0] if len(other) == 1 else None}[step]
            if target is not None:
                return _put(q, m, target)
    return q


def _pointed_at(history: Sequence[Turn], q: str, w: ConversationWords, rd: Reading,
                common: Common) -> tuple[str, int, str] | None:
    """"that quarter", "that error", "that policy": `q` with the determiner and its noun read
    as what the latest turn that named the noun meant by it (the question, its index, what it
    was read as), or None. A period kind is that turn's period ("that quarter" → "Q4 FY2024",
    passing over a turn between that named none); a noun of a turn's question is that turn's
    subject with it ("that error" → "E203 error"); a noun only its answer or cited titles gave
    is the name there that holds it ("that policy" → "Data Retention Policy"); "the
    enterprise one" is the name a turn gave that holds the word (`_kind_named`)."""
    kind = _kind_named(history, q, w, rd)
    if kind is not None:
        return kind
    for m in w.determiner.finditer(q):
        noun, before = m.group(1), q[:m.start()]
        # "does that apply …?", "does all this apply …?": a pronoun and a verb, not a noun
        if (not rd.content_words(noun) or w.pronoun.fullmatch(m.group(0))
                or w.auxiliary.search(before)
                or any(b.start() < m.start() < b.end() for b in w.broad.finditer(q))):
            continue
        if w.deictic.match(m.group(0)) and _period_kind(noun, w):
            continue  # "this year": the one we are in, not one talked about
        period = _period_named(history, noun, w, rd)
        found = period or _noun_named(history, noun, w, rd, common)
        if found is not None:
            at, what = found
            held = period or stem(noun) in {stem(x) for x in words(what)}
            text = what if held else f"{what} {noun}"
            return _put(q, m, text), at, what
    return _first_talked(history, q, w, rd, common)


def _first_talked(history: Sequence[Turn], q: str, w: ConversationWords, rd: Reading,
                  common: Common) -> tuple[str, int, str] | None:
    """"can we still use the first one?": `q` with it read as the first turn's subject (the
    version its answer gave, "2.4.1", with its question's names); None when `q` has none of
    it, or a period after it ("the first one this year" is the year's first, not ours)."""
    m = w.first_talked.search(q)
    if m is None or any(rd.is_period(x) for x in words(q)) or w.year.search(q) or any(
            k.search(q) for k, _, _ in w.periods):
        return None
    what = " ".join(_subject(history[0], False, False, w, rd, common))
    return (_put(q, m, what), 0, what) if what else None


def _the_period(history: Sequence[Turn], q: str, w: ConversationWords,
                rd: Reading) -> tuple[str, int, str] | None:
    """"the total for the year": `q` with an article and a period word read as the period of
    that kind the latest turn that named one was about ("FY2024" after "Q2 FY2024"), the
    turn's index and the period; None when `q` names a period of its own or steps from one
    ("the quarter before" is moved by `_moved_periods`)."""
    if any(rd.is_period(x) for x in words(q)) or w.later.search(q) or w.earlier.search(q):
        return None
    for m in w.period_article.finditer(q):
        found = _period_named(history, m.group(1), w, rd)
        if found is not None:
            at, what = found
            return _put(q, m, what), at, what
    return None


def _kind_named(history: Sequence[Turn], q: str, w: ConversationWords,
                rd: Reading) -> tuple[str, int, str] | None:
    """"the enterprise one": `q` with it read as the latest name an earlier turn gave (its
    question or answer) that holds the word ("WPA2-Enterprise"), the turn's index and the
    name; None when no turn named one. An order word ("the first one", "the last one") says
    which, not what kind, and a cited title names a document, not a thing talked about ("the
    new one" is no "New Starter Onboarding Checklist")."""
    for m in w.kind_one.finditer(q):
        want = stem(m.group(1))
        if not rd.content_words(m.group(1)) or m.group(1).lower() in w.ordinals:
            continue
        for at in range(len(history) - 1, -1, -1):
            turn = history[at]
            for text in (turn.searched, *_answer_sentences(turn.answer, rd)):
                for n in _names(text, rd):
                    # a name's parts, a hyphenated one's too: "WPA2-Enterprise"
                    if want in {stem(x) for x in re.split(r"[\s-]+", n) if x}:
                        return _put(q, m, n), at, n
    return None


def _period_named(history: Sequence[Turn], noun: str, w: ConversationWords,
                  rd: Reading) -> tuple[int, str] | None:
    """The latest turn's period of the kind `noun` names ("quarter": "Q4 FY2024"; "year":
    "FY2024")."""
    kinds = [rf"{re.escape(code)}[1-{count}]" for kind, code, count in w.periods
             if kind.fullmatch(noun)]
    year = w.year.fullmatch(noun) is not None
    if not kinds and not year:
        return None
    for at in range(len(history) - 1, -1, -1):
        for n in _names(history[at].searched, rd):
            # of a name run together with others ("S300s Q2 FY2025") only its period
            n = " ".join(x for x in n.split() if rd.is_period(x))
            if any(re.search(rf"(?<!\w){k}(?!\w)", n) for k in kinds):
                return at, n
            y = re.search(rf"{re.escape(w.year_code)}\d{{4}}", n) if year else None
            if y:
                return at, y.group(0)
    return None


def _noun_named(history: Sequence[Turn], noun: str, w: ConversationWords, rd: Reading,
                common: Common) -> tuple[int, str] | None:
    """The latest turn whose question has `noun` (its subject), else whose cited titles or
    answer do (the name or phrase there that holds it)."""
    want = stem(noun)
    if _period_kind(noun, w):
        return None  # a period kind names a period, or nothing
    for at in range(len(history) - 1, -1, -1):
        if want in _stems(history[at].searched, rd):
            return at, " ".join(_subject(history[at], False, False, w, rd, common))
    for at in range(len(history) - 1, -1, -1):
        turn = history[at]
        texts = [x for x in (*(p for t in turn.cited for p in t.split(" › ")),
                             *_answer_sentences(turn.answer, rd))
                 if want in _stems(x, rd)]
        # a name that holds the noun and more ("Data Retention Policy", "Version 2.5.0")
        for text in texts:
            for n in _names(text, rd):
                if want in {stem(x) for x in words(n)} and len(words(n)) > 1:
                    return at, n
            after = re.search(rf"(?<!\w){re.escape(noun)}\w*\s+(\d+(?:\.\d+)+)(?!\w)", text,
                              re.IGNORECASE)
            if after:
                return at, f"{noun} {after.group(1)}"
        # else the content words right before it in its sentence: "the calibration lab"
        for text in texts:
            ws = words(text)
            content = {x.lower() for x in rd.content_words(text)}
            end = next((i for i, x in enumerate(ws) if stem(x) == want), None)
            if end is None:
                continue
            start = end
            while start > 0 and end - start < 2 and ws[start - 1].lower() in content:
                start -= 1
            if start < end:
                return at, " ".join(ws[start:end + 1])
    return None


# -- the questions taken as they come ---------------------------------------------------------

def _chosen(history: Sequence[Turn], q: str) -> Condensed:
    """A choice answering the last turn's clarifying question: that question, narrowed."""
    return Condensed(narrowed(history[-1].searched, q), TurnKind.FOLLOW_UP,
                     f"the reading chosen for turn {len(history)}'s clarifying question",
                     subject=q.strip("?!. "), refers_to=len(history) - 1)


def _too_short(q: str, w: ConversationWords, rd: Reading) -> bool:
    """Whether `q` is too short to carry a subject ("is there a free trial?"); one of the
    asker's own side with words of its own to search ("how long do we keep invoices?") is a
    question of its own, however few its words."""
    own = rd.content_words(q)
    return not _names(q, rd) and len(own) <= w.ellipsis_words and not (
        w.speaker.search(q) and len(own) >= w.ellipsis_words)


def _stands_alone(last: Turn, q: str, rd: Reading) -> Condensed:
    """A question with no sign of referring back, as typed: a new topic when it shares no
    word with the last turn."""
    if _stems(q, rd) & _stems(_turn_text(last), rd):
        return Condensed(q, TurnKind.STANDALONE,
                         "no pronoun or follow-up phrase: it names its own subject")
    return Condensed(q, TurnKind.NEW_TOPIC,
                     "no pronoun or follow-up phrase, and no word of the last turn:"
                     " a new topic, the history is dropped")


# -- a follow-up, read against the turn it refers to ------------------------------------------

_SIGNS = {"back": "refers back by name", "about": "'what about'", "why": "'why'",
          "and": "opens with a continuation", None: "no subject of its own"}


@dataclass
class _FollowUp:
    """A question that refers back, read against the turn it refers to."""

    q: str
    opening: _Opening
    pronoun: re.Match[str] | None  # the pronoun that points back, if one does
    at: int  # the index of the turn it refers to
    turn: Turn
    person: bool  # the pronoun is a person ("where is he based?", "who is that?")
    reads_focus: bool  # "going back to X, what … are they?": the pronoun is X
    focus_names: list[str]  # the names of X in "what about X"
    subject: list[str]  # what it carries of the turn (a name of X's in place of the earlier)
    aspect: list[str]  # what the turn asked of its subject
    carried: list[str]  # the subject, with the aspect when asked again of another one
    how: list[str]  # what the reading did already (a name put in place of the earlier one)

    @property
    def sign(self) -> str:
        """What showed it refers back: the reason's first words."""
        if self.pronoun is not None and self.opening.kind is None:
            return f"pronoun '{self.pronoun.group(0)}'"
        return _SIGNS[self.opening.kind]


def _and_with_a_name(opening: _Opening, pronoun: re.Match[str] | None,
                     w: ConversationWords, rd: Reading) -> _Opening:
    """"and in Q3 FY2025?": a continuation that names something and says little else reads as
    "what about" it."""
    if (opening.kind == "and" and pronoun is None and _names(opening.body, rd)
            and len(rd.content_words(opening.body)) <= w.ellipsis_words):
        return _Opening("about", opening.body.rstrip("?!. "), "")
    return opening


def _moved_periods(q: str, opening: _Opening, pronoun: re.Match[str] | None, turn: Turn,
                   w: ConversationWords, rd: Reading) -> list[str]:
    """"and a quarter later?": the periods of `turn`'s question moved by the step `q` asks
    for, when `q` asks little else (none otherwise)."""
    step = w.later.search(q) or w.earlier.search(q)
    # "what about the quarter after that?" moves as "and the quarter after?" does: its X
    # names no period of its own, only the step
    stepped = opening.kind in ("and", None) or (opening.kind == "about"
                                                and not _names(f"{_LEAD} {opening.focus}", rd))
    if (step and stepped
            and (pronoun is None or pronoun.group(0).lower() in step.group(0).lower())
            and len(rd.content_words(opening.body or opening.focus)) <= w.ellipsis_words):
        # "and the one before that?" after "and the quarter before?": the step of the kind
        # the last turn stepped by
        named = any(k.search(q) for k, _, _ in w.periods) or w.year.search(q)
        kind = turn.question if not named and (w.later.search(turn.question)
                                               or w.earlier.search(turn.question)) else ""
        return [m for m in (_moved(n, q, w, kind) for n in _names(turn.searched, rd)) if m]
    return []


def _follow_up(history: Sequence[Turn], q: str, opening: _Opening,
               pronoun: re.Match[str] | None, w: ConversationWords, rd: Reading,
               common: Common, headings: Headings = _no_headings) -> _FollowUp:
    """`q` read against the turn it refers to: who or what its pronoun is, what it carries
    of that turn (a name of its own put in place of the earlier one) and what it asks again."""
    at = _referred(history, opening, rd)
    turn = history[at]
    said = pronoun.group(0).strip() if pronoun is not None else ""
    # "who is that?": the demonstrative is the person (or role) the last answer named
    # ("who's that lab certified by?": "that" with a noun after it is no person)
    person = bool(said) and (w.person.fullmatch(said) is not None or (
        w.demonstrative.fullmatch(said) is not None and w.person_question.search(q) is not None
        and pronoun is not None
        and not rd.content_words(" ".join(opening.body[pronoun.end():].split()[:1]))))
    # "what about X": X read where a capitalised first word is still a name ("Rotterdam")
    focus_names = _names(f"{_LEAD} {opening.focus}", rd) if opening.focus else []
    # "going back to X, what … are they?": the pronoun is X, the subject only added to it
    reads_focus = bool(pronoun is not None and opening.kind in ("about", "back")
                       and opening.focus and not focus_names
                       and not w.pronoun.search(opening.focus))
    subject = _subject(turn, person, bool(said) and w.plural.fullmatch(said) is not None, w, rd,
                       common, bool(said) and w.broad.fullmatch(said) is not None,
                       head=not reads_focus)
    # "what's the price?" after "can we get more?" was answered with the extended warranty:
    # the thing that answer introduced, before the subject it was carried with
    # (a question naming something of its own asks about that, unless a pronoun points back)
    introduced = None if person or focus_names or at != len(history) - 1 or (
        pronoun is None and _names(opening.body or q, rd)) else _named_by_answer(
        turn, w, rd, common, headings)
    if introduced is not None:
        subject = [introduced, *subject]
    how = []
    moved = _moved_periods(q, opening, pronoun, turn, w, rd)
    if moved:  # "and a quarter later?": turn's question asked of the next quarter
        opening, focus_names = _Opening("about", " ".join(moved), ""), moved
    if focus_names and opening.kind == "about":
        placed, unplaced = _substitute(" ".join(subject), subject, focus_names, rd)
        subject = [*placed.split(" "), *unplaced]
        how.append(f"{', '.join(focus_names)} in place of the earlier name")
    aspect = _aspect(turn, subject, rd, common)
    carried = list(subject)
    step = w.later.search(q) or w.earlier.search(q)
    if len(rd.content_words(opening.body or opening.focus)) <= w.ellipsis_words and step:
        carried += aspect  # "and the one after?": what was asked, of another one
    return _FollowUp(q, opening, pronoun, at, turn, person, reads_focus, focus_names, subject,
                     aspect, carried, how)


# -- the rewrites, one per way of referring back: each returns the standalone text and a note
# -- of how it was made, or None when the question is not its kind

def _names_asked_again(f: _FollowUp, w: ConversationWords,
                       rd: Reading) -> tuple[str, str] | None:
    """"what about the S300?": the earlier question asked again, each name of X in place of
    the earlier name of its shape."""
    if f.opening.kind != "about" or f.opening.body or not f.focus_names:
        return None
    asked = f.turn.searched
    # after "why?" the question asked again is the one the why was of, not the why
    why = w.why.match(asked) if w.why.match(f.turn.question) else None
    asked = asked[why.end():] if why and asked[why.end():].strip() else asked
    text, unplaced = _substitute(asked, _names(asked, rd), f.focus_names, rd)
    return _with_subject(text, unplaced, w, rd), f"the question of turn {f.at + 1} asked again"


def _asked_again_of(f: _FollowUp, w: ConversationWords, rd: Reading) -> tuple[str, str] | None:
    """"and for people who've left?": the earlier question asked again of X, in place of the
    name it carried."""
    if f.opening.kind != "about" or f.opening.body or not f.opening.again:
        return None
    asked, x = f.turn.searched, f.opening.focus
    held = [n for n in _names(asked, rd) if n in f.subject or any(n in s for s in f.subject)]
    # its article goes with it: "in the UK" asked of "the US people" is "in the US people"
    first, _, rest = x.partition(" ")
    focus = rest if rest and held and w.article.search(f"{first} ") and w.article.search(
        asked[:asked.find(held[-1])]) else x
    text = asked.replace(held[-1], focus) if held else f"{asked.rstrip('?!. ')} {x}?"
    return text, f"the question of turn {f.at + 1} asked of {x}"


def _new_aspect(f: _FollowUp, w: ConversationWords, rd: Reading) -> tuple[str, str] | None:
    """"what about the battery?": X, a new aspect of the earlier turn's subject."""
    if f.opening.kind != "about" or f.opening.body:
        return None
    return (_with_subject(f.opening.focus, f.carried, w, rd),
            f"a new aspect of turn {f.at + 1}'s subject")


def _why(f: _FollowUp, w: ConversationWords, rd: Reading) -> tuple[str, str] | None:
    """"why?", "why not?": why of the earlier question."""
    if (f.opening.kind != "why" or len(rd.content_words(f.opening.body)) > 1
            or f.pronoun is not None):
        return None
    return f"{f.opening.body.rstrip('?!. ')} {f.turn.searched}", f"why of turn {f.at + 1}"


def _pronoun_as_focus(f: _FollowUp, w: ConversationWords,
                      rd: Reading) -> tuple[str, str] | None:
    """"what about X, do I … those too?": the pronoun read as X, the earlier turn's subject
    added."""
    pronoun, body, x = f.pronoun, f.opening.body, f.opening.focus
    if not f.reads_focus or pronoun is None:
        return None
    text = _with_subject(body[:pronoun.start()] + x + body[pronoun.end():], f.subject, w, rd)
    return text, f"'{pronoun.group(0)}' read as {x} (turn {f.at + 1}'s subject)"


def _pronoun_as_subject(f: _FollowUp, w: ConversationWords,
                        rd: Reading) -> tuple[str, str] | None:
    """"how long does its battery last?": the pronoun read as the earlier subject, or beside
    a sibling name of the question's own as what was asked of it."""
    pronoun, body = f.pronoun, f.opening.body
    if pronoun is None:
        return None
    own = _names(body, rd)
    # "is it the same for the S100?" after the S300's warranty, "is it the same in
    # Rotterdam?" after Austin's: "it" is what was asked (the warranty), of a sibling
    # name the question gives itself, which replaces the carried one. A plain name is a
    # sibling only where the question asks for sameness: any name is the shape of any other
    # ("why does that supplier matter to Halden?" names no sibling of the supplier)
    kinds = ("code", "name") if w.sameness.search(body) else ("code",)
    what = f.aspect if not f.person and f.aspect and any(
        _shape(o, rd)[0] in kinds and _same_shape(o, s, rd)
        for o in own for s in f.subject) else f.subject
    # "it's every day now": the contraction's verb kept ("E103 is …"), not glued to a name
    after = _CONTRACTION.sub(" is", body[pronoun.end():], count=1)
    text = body[:pronoun.start()] + " ".join(what) + after
    if what is f.subject and not f.person and len(rd.content_words(body)) <= 1:
        text = _with_subject(text, [*f.subject, *f.aspect], w, rd)  # "how long does it take?"
    return text, f"'{pronoun.group(0)}' read as {' '.join(what)} (turn {f.at + 1})"


def _subject_added(f: _FollowUp, w: ConversationWords, rd: Reading) -> tuple[str, str]:
    """Anything else that refers back ("and the warranty?"): the earlier turn's subject
    added; "going back to the mileage" puts X's words first."""
    carried = f.carried
    if f.opening.kind == "back" and not w.pronoun.search(f.opening.focus):
        carried = [*rd.content_words(f.opening.focus), *carried]
    if not rd.content_words(f.opening.body or f.q):
        # "up to how much?" has no word of its own to search: what was asked, of the subject
        carried = list(dict.fromkeys([*carried, *f.aspect]))
    return (_with_subject(f.opening.body or f.q, carried, w, rd),
            f"the subject of turn {f.at + 1} added")


# tried in this order; the last reads any question that refers back
_REWRITES: tuple[Callable[[_FollowUp, ConversationWords, Reading], tuple[str, str] | None],
                 ...] = (_names_asked_again, _asked_again_of, _new_aspect, _why,
                         _pronoun_as_focus, _pronoun_as_subject, _subject_added)


class RuleCondenser:
    """The offline `Condenser` (core/decisions.py): `condense` with one language's words."""

    def __init__(self, words: Vocabulary, reading: Reading = ENGLISH_READING,
                 common: Common = _nothing_common, siblings: Siblings = _no_siblings,
                 headings: Headings = _no_headings) -> None:
        self.words = words
        self.reading = reading
        self.common = common
        self.siblings = siblings
        self.headings = headings
        self.usage = Usage()  # no model calls

    def condense(self, history: Sequence[Turn], question: str) -> Condensed:
        return condense(history, question, self.words, self.reading, self.common,
                        self.siblings, self.headings)
