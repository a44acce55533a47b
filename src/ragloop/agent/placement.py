"""Which documents get the first places of the agent's evidence, and why.

The agent starts from single-shot's search (step 1) and then reaches further documents, each
for a reason it knows (a `Hop`). The final order (`place`) gives a single-shot document's
place to a document the run reached through evidence of a hop when the single-shot document
is one the grader did not keep (its best grade below the policy's `give_up_below`) and it
covers no part of the question single-shot's documents leave open. Every other single-shot
document keeps its place; what the run found beyond them follows.

Not every reason earns a place. Measured on HotpotQA dev (benchmarks/RESULTS.md, issue 27):
a pointer (a kept chunk names the document by a title the question does not name) gave
nearly all of the lead; the rewriter's re-queries brought no gold and earn none. The signals
that do are the policy's `signals`; `benchmarks/offline_rules.py` switches each off to measure
it, and `benchmarks/placement_curve.py` traces the knob (`give_up_below`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ragloop.agent.search_grade import CONFIDENT_IRRELEVANT


class Hop(StrEnum):
    """Why the run reached a document; the order is the strength of the evidence."""

    POINTER = "pointer"  # a kept chunk names it by a title the question does not name
    NAMED = "named"  # the question names it by title
    BRIDGE = "bridge"  # a re-query naming its title (a name from a kept chunk) found it
    CHAIN = "chain"  # a section read through a pointer names it (the next link of a chain)
    SECOND_HOP = "second_hop"  # kept by the search of its own sub-question
    COVERS_PART = "covers_part"  # kept for a part single-shot's documents leave open
    REQUERY = "requery"  # kept from the rewriter's re-query of the gap: earns no place


STRENGTH = {hop: i for i, hop in enumerate(Hop)}

# What each reason says to a reader (the `reason` of a place: the page, `ask --debug`, /runs)
SAYS = {
    Hop.POINTER: "a kept passage names it",
    Hop.NAMED: "the question names it",
    Hop.BRIDGE: "a search for a name in a kept passage found it",
    Hop.CHAIN: "a passage read through another's pointer names it",
    Hop.SECOND_HOP: "kept by the search for its own part of the question",
    Hop.COVERS_PART: "it covers a part of the question the first search left open",
    Hop.REQUERY: "kept by a search for what was missing",
}


@dataclass(frozen=True)
class Policy:
    """`signals`: the hops that earn a single-shot document's place. `give_up_below`: a
    single-shot document whose best grade anywhere in the run is below this, and which covers
    no open part, gives its place (1.0 and above: every document the grader did not keep; a
    kept chunk grades 1.0). Confirmed finds with no hop take only the places of documents the
    grader is sure about (`irrelevant_below`), as before this policy.

    Every kept single-shot document grades the same (1.0), so the grade alone has no point
    between keeping them all and giving them all up (issue 45's curve: lost@10 0% → 9%).
    `kept_from_rank` is that knob's finer part: a kept single-shot document at this rank of
    the first search or lower (1-based) gives its place to a document reached through a hop
    too (None: never; single-shot's documents are the first search's first 5).
    `displaced_next`: a document that gave its place comes right after the documents reached
    through a hop instead of after everything the run found, so a place given up costs it a
    few places, not the first k (no figure moved on the tuning halves: off)."""

    signals: frozenset[Hop] = frozenset({Hop.POINTER, Hop.NAMED, Hop.BRIDGE, Hop.CHAIN,
                                         Hop.SECOND_HOP, Hop.COVERS_PART})
    give_up_below: float = 1.0
    irrelevant_below: float = CONFIDENT_IRRELEVANT
    # never (benchmarks/RESULTS.md, issue 45): from #4, the point read off the tuning halves
    # (lead@5 +.02 on HotpotQA dev 1-150, lost@10 unchanged), lost single-shot gold on every
    # held-out set (chains, HotpotQA dev 301-450, SQuAD-it) and gained nothing at k=10
    kept_from_rank: int | None = None
    displaced_next: bool = False


DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Placed:
    """One document's place in the final evidence (1-based) and why it is there."""

    doc_id: str
    place: int
    why: tuple[str, ...]  # its hops' codes; "single" for single-shot's own rank (`reason`
    # says it in words)
    single_rank: int | None = None  # its rank in single-shot's documents
    took: str | None = None  # the single-shot document whose place it took

    @property
    def reason(self) -> str:
        """`why` in words: "kept its place (#2 of the first search)", "took the place of
        b.md (#1 of the first search, not kept by the grader): a kept passage names it"."""
        said = [SAYS[Hop(w)] for w in self.why if w in Hop._value2member_map_]
        if self.took is not None:
            head = (f"took the place of {self.took} (a document of the first search the grader"
                    " did not keep)")
        elif "single" in self.why:
            head = f"kept its place (#{self.single_rank} of the first search)"
        else:
            head = "found by the run's further searches"
        return head + (": " + "; ".join(said) if said else "")

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"doc_id": self.doc_id, "place": self.place,
                                  "why": list(self.why), "reason": self.reason}
        if self.single_rank is not None:
            out["single_rank"] = self.single_rank
        if self.took is not None:
            out["took"] = self.took
        return out


