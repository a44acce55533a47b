"""The offline follow-ups when several knowledge bases are served (kb/multi.py): each KB's own
`LocalFollowUps`, so a kept chunk's links stay inside its KB (a title in another KB's corpus
is not a pointer: a Wikipedia-sized KB holds titles such as "Power" or "Notes" that an HR
policy names by chance), and the titles a question names are looked up in the KBs chosen for
it."""

from __future__ import annotations

from ragloop.core.types import Hit
from ragloop.kb.multi import KnowledgeBases
from ragloop.language.text import Reading
from ragloop.offline.follow_ups import LocalFollowUps


class FollowUpsByKb:
    def __init__(self, kbs: KnowledgeBases, reading: Reading) -> None:
        self.kbs = kbs
        self.each = {name: LocalFollowUps(kb, reading=reading) for name, kb in kbs.kbs.items()}

    def __call__(self, hit: Hit, question: str | None = None) -> list[tuple[str, str]]:
        own = self.each.get(hit.kb)
        return own(hit, question) if own is not None else []

    def named(self, text: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for name in self.kbs.choose(text).knowledge_bases:
            out += self.each[name].named(text)
        return list(dict.fromkeys(out))
