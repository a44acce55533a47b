"""A rule-based planner: small talk needs no search; multi-part questions become 1..3 parts.

Rules, in order: greeting / thanks / "who are you" → a reply, no search; a spelled-out
quarter ("the third quarter of 2024") is written as documents write it (Q3 2024); a half year
("the second half of 2024", "H2 2024") → one part per quarter; two dates or
quarters → one part per date; "compare A and B P" / "A vs B" / "difference between A and B"
/ "how does A's P compare with B" / "P of A and B" → one part per entity with the shared
predicate; "X and list/what/who …", "X? Y?" → one part per clause. At most 3 parts.

The shapes of these rules are here; their words (the greetings and replies, the date and
comparison connectors, the clause openers, conditions and pronouns) are the language's data,
`language/lang/<code>.json` under "small_talk" and "grammar", read through `vocabulary.py`.
"""

from __future__ import annotations

import re

from ragloop.core.decisions import Plan
from ragloop.core.types import Usage
from ragloop.language.text import Reading
from ragloop.language.vocabulary import ENGLISH_WORDS, Vocabulary, alternation, as_list
from ragloop.retrieval.languages import month_pattern

MAX_PARTS = 3

# A code-bearing entity: optional capitalised word + a token with digits (Edge G2, S200).
CODE_ENT = r"(?:[A-Z][\w\-]*\s+)?[A-Za-z\-]*\d[\w\-]*"
# A capitalised name of up to four words (Pulse Standard, Austin, Data Retention Policy).
NAME_ENT = r"[A-Z][\w\-]*(?:\s+[A-Z0-9][\w\-]*){0,3}"
_ENT = f"(?:{CODE_ENT}|{NAME_ENT})"


