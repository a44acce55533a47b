"""Gap-driven re-queries with no generative model.

Candidates, in order, the first one not yet tried wins:
1. the grader's own `next_query` (the uncovered terms plus the question's covered entities);
2. bridge entities found in kept chunks (a product code, a capitalised name the question does
   not mention) + the uncovered terms — the multi-hop step:
   "battery life of the sensor that raises E102" → kept chunk says "The S200 raises E102"
   → "S200 battery life";
3. the uncovered terms alone (with, then without, the question's covered entities).
Built from `grade.missing` and `grade.kept` (plus the question's entities as context), never
from the history of queries; a query equal to a tried one (same words, any order) is skipped.

Also the helpers the driver uses to decide on `fetch_document_section`: `looks_cut_off`,
`fetch_targets`.
"""

from __future__ import annotations

from ragloop.core.decisions import Grade
from ragloop.core.types import Hit, Usage
from ragloop.language.text import Reading, looks_cut_off
from ragloop.offline.grader import context_text, gap_terms

__all__ = ["LocalRewriter", "bridge_entities", "fetch_targets", "looks_cut_off"]

MAX_QUERY_WORDS = 10


def _key(query: str, rd: Reading) -> frozenset[str]:
    return frozenset(rd.stem(w) for w in rd.content_words(query)) or frozenset([query.lower()])


def bridge_entities(question: str, kept: list[Hit], rd: Reading, limit: int = 3) -> list[str]:
    """Names in kept chunks that the question does not use, best first: multi-word names as
    written ("Chief Financial Officer", "Tinted Windows"), codes weighted double, a chunk's
    weight falling with its rank."""
    asked = ({rd.stem(w) for w in rd.content_words(question)}
             | {rd.stem(e) for e in rd.entities(question)})
    counts: dict[str, float] = {}
    for rank, hit in enumerate(kept):
        weight = 1.0 / (1 + rank)
        own = {rd.stem(w) for w in rd.content_words(f"{hit.doc_title} {hit.section_title}")}
        # a name in a sentence that shares words with the question is likelier the bridge
        # ("a song by the Mexican actress Belinda" for "the actress who sang …")
        context: dict[str, int] = {}
        for sentence in rd.split_sentences(hit.text):
            overlap = len(asked & {rd.stem(w) for w in rd.content_words(sentence)})
            for name in rd.name_spans(sentence):
                context[name] = max(context.get(name, 0), overlap)
        for name in rd.name_spans(hit.text):
            stems = [rd.stem(w) for w in rd.content_words(name)]
            if not stems or all(s in asked for s in stems):
                continue
            if all(s in own for s in stems) and rank > 0:
                continue  # the chunk's own title: searching it finds the same chunk
            if name.replace(",", "").replace(".", "").isdigit() or len(name) < 2:
                continue
            bonus = 2.0 if any(rd.is_code(w) for w in name.split()) else 1.0
            bonus *= 1.0 + 0.5 * context.get(name, 0)
            counts[name] = counts.get(name, 0.0) + weight * bonus
    ranked = sorted(counts, key=lambda e: (-counts[e], e))
    return ranked[:limit]


class LocalRewriter:
    def __init__(self, max_words: int = MAX_QUERY_WORDS, *, reading: Reading):
        self.max_words = max_words
        self.reading = reading  # the knowledge base's language
        self.usage = Usage()  # no model calls

    def candidates(self, question: str, grade: Grade) -> list[str]:
        rd = self.reading
        gap = gap_terms(grade.missing, rd)
        q_ents = rd.entities(question)
        gap_stems = {rd.stem(w) for w in gap}
        context = [e for e in q_ents if rd.stem(e) not in gap_stems]
        out: list[str] = []
        if grade.next_query:
            out.append(grade.next_query)
        if grade.kept:
            bridges = bridge_entities(question, grade.kept, rd)
            # the question's plain terms that are not the bridge's own clue: for
            # "battery life of the sensor that raises E102" keep "battery life"; of those,
            # the ones the best kept chunk (the first hop) lacks, which ask about
            # the second hop ("… in the oldest established what?")
            plain = [w for w in rd.content_words(question) if w not in q_ents]
            first_hop = {rd.stem(w) for w in rd.content_words(context_text(grade.kept[0]))}
            target = gap or [w for w in plain if rd.stem(w) not in first_hop] or plain
            for b in bridges:
                out.append(" ".join([b, *target]))
                out.append(b)  # the bridge alone: the page about it (second hop)
        if gap:
            out.append(" ".join([*context, *gap]))
            out.append(" ".join(gap))
        return out

    def rewrite(self, question: str, grade: Grade, tried: list[str]) -> str | None:
        seen = {_key(t, self.reading) for t in tried}
        for cand in self.candidates(question, grade):
            query = " ".join(dict.fromkeys(cand.split()[: self.max_words]))
            if not query.strip():
                continue
            k = _key(query, self.reading)
            if k in seen:
                continue
            return query
        return None


def fetch_targets(hit: Hit) -> list[tuple[str, str]]:
    """(doc_id, section) pairs worth fetching whole for a kept hit: its own section when the
    chunk looks cut off. The sections a chunk refers to ("see section 4.2") are not read: that
    rule changed no figure on the held-out hard set or HotpotQA (offline/README.md)."""
    return [(hit.doc_id, hit.section)] if looks_cut_off(hit) else []
