"""A grader with no generative model: embedding similarity plus lexical evidence.

score(hit) = W_VEC · cosine(question, chunk) + (1 − W_VEC) · coverage(question terms in chunk),
times a penalty when the question names a code (S200, E104, Q3) that the chunk does not
contain. Hits scoring ≥ threshold are kept. The kept set is `enough` when it contains every
entity of the question (codes, numbers, names: exact match) and most of its other content
terms (or one kept chunk is very close in meaning); otherwise `missing` names the uncovered
terms and `next_query` is those terms plus the question's covered entities.

No cross-encoder ships in any package reachable here, so this is the local grader.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ragloop.core.decisions import Grade
from ragloop.core.types import Hit, Usage
from ragloop.embed.base import Embedder
from ragloop.language.text import Reading, code_family
from ragloop.retrieval.index_text import index_text

# Calibrated by benchmarks/grader_calibration.py (its full table is printed there) on
# labelled (question, retrieved chunk) pairs: SciFact-train and HotpotQA-dev (150 questions
# each, vector top-8 from a 1,500-doc pool plus gold docs; BEIR qrels: gold doc = relevant)
# and examples/evals/rag_hard.jsonl over examples/kb (hybrid top-8; gold (doc, section) =
# relevant, every hit of an unanswerable question irrelevant). Best mean F1 at W_VEC 0.6,
# threshold 0.575 (floor = threshold − 0.07):
#   SciFact P 0.74 R 0.61 F1 0.67 · HotpotQA P 0.85 R 0.53 F1 0.65 · rag_hard P 0.35 R 0.74
#   F1 0.48 · pooled P 0.64 R 0.59 F1 0.61 (cosine alone: best pooled F1 0.57).
# HotpotQA recall is capped by bridge paragraphs that share little with the question (the
# rewriter's bridge step finds them); rag_hard precision is strict (a neighbouring section of
# the gold one counts as irrelevant).
W_VEC = 0.6
THRESHOLD = 0.575
# When nothing reaches the threshold, the best hit is still kept if it reaches FLOOR.
FLOOR = 0.505
# A hit that one retriever ranks first, or both rank in their top AGREEMENT_RANK, is kept
# when it scores at least AGREEMENT_FLOOR: on HotpotQA such hits that the score cut
# discarded were gold 56% of the time (140 of 4,800 first-search hits), more often than the
# kept ones (49%); the floor keeps it from admitting the best of nothing.
AGREEMENT_RANK = 2
AGREEMENT_FLOOR = 0.35

# Weights of question terms in lexical coverage: entities count more than plain words.
ENTITY_WEIGHT = 2.0
# A chunk that names other codes of the same family (E102 for a question about E104) is
# about something else; one that names no code at all is only mildly suspect.
WRONG_CODE_PENALTY = 0.6
NO_CODE_PENALTY = 0.9
# `enough`: share of the question's plain content terms the kept set must cover, unless a
# kept chunk is at least this close in meaning.
ENOUGH_COVERAGE = 0.6
ENOUGH_COSINE = 0.62

_META_WORDS = frozenset(["kept", "chunk", "chunks", "mention", "mentions", "evidence",
                         "nothing", "relevant", "found", "covers", "covered", "support",
                         "supports", "unsupported", "missing", "still", "found"])


@dataclass
class QuestionTerms:
    """The parts of a question the grader checks for: entities must match exactly."""

    entities: list[str]  # as written: S200, E104, Austin, 2024
    plain: list[str]  # other content words as written
    weights: dict[str, float]  # stem -> weight

    @classmethod
    def of(cls, question: str, rd: Reading) -> QuestionTerms:
        ents = rd.entities(question)
        ent_stems = {rd.stem(e) for e in ents}
        plain = [w for w in rd.content_words(question) if rd.stem(w) not in ent_stems]
        weights = {rd.stem(w): 1.0 for w in plain}
        weights.update({s: ENTITY_WEIGHT for s in ent_stems})
        return cls(ents, plain, weights)


def embed_view(hit: Hit) -> str:
    """The text the knowledge base embedded for a hit's chunk (titles, then text) when its
    section sits directly under the document: the embedding cache already holds its vector,
    so grading costs no model call; deeper sections are embedded once and cached."""
    path = (hit.section_title,) if hit.section_title else ()
    return index_text(hit.doc_title, path, hit.text)


def context_text(hit: Hit) -> str:
    """What a hit says, with the document and section titles it sits under."""
    return " \n".join(x for x in (hit.doc_title, hit.section_title, hit.text) if x)


def coverage(terms: QuestionTerms, hit_terms: set[str]) -> float:
    total = sum(terms.weights.values())
    if not total:
        return 0.0
    return sum(w for s, w in terms.weights.items() if s in hit_terms) / total


def question_codes(question: str, rd: Reading) -> list[str]:
    return [e.upper() for e in rd.entities(question) if rd.is_code(e)]


def code_penalty(question_codes: list[str], hit_text: str, rd: Reading) -> float:
    """WRONG_CODE_PENALTY when, for some family of the question's codes, the chunk names
    another code of that family and none of the question's ("Q1 FY2024" for a question about
    Q4 FY2024: the year matches, the quarter does not); NO_CODE_PENALTY when it names none of
    the question's codes at all."""
    if not question_codes:
        return 1.0
    found = set(rd.codes(hit_text))
    wanted: dict[str, set[str]] = {}
    for c in question_codes:
        wanted.setdefault(code_family(c), set()).add(c)
    found_families = {code_family(c) for c in found}
    # codes that start with a digit (4G, 10-minute) share the empty family: no evidence
    if any(fam and fam in found_families and not (want & found)
           for fam, want in wanted.items()):
        return WRONG_CODE_PENALTY
    if found & set(question_codes):
        return 1.0
    return NO_CODE_PENALTY


