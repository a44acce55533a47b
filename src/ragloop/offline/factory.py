"""The offline decisions, built for one run over one knowledge base: all that agent/ takes
from offline/ to run without a generative model (each implements a core/decisions.py
protocol). The KB's words (`Vocabulary`) are passed in, chosen once by the engine."""

from __future__ import annotations

from ragloop.core.decisions import Answerer, FollowUps, Grader, Planner, Rewriter, Router
from ragloop.kb import KnowledgeBase
from ragloop.offline.answerer import ExtractiveAnswerer
from ragloop.offline.follow_ups import LocalFollowUps
from ragloop.offline.grader import LocalGrader
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.rewriter import LocalRewriter
from ragloop.offline.router import RuleRouter, describe_scope
from ragloop.offline.support import SupportChecker
from ragloop.offline.text import reading_language
from ragloop.offline.vocabulary import Vocabulary

# The text helpers read the KB's language while a run reads it (its stop words, its words
# for periods and quantities): the engine enters it around every run and graded search.
reading = reading_language


def planner(words: Vocabulary) -> Planner:
    return LocalPlanner(words=words)


def grader(kb: KnowledgeBase) -> Grader:
    return LocalGrader(kb.embedder)


def rewriter() -> Rewriter:
    return LocalRewriter()


def answerer(kb: KnowledgeBase, strictness: float | None = None) -> Answerer:
    """`strictness`: the support a sentence needs before it is stated (None: the default)."""
    return ExtractiveAnswerer(kb.embedder, min_support=strictness)


def router(kb: KnowledgeBase, words: Vocabulary) -> Router:
    return RuleRouter(kb, words=words)


def follow_ups(kb: KnowledgeBase) -> FollowUps:
    return LocalFollowUps(kb)


def scope(kb: KnowledgeBase) -> str:
    """What the knowledge base covers, in a line (the out-of-scope answer says it)."""
    return describe_scope(kb)


def support_checker(kb: KnowledgeBase) -> SupportChecker:
    return SupportChecker(kb.embedder)
