"""The sentence each citation stands on: for every cited passage, the sentence of it that is
closest to the answer's claims citing it (the most content words shared).

The page marks this sentence in the opened section, so a reader sees the words the answer
rests on rather than a whole section. It rides on the answer event's citations (`quote`)
only: the run's `Citation`s and their JSON stay `{n, doc_id, section}`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ragloop.core.decisions import Evidence
from ragloop.language.support import claims
from ragloop.language.text import Reading


def best_sentence(claim_texts: Sequence[str], passage: str, rd: Reading) -> str | None:
    """The passage's sentence sharing most content words with any of the claims (ties: the
    earlier sentence); None when no sentence shares a word."""
    wanted = [{w.casefold() for w in rd.content_words(c)} for c in claim_texts]
    best: tuple[int, str] | None = None
    for sentence in rd.split_sentences(passage):
        have = {w.casefold() for w in rd.content_words(sentence)}
        shared = max((len(have & w) for w in wanted), default=0)
        if shared and (best is None or shared > best[0]):
            best = (shared, sentence)
    return best[1] if best else None


def with_quotes(text: str, citations: Sequence[dict[str, Any]],
                evidence: Callable[[int], Evidence | None], rd: Reading,
                labels: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`citations` of the checked answer `text`, each with `quote` where one is found."""
    by_n: dict[int, list[str]] = {}
    for claim in claims(text, rd, labels):
        for n in claim.cited:
            by_n.setdefault(n, []).append(claim.text)
    out = []
    for c in citations:
        ev = evidence(int(c["n"]))
        found = best_sentence(by_n.get(int(c["n"]), []), ev.text, rd) if ev else None
        out.append({**c, "quote": found} if found else dict(c))
    return out
