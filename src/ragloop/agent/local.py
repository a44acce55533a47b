"""The offline decision makers, in one place for the engine: no generative model needed."""

from __future__ import annotations

from collections.abc import Callable

from ragloop.agent.answerer_local import ExtractiveAnswerer
from ragloop.agent.grader_local import LocalGrader
from ragloop.agent.planner_local import LocalPlanner
from ragloop.agent.rewriter_local import LocalRewriter, fetch_targets
from ragloop.agent.router import RuleRouter, describe_scope
from ragloop.kb import KnowledgeBase
from ragloop.types import Hit


def follow_ups_for(kb: KnowledgeBase) -> Callable[[Hit], list[tuple[str, str]]]:
    """Sections a kept chunk points to (references, or its own section when cut off)."""
    documents = kb.documents()
    return lambda hit: fetch_targets(hit, documents)


__all__ = ["ExtractiveAnswerer", "LocalGrader", "LocalPlanner", "LocalRewriter", "RuleRouter",
           "describe_scope", "follow_ups_for"]