class PlannerGrammar:
    """The planner's patterns, built from one language's words."""

    def __init__(self, words: Vocabulary) -> None:
        self.words = words
        self._small_talk_patterns(words)
        self._article_patterns(words)
        self._date_patterns(words)
        self._entity_patterns(words)
        self._clause_patterns(words)

    def _small_talk_patterns(self, words: Vocabulary) -> None:
        talk, alt = "small_talk", words.alternatives
        self.small_talk: list[dict] = words.get(f"{talk}.kinds")
        kinds = "|".join(f"({alternation(k['phrases'])})" for k in self.small_talk)
        self.greeting = re.compile(
            rf"^(?:{kinds})(?:[\s,!.，！。]+{alt(f'{talk}.addressees')})*[\s!.?,:)！？。，：）]*$",
            re.IGNORECASE,
        )
        self.about_me = re.compile(rf"^{alt(f'{talk}.about_me')}[\s?!.？！。]*$", re.IGNORECASE)
        self.greeting_prefix = re.compile(
            rf"^{alt(f'{talk}.greeting_prefixes')}(?:\s+{alt(f'{talk}.prefix_addressees')})?"
            r"[\s,!.:;，！。：；-]+",
            re.IGNORECASE,
        )

    def _article_patterns(self, words: Vocabulary) -> None:
        g, alt = "grammar", words.alternatives
        self.the = (words.words("articles") or [""])[0]
        self.determiner = re.compile(rf"\b({alt(f'{g}.determiners')})\s+\1\b", re.IGNORECASE)
        self.possessive = alt(f"{g}.possessive_suffixes")
        # a language with no possessive suffix (Italian, Chinese) resolves no pronoun to one
        self.possessive_suffix = (words.words(f"{g}.possessive_suffixes") or [""])[0]

    def _date_patterns(self, words: Vocabulary) -> None:
        """A quarter or half code (Q3, H1) and a financial year (FY2025), and runs of them."""
        g, alt = "grammar", words.alternatives
        of = alt(f"{g}.period_of")
        qh = f"(?:{words.period_code('quarter')}|{words.period_code('half')})"
        fy = words.year_code
        self.date = (
            rf"(?:{qh}\s*(?:{fy}\s?)?'?\d{{2,4}}|{qh}\s+{of}\s+(?:{fy}\s?)?\d{{2,4}}"
            rf"|{fy}\s?'?\d{{2,4}}|{month_pattern(words.code)}\s+(?:\d{{1,2}},?\s+)?(?:19|20)\d\d"
            rf"|(?:19|20)\d\d{re.escape(words.periods['year_suffix'])})"
        )
        year = rf"(?P<year>(?:{fy}\s?)?(?:19|20)\d\d)"
        self.quarter, self.half = words.periods["quarter"], words.periods["half"]
        self.quarter_phrase = self._period_phrase(self.quarter, year)
        self.half_phrase = self._period_phrase(
            self.half, year, rf"{re.escape(self.half['code'])}(?P<digit>[1-{self.half['count']}])"
        )
        dates = f"{g}.dates"
        opener = alt(f"{dates}.range_openers")
        gap = words.gap
        sep = (
            rf"\s*(?:[,，、]\s*|{gap}){alt(f'{dates}.connectors')}{gap}"
            rf"(?:{alt(f'{dates}.connector_followers')}{gap})?"
        )
        self.date_run = re.compile(rf"(?:\b{opener}\s+)?({self.date})((?:{sep}(?:{self.date}))+)")
        self.range_opener_before = re.compile(rf"\b{opener}\s*$")
        self.date_preposition = words.text(f"{dates}.preposition")
        self.preposition_before = re.compile(rf"\b{re.escape(self.date_preposition)}\s*$")

    def _entity_patterns(self, words: Vocabulary) -> None:
        """Entities, comparisons and lists."""
        g, alt = "grammar", words.alternatives
        the, gap = alt("articles"), words.gap
        self.entity_head = re.compile(rf"(?:{the}\s+)?({_ENT})(?:{self.possessive})?\b(.*)$")
        self.entity_tail = re.compile(
            rf"^(.*?\b{alt(f'{g}.entity_prepositions')}\s+(?:{the}\s+)?)({_ENT})$"
        )
        c = f"{g}.comparison"
        self.compare_how = re.compile(
            rf"^{alt(f'{c}.how_openers')}\s+{alt(f'{c}.auxiliaries')}\s+(?:{the}\s+)?({_ENT})"
            rf"(?:{self.possessive})?\s+(.+?)\s+{alt(f'{c}.verbs')}\s+"
            rf"{alt(f'{c}.verb_prepositions')}\s+(?:{alt(f'{c}.referents')}\s+)?(?:{the}\s+)?"
            rf"({_ENT})(?:{self.possessive})?(.*)$",
            re.IGNORECASE,
        )
        self.compare_question = words.text(f"{c}.question")
        self.compare_pair = re.compile(
            rf"^(?:{alt(f'{c}.polite')}\s+)?{alt(f'{c}.openers')}\s+(?:{the}\s+)?(.+?)\s+"
            rf"{alt(f'{c}.pair_connectors')}\s+(?:{the}\s+)?(.+)$",
            re.IGNORECASE,
        )
        self.compare_versus = re.compile(
            rf"^(?:{the}\s+)?({_ENT})\s+{alt(f'{c}.versus')}\s+(?:{the}\s+)?(.+)$"
        )
        self.aspect_opener = re.compile(rf"^{alt(f'{c}.aspect_openers')}\s+")
        ent = rf"(?:{the}\s+)?({CODE_ENT})"
        self.code_list = re.compile(
            rf"{ent}((?:\s*[,，、]\s*{ent})*\s*[,，、]?{gap}{alt(f'{g}.list_connectors')}{gap}{ent})"
        )
        self.the_before = re.compile(rf"\b{the}\s*$")
        self.the_first = re.compile(rf"{the}\s")

    def _clause_patterns(self, words: Vocabulary) -> None:
        g, alt = "grammar", words.alternatives
        k = f"{g}.clauses"
        also = alt(f"{k}.additive")
        clause_start = rf"(?:{also}\s+)?{alt(f'{k}.openers')}"
        self.clause_split = re.compile(
            rf"\s*(?:;\s*|,?\s+{alt(f'{k}.joiners')}\s+(?=(?:"
            rf"{alt(f'{k}.opener_prepositions')}\s+)?{clause_start}\b)"
            rf"|,\s*(?=(?:{also}\s+)?{alt(f'{k}.after_comma')}\b))",
            re.IGNORECASE,
        )
        # "…, which/who/where …" after a comma is a relative clause, not a new question, so
        # only "after_comma" words start a clause after a comma. A bare "what other X"
        # completes the clause before it ("… <a name> and what other <kind>?"): a part like
        # that means no split.
        self.fragment = re.compile(
            rf"^{alt(f'{k}.fragment_openers')}\s+(?:{alt(f'{k}.fragment_others')}\s+)?"
            r"(?:[\w\-]+\s+){0,2}[\w\-]+[?.!]?$",
            re.IGNORECASE,
        )
        # a lead that frames the question ("according to <a section of a document>, how …")
        self.lead = re.compile(rf"^{alt(f'{k}.framing_leads')}\b", re.IGNORECASE)
        # a condition ("if <a situation>, how much …") frames the question after it ("when"
        # does too unless it asks: "when is …").
        self.condition = re.compile(
            rf"^(?:{alt(f'{k}.conditions')}|{alternation([words.text(f'{k}.question_condition')])}"
            rf"\s+(?!{alt(f'{k}.question_auxiliaries')}\b))\b",
            re.IGNORECASE,
        )
        self.verb = re.compile(rf"\b{alt(f'{k}.verbs')}\b", re.IGNORECASE)
        self.pronoun = re.compile(rf"\b({alt(f'{k}.pronouns')})\b", re.IGNORECASE)
        self.possessive_pronouns = {w.lower() for w in words.words(f"{k}.possessive_pronouns")}
        self.question_opener = re.compile(rf"{alt(f'{k}.question_openers')}\b", re.IGNORECASE)

    def _period_phrase(self, period: dict, year: str, code: str | None = None) -> re.Pattern:
        """A spelled-out period with its year: "the third quarter of 2024", "il terzo
        trimestre del 2024", "2024年第三季度" (a year-first language: the year and its suffix
        come first, and may be left out), and `code` with its year ("H2 2024", "2024年H2")
        where a code is read too."""
        w = self.words
        alt, gap, edge = w.alternatives, w.gap, w.edge
        ordinal = rf"(?P<ordinal>{'|'.join(map(re.escape, period['ordinals']))})"
        spelled = rf"{ordinal}{gap}{alternation(as_list(period['word']))}"
        of = alt("of_words")
        if w.periods["year_first"]:
            suffix = re.escape(w.periods["year_suffix"])
            head = rf"(?:{year}{suffix}\s*(?:{of}\s*)?)?"
            coded = rf"|{code}" if code else ""  # "2024年H2"
            return re.compile(rf"{head}(?:{spelled}{coded})", re.IGNORECASE)
        coded = rf"|{code}\s+(?:{alt('grammar.period_of')}\s+)?" if code else ""
        return re.compile(
            rf"{edge}(?:{alt('articles')}{gap})?(?:{spelled}{gap}(?:{of}{gap})?{coded}){year}{edge}",
            re.IGNORECASE,
        )

    # -- small talk ------------------------------------------------------------------------

    def small_talk_reply(self, q: str) -> str | None:
        """The reply to a whole message that needs no search, by the kind of its greeting."""
        m = self.greeting.match(q)
        if not m:
            return None
        kind = next(i for i, phrase in enumerate(m.groups()) if phrase is not None)
        return self.small_talk[kind]["reply"]

    # -- text helpers ----------------------------------------------------------------------

    def clean(self, text: str) -> str:
        text = re.sub(r"\s+", " ", text).strip(" ,;")
        text = re.sub(r"\s+([?.!,])", r"\1", text)
        text = self.determiner.sub(r"\1", text)
        return text[:1].upper() + text[1:] if text else text

    def quarter_codes(self, q: str) -> str:
        """ "the third quarter of 2024" → "Q3 2024": reports name quarters by code, and a
        spelled-out quarter shares no word with them (the year alone matches every
        quarter)."""
        code, number = self.quarter["code"], self.quarter["ordinals"]

        def coded(m: re.Match[str]) -> str:
            written = f"{code}{number[m.group('ordinal').lower()]}"
            return f"{written} {m.group('year')}" if m.group("year") else written

        return self.quarter_phrase.sub(coded, q)

    # -- splits ----------------------------------------------------------------------------

    def half_parts(self, q: str) -> list[str] | None:
        """ "the second half of 2024" / "H2 2024" → one part per quarter (Q3 2024, Q4 2024):
        no document reports a half year under either name when it reports quarters."""
        m = self.half_phrase.search(q)
        if not m:
            return None
        word, digit, year = m.group("ordinal"), m.group("digit"), m.group("year")
        half = int(digit) if digit else self.half["ordinals"][word.lower()]
        code = self.quarter["code"]
        when = (lambda n: f"{code}{n} {year}") if year else (lambda n: f"{code}{n}")
        return [
            self.clean(f"{q[: m.start()]}{when(n)}{q[m.end() :]}") for n in (2 * half - 1, 2 * half)
        ]

    def date_parts(self, q: str) -> list[str] | None:
        m = self.date_run.search(q)
        if not m:
            return None
        dates = [m.group(1), *re.findall(self.date, m.group(2))]
        if len(dates) < 2 or len({d.lower() for d in dates}) < 2:
            return None
        prefix = q[: m.start()]
        lead = (
            f"{self.date_preposition} "
            if self.range_opener_before.search(q[: m.start(1)])
            and not self.preposition_before.search(prefix)
            else ""
        )
        return [self.clean(f"{prefix}{lead}{d}{q[m.end() :]}") for d in dates[:MAX_PARTS]]

    def split_entity_head(self, text: str) -> tuple[str, str] | None:
        """("S300", "battery life") from "S300 battery life"; None when it starts with no
        entity."""
        m = self.entity_head.match(text.strip())
        if not m:
            return None
        return m.group(1).strip(), m.group(2).strip()

    def split_entity_tail(self, text: str) -> tuple[str, str] | None:
        """("battery life of the", "S200") from "battery life of the S200"."""
        m = self.entity_tail.match(text.strip())
        if not m:
            return None
        return m.group(1), m.group(2).strip()

    def compare_parts(self, q: str) -> list[str] | None:
        body = q.strip().rstrip("?.! ")
        # "How does the S100's IP rating compare with the S200('s)?"
        m = self.compare_how.match(body)
        if m:
            pred = f"{m.group(2)} {m.group(4).strip()}".strip()
            return [
                self.clean(self.compare_question.format(entity=e, predicate=pred))
                for e in (m.group(1), m.group(3))
            ]
        m = self.compare_pair.match(body) or self.compare_versus.match(body)
        if not m:
            return None
        a, b = m.group(1).strip(), m.group(2).strip()
        a_head, b_head = self.split_entity_head(a), self.split_entity_head(b)
        if a_head and b_head and not a_head[1] and b_head[1]:
            pred = b_head[1]  # "S200 and S300 battery life"
            return [self.clean(f"{a_head[0]} {pred}"), self.clean(f"{b_head[0]} {pred}")]
        if a_head and b_head and a_head[1] and not b_head[1]:
            pred = a_head[1]  # "the S200 battery life with the S300"
            pred_b = self.aspect_opener.sub("", pred)  # "… in terms of price"
            return [self.clean(f"{a_head[0]} {pred_b}"), self.clean(f"{b_head[0]} {pred_b}")]
        a_tail = self.split_entity_tail(a)
        if a_tail and b_head and not b_head[1]:
            return [self.clean(f"{a_tail[0]} {a_tail[1]}"), self.clean(f"{a_tail[0]} {b_head[0]}")]
        if a_head and b_head:
            return [self.clean(a), self.clean(b)]
        return None

    def list_parts(self, q: str) -> list[str] | None:
        """ "P of the S100, the S200 and the Edge G2" → one part per entity (codes only, so
        "research and development" never splits)."""
        m = self.code_list.search(q)
        if not m:
            return None
        names = [m.group(1), *re.findall(CODE_ENT, m.group(2))]
        names = [n.strip() for n in names if n.strip()]
        if len(names) < 2 or len({n.lower() for n in names}) < 2:
            return None
        lead = q[: m.start()]
        if not self.the_before.search(lead) and self.the_first.match(m.group(0)):
            lead += f"{self.the} "
        return [self.clean(f"{lead}{n}{q[m.end() :]}") for n in names[:MAX_PARTS]]

    def clause_parts(self, q: str, rd: Reading) -> list[str]:
        pieces = [p for p in re.split(r"(?<=\?)\s+", q.strip()) if p.strip()]
        out: list[str] = []
        for piece in pieces:
            out.extend(self.clause_split.split(piece))
        out = [p.strip() for p in out if p and len(rd.content_words(p)) >= 1]
        if len(out) >= 2 and self.condition.match(out[0]) and not out[0].endswith("?"):
            out = [f"{out[0]}, {out[1]}", *out[2:]]  # the condition belongs to the next clause
        if (
            len(out) < 2
            or any(self.fragment.match(p) and not self.verb.search(p) for p in out)
            or (self.lead.match(out[0]) and not self.verb.search(out[0]))
        ):
            return [q.strip()]
        first = out[0]
        # a pronoun stands for a thing, never for a period ("how long do we take to inspect
        # one once it arrives" after "… as of mid-2025": "it" is not mid-2025)
        ents = [e for e in rd.entities(first) if not e.isdigit() and not rd.is_period(e)]
        topic = ents[0] if ents else " ".join(rd.content_words(first)[:3])
        resolved = [first]
        for part in out[1:]:
            if ents and self.pronoun.search(part):
                part = self.pronoun.sub(
                    lambda m: (
                        f"{topic}{self.possessive_suffix}"
                        if m.group(1).lower() in self.possessive_pronouns
                        else topic
                    ),
                    part,
                )
            elif not rd.entities(part) and len(rd.content_words(part)) < 2 and topic:
                part = f"{part.rstrip('?.! ')} ({topic})"
            resolved.append(part)
        return [
            self.clean(p if p.endswith("?") or not self.question_opener.match(p) else p + "?")
            for p in resolved
        ]


