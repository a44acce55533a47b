"""One search-and-grade step, shared by the tools driver, the pipeline driver and the MCP
server: search one page of a query, grade the hits against what they must answer, and write
the result the model sees (the kept chunks, numbered, and what is still missing)."""

from __future__ import annotations

from dataclasses import dataclass

from ragloop.agent.tools import SEARCH, Toolbox, format_hits, wrap
from ragloop.core.decisions import Grade, Grader
from ragloop.core.events import GradeEvent
from ragloop.core.types import Hit

UNGRADED_NOTE = "\n\nThese results were not graded; judge their relevance yourself."


@dataclass
class GradedSearch:
    query: str
    page: int
    hits: list[Hit]  # what the search returned, best first
    grade: Grade  # the grader's verdict on them


def search_and_grade(toolbox: Toolbox, grader: Grader, query: str, against: str,
                     page: int = 1) -> GradedSearch:
    """Search `query` (one page) and grade its hits against `against` (the question, or the
    part of it this search serves). A bad query or page raises ToolError."""
    hits = toolbox.search(query, page)
    return GradedSearch(query, page, hits, grader.grade(against, hits))


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


def grade_event(query: str, sub_question: int, hits: list[Hit], grade: Grade) -> GradeEvent:
    """The GRADE event of one graded search, with every hit's verdict (kept ones first)."""
    return GradeEvent(query=query, sub_question=sub_question, chunks=len(hits),
                      kept=len(grade.kept), enough=grade.enough, missing=grade.missing,
                      next_query=grade.next_query, ungraded=grade.ungraded or None,
                      verdicts=[{"chunk_id": h.chunk_id, "doc_id": h.doc_id,
                                 "section": h.section, "verdict": h.verdict,
                                 "score": h.grade_score}
                                for h in [*grade.kept, *grade.discarded]])
