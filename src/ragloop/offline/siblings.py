"""The codes of one family that a knowledge base's documents are titled with (S100, S200,
S300): what the offline condense rule steps through for "the one above", "the cheap one" or
"the other one" (offline/condense.py `Siblings`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases
from ragloop.language.text import Reading, code_family, words
from ragloop.offline.content_cache import PerContent, documents

# the codes the titles name, per store, version of its content and language: the engine builds
# a condenser per run, and reading every document's title per follow-up is I/O on the hot path
_titled_codes: PerContent[list[str]] = PerContent()


def _number(code: str) -> int:
    digits = re.sub(r"\D", "", code)
    return int(digits) if digits else 0


class TitleSiblings:
    """`siblings(code)`: the codes of `code`'s family (its letters, as many digits) that the
    titles of `kb`'s documents name, in the order of their numbers; read on the first call,
    kept per version of the KB's content and shared by the runs over it."""

    def __init__(self, kb: KnowledgeBase | KnowledgeBases, reading: Reading) -> None:
        self.kb = kb
        self.reading = reading

    @functools.cached_property
    def _codes(self) -> list[str]:
        return _titled_codes.get(self.kb.store, self._read_codes, self.reading.code)

    def _read_codes(self) -> list[str]:
        rd = self.reading
        found = {w.upper() for d in documents(self.kb) for w in words(d.title)
                 if rd.is_code(w) and not rd.is_period(w)}
        return sorted(found, key=lambda c: (code_family(c), _number(c)))

    def __call__(self, code: str) -> Sequence[str]:
        family, digits = code_family(code), len(re.sub(r"\D", "", code))
        return [c for c in self._codes
                if code_family(c) == family and len(re.sub(r"\D", "", c)) == digits]