@dataclass(frozen=True)
class Placement:
    places: list[Placed]  # every document in its final place, with the reasons
    given_up: list[str]  # single-shot documents that gave their place

    @property
    def order(self) -> list[str]:
        """Every document, in the final order."""
        return [p.doc_id for p in self.places]


def _hops(reached: Mapping[str, Iterable[Hop]], doc_id: str) -> set[Hop]:
    return set(reached.get(doc_id, ()))


def place(single: Sequence[str], found: Sequence[str], reached: Mapping[str, Iterable[Hop]],
          scores: Mapping[str, float], confirmed: Iterable[str],
          policy: Policy = DEFAULT_POLICY) -> Placement:
    """The final document order.

    `single`: single-shot's documents, in its order. `found`: the run's documents in the order
    the driver ranks its evidence. `reached`: per document, why the run reached it. `scores`:
    per document, the best grade any of its chunks had in the run. `confirmed`: the documents
    with a chunk the grader kept (or a section read on purpose)."""
    held = set(confirmed)
    singles = list(dict.fromkeys(single))
    rank_of = {d: i for i, d in enumerate(singles, start=1)}
    found = list(dict.fromkeys(found))
    others = [d for d in found if d not in rank_of]

    def earns(d: str) -> bool:
        return d in held and bool(_hops(reached, d) & policy.signals)

    def strength(d: str) -> int:
        return min(STRENGTH[h] for h in _hops(reached, d) & policy.signals)

    def why(d: str) -> tuple[str, ...]:
        return tuple(str(h) for h in sorted(_hops(reached, d), key=STRENGTH.__getitem__))

    def gives_up(d: str, below: float) -> bool:
        return not earns(d) and scores.get(d, 0.0) < below

    # a document reached through a hop may move up from a lower single-shot place too; the
    # strongest hop first, then in the run's order
    hop_docs = sorted((d for d in [*found, *singles] if earns(d)), key=strength)
    plain = [d for d in others if d in held and not earns(d)]
    order: list[str] = []
    places: list[Placed] = []
    given_up: list[str] = []
    displaced: list[str] = []  # waiting for the place a moved-up document left

    def take(queue: list[str], after: int) -> str | None:
        for d in queue:
            if d not in order and rank_of.get(d, after + 1) > after:
                return d
        return None

    for rank, d in enumerate(singles, start=1):
        if d in order:  # moved up: the place it left goes to the first displaced document
            if displaced:
                moved = displaced.pop(0)
                order.append(moved)
                places.append(Placed(moved, len(order), ("single", *why(moved)),
                                     rank_of[moved]))
            continue
        kept_gives = policy.kept_from_rank is not None and rank >= policy.kept_from_rank \
            and not earns(d)
        taker = take(hop_docs, rank) \
            if gives_up(d, policy.give_up_below) or kept_gives else None
        if taker is None and gives_up(d, policy.irrelevant_below):
            taker = take(plain, rank)
        if taker is None:
            order.append(d)
            places.append(Placed(d, len(order), ("single", *why(d)), rank))
            continue
        given_up.append(d)
        displaced.append(d)
        order.append(taker)
        places.append(Placed(taker, len(order), why(taker), rank_of.get(taker), took=d))
    rest = [*hop_docs, *displaced, *plain, *others] if policy.displaced_next \
        else [*hop_docs, *plain, *others, *displaced]
    for d in rest:
        if d in order:
            continue
        order.append(d)
        rank = rank_of.get(d)
        places.append(Placed(d, len(order), ("single", *why(d)) if rank else why(d), rank))
    return Placement(places, given_up)
