"""A rule-based planner: small talk needs no search; multi-part questions become 1..3 parts.

Rules, in order: greeting / thanks / "who are you" → a reply, no search; a spelled-out
quarter ("the third quarter of 2024") is written as documents write it (Q3 2024); a half year
("the second half of 2024", "H2 2024") → one part per quarter; two dates or
quarters → one part per date; "compare A and B P" / "A vs B" / "difference between A and B"
/ "how does A's P compare with B" / "P of A and B" → one part per entity with the shared
predicate; "X and list/what/who …", "X? Y?" → one part per clause. At most 3 parts.
"""

from __future__ import annotations

import re

from ragloop.core.decisions import Plan
from ragloop.core.types import Usage
from ragloop.offline.text import content_words, entities, is_period
from ragloop.offline.vocabulary import ENGLISH_WORDS
from ragloop.retrieval.languages import month_pattern

MAX_PARTS = 3

_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|howdy|yo|greetings|good\s+(?:morning|afternoon|evening|day)"
    r"|thanks?(?:\s+you)?(?:\s+(?:very|so)\s+much)?|thank\s+you|thx|cheers|ta"
    r"|how\s+are\s+you(?:\s+doing)?(?:\s+today)?|how's\s+it\s+going|what'?s\s+up|sup"
    r"|bye|goodbye|see\s+you|ok(?:ay)?|cool|great|nice|perfect|awesome)"
    r"(?:[\s,!.]+(?:there|ragloop|bot|friend|all|everyone|again|a\s+lot|mate))*[\s!.?,:)]*$",
    re.IGNORECASE)
_ABOUT_ME = re.compile(
    r"^(?:who\s+are\s+you|what\s+are\s+you|what\s+can\s+you\s+do|how\s+do(?:es)?\s+(?:this|you)"
    r"\s+work|help|what\s+do\s+you\s+do)[\s?!.]*$", re.IGNORECASE)
_GREETING_PREFIX = re.compile(
    r"^(?:hi|hello|hey|hiya|good\s+(?:morning|afternoon|evening))(?:\s+there)?[\s,!.:;-]+",
    re.IGNORECASE)

_MONTH = month_pattern()
_V = ENGLISH_WORDS
# a quarter or half code (Q3, H1) and a financial year (FY2025), from the vocabulary's data
_QH = f"(?:{_V.period_code('quarter')}|{_V.period_code('half')})"
_FY = _V.year_code
_OF = _V.alternatives("of_words")
_THE = _V.alternatives("articles")
DATE = (rf"(?:{_QH}\s*(?:{_FY}\s?)?'?\d{{2,4}}|{_QH}\s+of\s+(?:{_FY}\s?)?\d{{2,4}}"
        rf"|{_FY}\s?'?\d{{2,4}}|{_MONTH}\s+(?:\d{{1,2}},?\s+)?(?:19|20)\d\d|(?:19|20)\d\d)")
# A code-bearing entity: optional capitalised word + a token with digits (Edge G2, S200).
CODE_ENT = r"(?:[A-Z][\w\-]*\s+)?[A-Za-z\-]*\d[\w\-]*"
# A capitalised name of up to four words (Pulse Standard, Austin, Data Retention Policy).
NAME_ENT = r"[A-Z][\w\-]*(?:\s+[A-Z0-9][\w\-]*){0,3}"
_SEP = r"\s*(?:,\s*|\s+)(?:and|or|vs\.?|versus|compared\s+(?:to|with)|to)\s+(?:the\s+|in\s+)?"