def retrievers_agree(hit: Hit) -> bool:
    """One retriever ranks the hit first, or both rank it near the top."""
    bm, vec = hit.bm25_rank, hit.vector_rank
    if bm == 1 or vec == 1:
        return True
    return bm is not None and vec is not None and max(bm, vec) <= AGREEMENT_RANK


def combine(cos: float, cov: float, penalty: float, w_vec: float = W_VEC) -> float:
    return (w_vec * cos + (1.0 - w_vec) * cov) * penalty


def select(scores: list[float], threshold: float = THRESHOLD, floor: float = FLOOR,
           max_keep: int = 6) -> list[int]:
    """Indexes of the hits to keep, best first (at most max_keep): all ≥ threshold; when none
    qualify, the single best one if it reaches floor."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    if not order:
        return []
    best = scores[order[0]]
    kept = [i for i in order if scores[i] >= threshold][:max_keep]
    if not kept and best >= floor:
        kept = [order[0]]
    return kept


class LocalGrader:
    """Grades hits for a (sub-)question with the knowledge base's embedder (`kb.embedder`;
    its cache makes repeated texts free) and lexical evidence. With `embedder=None` it uses
    each hit's `vector_score` when present and lexical coverage alone otherwise."""

    def __init__(self, embedder: Embedder | None = None, threshold: float = THRESHOLD,
                 floor: float = FLOOR, w_vec: float = W_VEC, max_keep: int = 6,
                 enough_coverage: float = ENOUGH_COVERAGE,
                 enough_cosine: float = ENOUGH_COSINE, *, reading: Reading):
        self.embedder = embedder
        self.reading = reading  # the knowledge base's language
        self.threshold = threshold
        self.usage = Usage()  # no model calls
        self.floor = floor
        self.w_vec = w_vec
        self.max_keep = max_keep
        self.enough_coverage = enough_coverage
        self.enough_cosine = enough_cosine

    # -- scoring --------------------------------------------------------------------------

    def cosines(self, question: str, hits: list[Hit]) -> list[float]:
        if not hits:
            return []
        if self.embedder is None:
            return [float(h.vector_score or 0.0) for h in hits]
        vecs = np.asarray(self.embedder.embed([question, *[embed_view(h) for h in hits]]),
                          dtype=np.float32)
        return [float(x) for x in vecs[1:] @ vecs[0]]

    def scores(self, question: str, hits: list[Hit]) -> tuple[list[float], list[float]]:
        """(combined scores, cosines) of `hits` for `question`."""
        scores, cos, _ = self._scored(question, hits)
        return scores, cos

    def _scored(self, question: str, hits: list[Hit]
                ) -> tuple[list[float], list[float], list[float]]:
        """(combined scores, cosines, code penalties) of `hits` for `question`."""
        terms = QuestionTerms.of(question, self.reading)
        qcodes = question_codes(question, self.reading)
        cos = self.cosines(question, hits)
        w_vec = self.w_vec if (self.embedder is not None or any(cos)) else 0.0
        out, penalties = [], []
        for hit, c in zip(hits, cos, strict=True):
            ctx = context_text(hit)
            penalty = code_penalty(qcodes, ctx, self.reading)
            penalties.append(penalty)
            out.append(combine(c, coverage(terms, self.reading.term_set(ctx)), penalty, w_vec))
        return out, cos, penalties

    # -- the verdict ----------------------------------------------------------------------

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        scores, cos, penalties = self._scored(question, hits)
        keep = select(scores, self.threshold, self.floor, self.max_keep)
        # retrievers agreeing on a sibling document (another quarter's report, another
        # sensor's datasheet) is no evidence: the question names a code the hit contradicts
        agreed = [i for i, h in enumerate(hits) if i not in keep
                  and scores[i] >= AGREEMENT_FLOOR and retrievers_agree(h)
                  and penalties[i] != WRONG_CODE_PENALTY]
        keep = sorted([*keep, *agreed], key=lambda i: -scores[i])[:self.max_keep]
        keep_set = set(keep)
        kept = [replace(hits[i], verdict="relevant", grade_score=round(scores[i], 4))
                for i in keep]
        discarded = [replace(h, verdict="irrelevant", grade_score=round(scores[i], 4))
                     for i, h in enumerate(hits) if i not in keep_set]
        terms = QuestionTerms.of(question, self.reading)
        if not kept:
            want = terms.entities + terms.plain
            return Grade(kept, discarded, False,
                         missing=("nothing relevant found for: " + ", ".join(want)) if want
                         else "nothing relevant found",
                         next_query=" ".join(want) or None)
        covered = set()
        for h in kept:
            covered |= self.reading.term_set(context_text(h))
        miss_ents = [e for e in terms.entities if self.reading.stem(e) not in covered]
        miss_plain = [w for w in terms.plain if self.reading.stem(w) not in covered]
        plain_cov = 1.0 - len(miss_plain) / len(terms.plain) if terms.plain else 1.0
        best_cos = max(cos[i] for i in keep) if self.embedder is not None else 0.0
        enough = not miss_ents and (plain_cov >= self.enough_coverage
                                    or best_cos >= self.enough_cosine)
        if enough:
            return Grade(kept, discarded, True)
        gap = miss_ents + miss_plain
        context = [e for e in terms.entities if e not in miss_ents]
        return Grade(kept, discarded, False,
                     missing="no kept chunk mentions: " + ", ".join(gap),
                     next_query=" ".join([*context, *gap]) or None)


def gap_terms(missing: str, rd: Reading) -> list[str]:
    """The content words of a grader's gap description, without the grader's own wording."""
    return [w for w in rd.content_words(missing) if w.lower() not in _META_WORDS]
