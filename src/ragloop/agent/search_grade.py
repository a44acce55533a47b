"""One search-and-grade step, shared by the tools driver, the pipeline driver and the MCP
server: search one page of a query, grade the hits against what they must answer, and write
the result the model sees (the kept chunks, numbered, and what is still missing)."""

from __future__ import annotations

from dataclasses import dataclass

from ragloop.agent.tools import SEARCH, Toolbox, format_hits, wrap
from ragloop.core.decisions import Grade, Grader
from ragloop.core.events import GradeEvent
from ragloop.core.types import Hit
from ragloop.retrieval.filters import Filter

UNGRADED_NOTE = "\n\nThese results were not graded; judge their relevance yourself."
# A single-shot document loses its place in the evidence only when the grader is this sure
# it is irrelevant: no chunk of it scored this much anywhere in the run. Measured with the
# local grader on single-shot's top 10 documents (`benchmarks/honest_answers.py calibrate`):
# below 0.3 fall 16% of those documents and 1.2% of the gold ones (HotpotQA dev, first 200
# questions; 23% and 0.8% on the example hard dev set).
CONFIDENT_IRRELEVANT = 0.3


@dataclass
class GradedSearch:
    query: str
    page: int
    hits: list[Hit]  # what the search returned, best first
    grade: Grade  # the grader's verdict on them


def search_and_grade(toolbox: Toolbox, grader: Grader, query: str, against: str,
                     page: int = 1, filter: Filter | None = None) -> GradedSearch:
    """Search `query` (one page, within `filter`) and grade its hits against `against` (the
    question, or the part of it this search serves). A bad query or page raises ToolError."""
    hits = toolbox.search(query, page, filter)
    return GradedSearch(query, page, hits, grader.grade(against, hits))


def document_scores(grade: Grade, into: dict[str, float] | None = None) -> dict[str, float]:
    """Per document, the best a grade said of any of its chunks: 1.0 for a kept chunk (or an
    ungraded search), else its grade score. `into` carries the best over earlier grades."""
    best = into if into is not None else {}
    kept = {h.chunk_id for h in grade.kept}
    for h in [*grade.kept, *grade.discarded]:
        score = 1.0 if grade.ungraded or h.chunk_id in kept else h.grade_score or 0.0
        best[h.doc_id] = max(best.get(h.doc_id, 0.0), score)
    return best


def confidently_irrelevant(doc_id: str, scores: dict[str, float]) -> bool:
    """The grader is sure no chunk of the document is relevant (see CONFIDENT_IRRELEVANT)."""
    return scores.get(doc_id, 0.0) < CONFIDENT_IRRELEVANT


def graded_result(numbered: list[tuple[int, Hit]], grade: Grade, budget: int) -> str:
    """The tool result of a graded search: the kept chunks as numbered evidence, then the gap
    (or a note that nothing was graded), marked as retrieved data and cut to `budget`."""
    text = format_hits(numbered)
    if grade.ungraded:
        text += UNGRADED_NOTE
    elif not grade.enough:
        text += f"\n\nNot enough yet. Missing: {grade.missing or 'unclear'}."
        if grade.next_query:
            text += f" Suggested next query: {grade.next_query}"
    return wrap(SEARCH, text, budget)


def grade_event(query: str, sub_question: int | None, hits: list[Hit], grade: Grade
                ) -> GradeEvent:
    """The GRADE event of one graded search, with every hit's verdict (kept ones first);
    `sub_question`: the part it searched for (None: the tools driver's, which has none)."""
    return GradeEvent(query=query, sub_question=sub_question, chunks=len(hits),
                      kept=len(grade.kept), enough=grade.enough, missing=grade.missing,
                      next_query=grade.next_query, ungraded=grade.ungraded or None,
                      verdicts=[{"chunk_id": h.chunk_id, "doc_id": h.doc_id,
                                 "section": h.section, "verdict": h.verdict,
                                 "score": h.grade_score}
                                for h in [*grade.kept, *grade.discarded]])
