"""What a question asks for, so that an extractive answer states it or declines.

A sentence that shares most of a question's words can still answer a neighbouring question:
"Pulse gross revenue churn was 2.2%" for "What was the gross margin of Pulse?", "Halden
Instruments has three offices" for "How many patents does Halden hold?". The asked-for
attribute (its head noun: "margin", "patents") and the unit asked for ("in euros") must be in
the sentence (or its section title) for it to count as the answer.

The patterns are per-language data; a language without them gets no focus check (the
answerer's general support score still applies).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragloop.offline.text import content_words, current_language, quantities, stem

# Words that name the kind of value asked for rather than the thing itself ("the warranty
# period" asks about the warranty, "the total revenue" about revenue), and answer types a
# passage states without naming them (an address, a date, a count of people).
_GENERIC = {
    "en": frozenset(["period", "number", "amount", "total", "value", "level", "figure", "time",
                     "name", "kind", "type", "sort", "part", "share", "size", "length", "count",
                     "overall", "current", "exact", "approximate", "address", "date", "day",
                     "year", "place", "location", "people", "person", "percentage",
                     "proportion", "duration"]),
}
# A question of several clauses ("… in Q1, and how many of them …") asks for several things:
# each part is checked when the planner splits it, the whole is not.
_CLAUSES = {
    "en": re.compile(r"(?:,|\band\b|;)\s*(?:what|how|who|which|when|where|whose|is|are|does|"
                     r"do|did|was|were|the|its|their)\b", re.IGNORECASE),
}

# English wh-question shapes; `focus` is the attribute asked about.
_PATTERNS = {
    "en": [
        # what is the list price of X / what was Halden's total revenue in Q3
        re.compile(r"^(?:what|which)\s+(?:is|was|are|were)\s+(?:the\s+|a\s+|an\s+)?"
                   r"(?:[\w\-]+['’]s\s+)?(?P<focus>[\w\s\-]+?)\s+"
                   r"(?:of|for|in|on|at|per|under|from|to|by|with)\b", re.IGNORECASE),
        # what is Halden's revenue? / what is the battery life?
        re.compile(r"^(?:what|which)\s+(?:is|was|are|were)\s+(?:the\s+|a\s+|an\s+)?"
                   r"(?:[\w\-]+['’]s\s+)?(?P<focus>[\w\s\-]+?)\s*\??$", re.IGNORECASE),
        # how many patents does … / how much revenue did …
        re.compile(r"^how\s+(?:many|much)\s+(?P<focus>[\w\s\-]+?)\s+"
                   r"(?:do|does|did|is|are|was|were|can|could|will|would|has|have|had|"
                   r"should|must|may)\b", re.IGNORECASE),
    ],
}
# who is Halden's Head of Marketing / who is the Chief Technology Officer: every word counts
_WHO = {
    "en": re.compile(r"^who\s+(?:is|was|are|were)\s+(?:the\s+)?(?:[\w\-]+['’]s\s+)?"
                     r"(?P<focus>[\w\s\-]+?)\s*\??$", re.IGNORECASE),
}
# "in euros": the answer must give a figure in that currency
_UNITS = {
    "en": {"euro": "€", "euros": "€", "dollar": "$", "dollars": "$", "pound": "£",
           "pounds": "£", "sterling": "£", "yen": "¥"},
}
_PREPOSITION = re.compile(r"\s+(?:of|per|in|on|at|for|from|to|by|with|when|where|that|"
                          r"which|who)\s+", re.IGNORECASE)
_CURRENCY_CODES = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY"}
_IN_UNIT = re.compile(r"\bin\s+(?P<unit>[a-z]+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Focus:
    """What an answer sentence must contain: all of `required` (stems), and a figure in
    `currency` when one is asked for."""

    required: frozenset[str]
    currency: str | None = None
    phrase: str = ""  # the attribute as asked ("API calls"), for a check by meaning

    def names_attribute(self, text: str) -> bool:
        return self.required <= {stem(w) for w in content_words(text)}

    def met_by(self, text: str, close_in_meaning: bool = False) -> bool:
        """`text` states the attribute (its words, or `close_in_meaning` when the caller
        found the phrase close to it) and a figure in the currency asked for."""
        if not (close_in_meaning or self.names_attribute(text)):
            return False
        if self.currency is None:
            return True
        code = _CURRENCY_CODES.get(self.currency, "")
        return any(q.kind.startswith("money") and
                   (self.currency in q.text or code.lower() in q.text.lower())
                   for q in quantities(text))


def question_focus(question: str, language: str | None = None) -> Focus | None:
    """The attribute and unit a question asks for, or None when it has no such shape (or
    its language has no patterns). `language` defaults to the one being read."""
    language = language or current_language()
    text = " ".join(question.strip().split())
    clauses = _CLAUSES.get(language)
    if clauses is None or clauses.search(text):
        return None
    generic = _GENERIC.get(language, frozenset())
    required: set[str] = set()
    phrase = ""
    who = _WHO.get(language)
    match = who.match(text) if who else None
    if match:
        phrase = match.group("focus")
        required = {stem(w) for w in content_words(phrase)}
    else:
        for pattern in _PATTERNS.get(language, []):
            match = pattern.match(text)
            if match:
                # "API calls per minute", "days of annual leave": the head comes before
                head = _PREPOSITION.split(match.group("focus"))[0]
                words = [w for w in content_words(head) if w.lower() not in generic]
                if words:
                    # the head noun and the word that makes it this attribute: "parking
                    # spaces" is not any space, "gross margin" not any margin
                    required = {stem(w) for w in words[-2:]}
                    phrase = head
                break
    currency = None
    for m in _IN_UNIT.finditer(text):
        currency = _UNITS.get(language, {}).get(m.group("unit").lower()) or currency
    if not required and currency is None:
        return None
    return Focus(frozenset(required), currency, phrase)
