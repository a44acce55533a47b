"""Which knowledge base(s) a part of a question is searched in, offline: the one whose own
search finds a chunk clearly closer in meaning than any other KB's, else every KB that comes
close to the best (`SourceChooser`, core/decisions.py).

The score of a KB is the cosine of its nearest chunk to the query: the one figure its search
gives that compares across KBs, as long as they were built with the same embedder (BM25
scores and fused ranks depend on each corpus). A KB built with another embedder cannot be
compared so: it is always searched (its score is not read)."""

from __future__ import annotations

from ragloop.core.decisions import SourceChoice
from ragloop.core.errors import EmptyQueryError
from ragloop.kb.multi import KnowledgeBases

# How much closer (cosine) the best KB's nearest chunk must be than every other KB's for the
# best to be searched alone; benchmarks/multi_kb.py measures it on the tuning part of its
# questions (the first half of each set) and reports the other half.
SOURCE_MARGIN = 0.05


class NearestChunkChooser:
    def __init__(self, kbs: KnowledgeBases, margin: float = SOURCE_MARGIN) -> None:
        self.kbs = kbs
        self.margin = margin

    def scores(self, query: str) -> dict[str, float | None]:
        """Each KB's nearest-chunk cosine (None: not comparable, or empty)."""
        names = list(self.kbs.kbs)
        reference = self.kbs.kbs[names[0]].embedder_name
        out: dict[str, float | None] = {}
        for name, kb in self.kbs.kbs.items():
            if kb.embedder_name != reference:
                out[name] = None
                continue
            hits = kb.search(query, k=1, mode="vector")
            out[name] = hits[0].vector_score if hits and hits[0].vector_score is not None \
                else None
        return out

    def choose(self, query: str) -> SourceChoice:
        try:
            scores = self.scores(query)
        except EmptyQueryError:
            return SourceChoice(tuple(self.kbs.kbs), "no words to compare: every knowledge"
                                " base is searched")
        known = sorted(((s, n) for n, s in scores.items() if s is not None), reverse=True)
        unscored = [n for n, s in scores.items() if s is None]
        shown = ", ".join(f"{n} {s:.2f}" for s, n in known)
        if not known:
            return SourceChoice(tuple(self.kbs.kbs), "no knowledge base could be scored:"
                                " every one is searched")
        best, best_name = known[0]
        close = [n for s, n in known if best - s < self.margin]
        chosen = tuple(close + unscored)
        if len(close) == 1:
            reason = (f"{best_name}'s nearest chunk is closest in meaning by at least"
                      f" {self.margin:.2f} (cosine: {shown})")
        else:
            reason = (f"{', '.join(close)} are within {self.margin:.2f} of each other"
                      f" (cosine: {shown}): searched together")
        if unscored:
            reason += f"; {', '.join(unscored)} built with another embedder, always searched"
        return SourceChoice(chosen, reason)
