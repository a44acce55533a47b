"""Graders for tests that exercise something other than grading."""

from __future__ import annotations

from ragloop.core.decisions import Grade
from ragloop.core.types import Hit, Usage


class KeepsAll:
    """Keeps every hit it is given (enough when there are any): no model call is spent on
    grading, so a scripted chat serves only what the test is about."""

    usage = Usage()

    def grade(self, question: str, hits: list[Hit]) -> Grade:
        return Grade(kept=list(hits), discarded=[], enough=bool(hits))