ENGLISH = PlannerGrammar(ENGLISH_WORDS)


class LocalPlanner:
    """Rule-based planner. `scope` (e.g. `describe_scope(kb)`) is quoted in the reply to
    "what can you do?"; `words` is the language whose words the rules read (English)."""

    def __init__(
        self,
        scope: str | None = None,
        max_parts: int = MAX_PARTS,
        *,
        words: Vocabulary,
        reading: Reading,
    ):
        self.scope = scope
        self.reading = reading  # the knowledge base's language (its stop words too)
        self.max_parts = max_parts
        self.grammar = ENGLISH if words is ENGLISH_WORDS else PlannerGrammar(words)
        self.usage = Usage()  # no model calls

    def plan(self, question: str) -> Plan:
        g = self.grammar
        q = " ".join((question or "").split())
        if not q:
            return Plan(
                False, [], reply=g.words.text("small_talk.empty_reply"), reason="empty question"
            )
        reply = g.small_talk_reply(q)
        if reply is not None:
            return Plan(False, [], reply=reply, reason="small talk: no search needed")
        if g.about_me.match(q):
            reply = g.words.text("small_talk.about_me_reply")
            if self.scope:
                reply += f" {self.scope}"
            return Plan(False, [], reply=reply, reason="question about the assistant itself")
        q = g.clean(g.greeting_prefix.sub("", q)) or q
        parts, reason = self._split(g.quarter_codes(q))
        parts = [p for p in dict.fromkeys(parts) if p]
        if len(parts) > self.max_parts:
            parts = [*parts[: self.max_parts - 1], " ".join(parts[self.max_parts - 1 :])]
        if len(parts) < 2:
            return Plan(True, parts or [q], reason="one part")
        return Plan(True, parts, reason=reason)

    def _split(self, q: str) -> tuple[list[str], str]:
        clauses = self.grammar.clause_parts(q, self.reading)
        if len(clauses) > 1:
            out: list[str] = []
            for c in clauses:
                sub, _ = self._split_one(c)
                out.extend(sub)
            return out, f"{len(clauses)} clauses"
        return self._split_one(q)

    def _split_one(self, q: str) -> tuple[list[str], str]:
        g = self.grammar
        for fn, why in (
            (g.half_parts, "a half year: one part per quarter"),
            (g.date_parts, "two or more dates/periods"),
            (g.compare_parts, "a comparison"),
            (g.list_parts, "several named entities"),
        ):
            parts = fn(q)
            if parts and len(parts) >= 2:
                return parts, why
        return [q], "one part"