def _clean(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip(" ,;")
    text = re.sub(r"\s+([?.!,])", r"\1", text)
    text = re.sub(r"\b(the|a|an)\s+\1\b", r"\1", text, flags=re.IGNORECASE)
    return text[:1].upper() + text[1:] if text else text


_YEAR_RE = rf"((?:{_FY}\s?)?(?:19|20)\d\d)"
_QUARTER = _V.periods["quarter"]
_HALF = _V.periods["half"]
_QUARTER_NUMBER: dict[str, int] = _QUARTER["ordinals"]
_QUARTER_PHRASE = re.compile(rf"\b(?:{_THE}\s+)?({'|'.join(_QUARTER_NUMBER)})\s+"
                             rf"{re.escape(_QUARTER['word'])}\s+(?:{_OF}\s+)?{_YEAR_RE}\b",
                             re.IGNORECASE)
_HALF_NUMBER: dict[str, int] = _HALF["ordinals"]
_HALF_PHRASE = re.compile(rf"\b(?:{_THE}\s+)?(?:({'|'.join(_HALF_NUMBER)})\s+"
                          rf"{re.escape(_HALF['word'])}\s+(?:{_OF}\s+)?"
                          rf"|{re.escape(_HALF['code'])}([1-{_HALF['count']}])\s+(?:of\s+)?)"
                          rf"{_YEAR_RE}\b", re.IGNORECASE)


def quarter_codes(q: str) -> str:
    """"the third quarter of 2024" → "Q3 2024": reports name quarters by code, and a
    spelled-out quarter shares no word with them (the year alone matches every quarter)."""
    return _QUARTER_PHRASE.sub(
        lambda m: f"{_QUARTER['code']}{_QUARTER_NUMBER[m.group(1).lower()]} {m.group(2)}", q)


def _half_parts(q: str) -> list[str] | None:
    """"the second half of 2024" / "H2 2024" → one part per quarter (Q3 2024, Q4 2024): no
    document reports a half year under either name when it reports quarters."""
    m = _HALF_PHRASE.search(q)
    if not m:
        return None
    word, digit, year = m.groups()
    half = int(digit) if digit else _HALF_NUMBER[word.lower()]
    code = _QUARTER["code"]
    return [_clean(f"{q[: m.start()]}{code}{n} {year}{q[m.end():]}")
            for n in (2 * half - 1, 2 * half)]


def _date_parts(q: str) -> list[str] | None:
    pat = re.compile(rf"(?:\b(?:from|between)\s+)?({DATE})((?:{_SEP}(?:{DATE}))+)")
    m = pat.search(q)
    if not m:
        return None
    dates = [m.group(1), *re.findall(DATE, m.group(2))]
    if len(dates) < 2 or len({d.lower() for d in dates}) < 2:
        return None
    prefix = q[: m.start()]
    lead = "in " if re.search(r"\b(?:from|between)\s*$", q[: m.start(1)]) and not re.search(
        r"\bin\s*$", prefix) else ""
    return [_clean(f"{prefix}{lead}{d}{q[m.end():]}") for d in dates[:MAX_PARTS]]


def _split_entity_head(text: str) -> tuple[str, str] | None:
    """("S300", "battery life") from "S300 battery life"; None when it starts with no entity."""
    m = re.match(rf"(?:the\s+)?({CODE_ENT}|{NAME_ENT})(?:'s|’s)?\b(.*)$", text.strip())
    if not m:
        return None
    return m.group(1).strip(), m.group(2).strip()


def _split_entity_tail(text: str) -> tuple[str, str] | None:
    """("battery life of the", "S200") from "battery life of the S200"."""
    m = re.match(rf"^(.*?\b(?:of|for|in|on|from|at|between)\s+(?:the\s+)?)({CODE_ENT}|{NAME_ENT})$",
                 text.strip())
    if not m:
        return None
    return m.group(1), m.group(2).strip()


def _compare_parts(q: str) -> list[str] | None:
    body = q.strip().rstrip("?.! ")
    # "How does the S100's IP rating compare with the S200('s)?"
    m = re.match(rf"^(?:how|in what way)\s+(?:does|do|did|is|are)\s+(?:the\s+)?({CODE_ENT}|"
                 rf"{NAME_ENT})(?:'s|’s)?\s+(.+?)\s+(?:compare|differ|stack up)\s+"
                 rf"(?:with|to|from|against)\s+(?:that\s+of\s+|those\s+of\s+)?(?:the\s+)?"
                 rf"({CODE_ENT}|{NAME_ENT})(?:'s|’s)?(.*)$", body, re.IGNORECASE)
    if m:
        pred = f"{m.group(2)} {m.group(4).strip()}".strip()
        return [_clean(f"What is the {m.group(1)} {pred}?"),
                _clean(f"What is the {m.group(3)} {pred}?")]
    m = re.match(r"^(?:please\s+)?(?:compare|contrast|(?:what\s+(?:is|are)\s+)?(?:the\s+)?"
                 r"differences?\s+between)\s+(?:the\s+)?(.+?)\s+(?:and|with|to|against|vs\.?|"
                 r"versus)\s+(?:the\s+)?(.+)$", body, re.IGNORECASE)
    if not m:
        m = re.match(rf"^(?:the\s+)?({CODE_ENT}|{NAME_ENT})\s+(?:vs\.?|versus)\s+(?:the\s+)?(.+)$",
                     body)
    if not m:
        return None
    a, b = m.group(1).strip(), m.group(2).strip()
    a_head, b_head = _split_entity_head(a), _split_entity_head(b)
    if a_head and b_head and not a_head[1] and b_head[1]:
        pred = b_head[1]  # "S200 and S300 battery life"
        return [_clean(f"{a_head[0]} {pred}"), _clean(f"{b_head[0]} {pred}")]
    if a_head and b_head and a_head[1] and not b_head[1]:
        pred = a_head[1]  # "the S200 battery life with the S300"
        pred_b = re.sub(r"^(?:in|on|for)\s+terms\s+of\s+", "", pred)
        return [_clean(f"{a_head[0]} {pred_b}"), _clean(f"{b_head[0]} {pred_b}")]
    a_tail = _split_entity_tail(a)
    if a_tail and b_head and not b_head[1]:
        return [_clean(f"{a_tail[0]} {a_tail[1]}"), _clean(f"{a_tail[0]} {b_head[0]}")]
    if a_head and b_head:
        return [_clean(a), _clean(b)]
    return None


def _list_parts(q: str) -> list[str] | None:
    """ "P of the S100, the S200 and the Edge G2" → one part per entity (codes only, so
    "research and development" never splits)."""
    ent = rf"(?:the\s+)?({CODE_ENT})"
    m = re.search(rf"{ent}((?:\s*,\s*{ent})*\s*,?\s+(?:and|or|vs\.?|versus)\s+{ent})", q)
    if not m:
        return None
    names = [m.group(1), *re.findall(CODE_ENT, m.group(2))]
    names = [n.strip() for n in names if n.strip()]
    if len(names) < 2 or len({n.lower() for n in names}) < 2:
        return None
    lead = q[: m.start()]
    if not re.search(r"\bthe\s*$", lead) and re.match(r"the\s", m.group(0)):
        lead += "the "
    return [_clean(f"{lead}{n}{q[m.end():]}") for n in names[:MAX_PARTS]]


_CLAUSE_START = (r"(?:also\s+)?(?:list|name|give|describe|explain|tell|summari[sz]e|show|what|"
                 r"who|whom|whose|which|how|when|where|why|is|are|does|do|did|can|could|should)")
# "…, which/who/where …" after a comma is a relative clause, not a new question, so only
# these start a clause after a comma. A bare "what other X" completes the clause before it
# ("… the Norsemen and what other ethnic group?"): a part like that means no split.
_FRAGMENT = re.compile(r"^(?:what|which)\s+(?:other\s+)?(?:[\w\-]+\s+){0,2}[\w\-]+[?.!]?$",
                       re.IGNORECASE)
# "According to section 5.2 of the annual report, how …": a lead that frames the question.
_LEAD = re.compile(r"^(?:according\s+to|under|per|as\s+per|in\s+line\s+with|based\s+on)\b",
                   re.IGNORECASE)
# "If I drive to a site myself, how much …": a condition frames the question after it.
_CONDITION = re.compile(r"^(?:if|unless|once|assuming|suppose|supposing|in\s+case|"
                        r"when\s+(?!(?:is|are|was|were|do|does|did|will|would|can|could|has|"
                        r"have|had|should)\b))\b", re.IGNORECASE)
_VERB = re.compile(r"\b(?:is|are|was|were|do|does|did|has|have|had|can|could|will|would)\b",
                   re.IGNORECASE)
_PRONOUN = re.compile(r"\b(it|its|they|their|them|this|these|that\s+one)\b", re.IGNORECASE)


def _clause_parts(q: str) -> list[str]:
    pieces = [p for p in re.split(r"(?<=\?)\s+", q.strip()) if p.strip()]
    out: list[str] = []
    for piece in pieces:
        out.extend(re.split(rf"\s*(?:;\s*|,?\s+and\s+(?=(?:(?:above|below|over|under|in|on|at|for|by|from|"
                            rf"to|with|after|before)\s+)?{_CLAUSE_START}\b)|,\s*(?="
                            rf"(?:also\s+)?(?:list|what|how)\b))",
                            piece, flags=re.IGNORECASE))
    out = [p.strip() for p in out if p and len(content_words(p)) >= 1]
    if len(out) >= 2 and _CONDITION.match(out[0]) and not out[0].endswith("?"):
        out = [f"{out[0]}, {out[1]}", *out[2:]]  # the condition belongs to the next clause
    if len(out) < 2 or any(_FRAGMENT.match(p) and not _VERB.search(p) for p in out) or (
            _LEAD.match(out[0]) and not _VERB.search(out[0])):
        return [q.strip()]
    first = out[0]
    # a pronoun stands for a thing, never for a period ("how long do we take to inspect one
    # once it arrives" after "… as of mid-2025": "it" is not mid-2025)
    ents = [e for e in entities(first) if not e.isdigit() and not is_period(e)]
    topic = ents[0] if ents else " ".join(content_words(first)[:3])
    resolved = [first]
    for part in out[1:]:
        if ents and _PRONOUN.search(part):
            part = _PRONOUN.sub(lambda m: f"{topic}'s" if m.group(1).lower() in ("its", "their")
                                else topic, part)
        elif not entities(part) and len(content_words(part)) < 2 and topic:
            part = f"{part.rstrip('?.! ')} ({topic})"
        resolved.append(part)
    return [_clean(p if p.endswith("?") or not re.match(r"(?i)(what|who|how|when|where|which|"
                                                        r"why|is|are|does|do|can)\b", p)
                   else p + "?") for p in resolved]


class LocalPlanner:
    """Rule-based planner. `scope` (e.g. `describe_scope(kb)`) is quoted in the reply to
    "what can you do?"."""

    def __init__(self, scope: str | None = None, max_parts: int = MAX_PARTS):
        self.scope = scope
        self.max_parts = max_parts
        self.usage = Usage()  # no model calls

    def plan(self, question: str) -> Plan:
        q = " ".join((question or "").split())
        if not q:
            return Plan(False, [], reply="Ask me a question about the documents in the"
                        " knowledge base.", reason="empty question")
        if _GREETING.match(q):
            low = q.lower()
            if low.startswith(("thank", "thx", "cheers", "ta")):
                reply = "You're welcome. Ask me anything else about the knowledge base."
            elif low.startswith(("bye", "goodbye", "see you")):
                reply = "Goodbye!"
            elif low.startswith(("how are", "how's")):
                reply = ("I'm fine, thanks. What would you like to know from the knowledge"
                         " base?")
            elif low.startswith(("ok", "cool", "great", "nice", "perfect", "awesome")):
                reply = "Glad to help. Anything else you'd like to look up?"
            else:
                reply = "Hello! Ask me a question and I'll answer it from the knowledge base."
            return Plan(False, [], reply=reply, reason="small talk: no search needed")
        if _ABOUT_ME.match(q):
            reply = ("I answer questions from the documents in this knowledge base and cite"
                     " the document and section for each claim.")
            if self.scope:
                reply += f" {self.scope}"
            return Plan(False, [], reply=reply, reason="question about the assistant itself")
        q = _clean(_GREETING_PREFIX.sub("", q)) or q
        parts, reason = self._split(quarter_codes(q))
        parts = [p for p in dict.fromkeys(parts) if p]
        if len(parts) > self.max_parts:
            parts = [*parts[: self.max_parts - 1], " ".join(parts[self.max_parts - 1:])]
        if len(parts) < 2:
            return Plan(True, parts or [q], reason="one part")
        return Plan(True, parts, reason=reason)

    def _split(self, q: str) -> tuple[list[str], str]:
        clauses = _clause_parts(q)
        if len(clauses) > 1:
            out: list[str] = []
            for c in clauses:
                sub, _ = self._split_one(c)
                out.extend(sub)
            return out, f"{len(clauses)} clauses"
        return self._split_one(q)

    @staticmethod
    def _split_one(q: str) -> tuple[list[str], str]:
        for fn, why in ((_half_parts, "a half year: one part per quarter"),
                        (_date_parts, "two or more dates/periods"),
                        (_compare_parts, "a comparison"),
                        (_list_parts, "several named entities")):
            parts = fn(q)
            if parts and len(parts) >= 2:
                return parts, why
        return [q], "one part"
