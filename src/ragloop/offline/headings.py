"""Whether a phrase heads something in a knowledge base: a document's or section's title, or
a line of its own in a section's text (a heading a reader did not split the text on, as in a
PDF page: "Extended warranty"). The offline condense rule asks it of a phrase an answer
introduced (offline/condense.py `Headings`): a phrase that heads a part of the KB names a
thing the KB has, which a later "what's the price?" may ask about; a phrase the answer only
used in passing ("the monthly uptime") does not."""

from __future__ import annotations

import re

from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases

# the chunks read for a phrase: its own words searched, the few best are where it heads one
_HITS = 10
# a section number before a title ("4.2 Broadband allowance", "1. Open issues")
_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)*\.?\s+")


def _plain(text: str) -> str:
    return " ".join(_NUMBER.sub("", text).lower().split()).strip(" .:")


class KbHeadings:
    """`headings(phrase)`: whether `phrase` heads a document, section or line of `kb` (case
    and a section number aside); each phrase is searched once per run (the condenser is
    built per run)."""

    def __init__(self, kb: KnowledgeBase | KnowledgeBases) -> None:
        self.kb = kb
        self._known: dict[str, bool] = {}

    def __call__(self, phrase: str) -> bool:
        want = _plain(phrase)
        if want not in self._known:
            self._known[want] = bool(want) and any(
                want in (_plain(h.section_title), _plain(h.doc_title))
                or any(_plain(line) == want for line in h.text.splitlines())
                for h in self.kb.search(phrase, k=_HITS, mode="bm25"))
        return self._known[want]
