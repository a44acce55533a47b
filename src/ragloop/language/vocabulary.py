"""The words the offline rules read, per language, from data files (`language/lang/<code>.json`).

Question words, period codes and their ordinals ("third quarter" → Q3), number words,
duration units, money scales, section-reference words, document kinds, name connectors and
sentence-final abbreviations live there, not in regexes in code, and so do the planner's
small talk (greetings, "who are you", their replies), the words of its splits (date
connectors, comparison openers, clause openers, conditions, pronouns) and the router's cue
words; the helpers here turn them into the patterns `text.py`, `planner.py` and the router
use. The same file's `search` section (query stop words, detection words) and `months` are read
by `retrieval/languages.py`, which the index shares, with the same loader. English, Italian and
Chinese rule words are written; a language with no file, or a file with its search words only,
reads English's (see offline/README.md). The engine reads the knowledge base's language
(`agent/engine.py` `kb_words`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ragloop.retrieval.languages import ENGLISH, language_data


@dataclass(frozen=True)
class Vocabulary:
    code: str
    data: dict[str, Any]

    def get(self, key: str) -> Any:
        """The value under `key`; a dotted key reads inside an object ("grammar.clauses")."""
        value: Any = self.data
        for part in key.split("."):
            value = value[part]
        return value

    def words(self, key: str) -> list[str]:
        return list(self.get(key))

    def table(self, key: str) -> dict[str, Any]:
        return dict(self.get(key))

    def text(self, key: str) -> str:
        """One word or sentence (a reply, a template such as "What is the {entity} …?")."""
        return str(self.get(key))

    @property
    def periods(self) -> dict[str, Any]:
        return self.data["periods"]

    @property
    def spaced(self) -> bool:
        """Words are separated by spaces (not Chinese or Japanese)."""
        return bool(self.data["spaced"])

    @property
    def gap(self) -> str:
        """What separates two words of a phrase in a pattern: white space, or none at all."""
        return r"\s+" if self.spaced else r"\s*"

    @property
    def edge(self) -> str:
        """A word boundary where words have spaces; none where a word is a run of
        characters with no boundary in it (\\b never falls between two Chinese characters)."""
        return r"\b" if self.spaced else ""

    @property
    def declined(self) -> tuple[str, ...]:
        """The phrases of an answer that declines, in whole or in part (`decline` in the data): the
        run's status and the eval's abstention read these same words."""
        d = self.data["decline"]
        return (*d["says_missing"], *d["also"])

    @property
    def says_missing(self) -> tuple[str, ...]:
        """The answer's own words for a part the knowledge base lacks: never a claim."""
        return tuple(self.data["decline"]["says_missing"])

    @property
    def not_claims(self) -> tuple[str, ...]:
        """Sentences with these state nothing about the sources (declines, headings)."""
        return (*self.declined, *self.data["decline"]["not_claims"])

    # -- patterns built from the words ----------------------------------------------------

    def alternatives(self, key: str) -> str:
        """A non-capturing group of the words under `key` (see `alternation`)."""
        return alternation(self.get(key))

    def period_code(self, kind: str) -> str:
        """ "Q[1-4]" for quarters, "H[1-2]" for halves: the code and its numbers."""
        p = self.periods[kind]
        return f"{re.escape(p['code'])}[1-{p['count']}]"

    @property
    def year_code(self) -> str:
        return re.escape(self.periods["financial_year"]["code"])

    @property
    def year_phrase(self) -> str:
        """A group of the words that join a year as one token ("mid-2025", "end-2024")."""
        return alternation(self.periods["year_phrases"])


def alternation(words: Iterable[str]) -> str:
    """A non-capturing regex group of `words`, in their order (put a longer spelling first:
    "sections" before "section"); a space in a word matches any run of white space ("see
    also"). The one way the rules turn a word list into a pattern."""
    words = [w for w in words if w]
    if not words:  # a list a language leaves empty matches nothing (not the empty string)
        return "(?!)"
    return "(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in words) + ")"


def as_list(value: str | list[str]) -> list[str]:
    """A key that one language fills with one word and another with several ("quarter";
    "semestre", "metà")."""
    return [value] if isinstance(value, str) else list(value)


def vocabulary(code: str | None) -> Vocabulary:
    """The vocabulary of a language; English's when the language has no file."""
    return _load((code or ENGLISH).strip().lower())


@cache
def _load(code: str) -> Vocabulary:
    data = language_data(code)
    if "spaced" not in data:  # no file, or one with its search words only: English's rules
        return _load(ENGLISH) if code != ENGLISH else _missing()
    return Vocabulary(code, data)


def _missing() -> Vocabulary:
    raise FileNotFoundError("ragloop/language/lang/en.json is missing from the installation")


ENGLISH_WORDS = vocabulary(ENGLISH)
