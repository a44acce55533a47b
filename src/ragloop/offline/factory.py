"""The offline decisions, built for one run over one knowledge base: all that agent/ takes
from offline/ to run without a generative model (each implements a core/decisions.py
protocol). Each is built with the KB's language: its words (`Vocabulary`, chosen once by
the engine) and its reading (`text.Reading`: its stop words, the patterns its text helpers
read), passed in explicitly: no component reads a language from ambient state.

An offline decision in a file of its own registers itself (`@decision(KIND, NAME)` over its
builder, core/registry.py); its one import among those below is what loads it."""

from __future__ import annotations

from ragloop.core.decisions import (
    Answerer,
    Clarifier,
    Condenser,
    FollowUps,
    Grader,
    Planner,
    Rewriter,
    Router,
    SourceChooser,
)
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases
from ragloop.language.support import SupportChecker
from ragloop.language.text import Reading
from ragloop.language.text import reading as reading_of
from ragloop.language.vocabulary import Vocabulary
from ragloop.offline.answerer import ExtractiveAnswerer
from ragloop.offline.build import Build as Build  # for agent/decisions.py
from ragloop.offline.clarify import RuleClarifier
from ragloop.offline.follow_up import RetrievalCondenser
from ragloop.offline.follow_ups import LocalFollowUps
from ragloop.offline.grader import LocalGrader
from ragloop.offline.kb_follow_ups import FollowUpsByKb
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.rewriter import LocalRewriter
from ragloop.offline.router import RuleRouter, describe_scope
from ragloop.offline.source_choice import NearestChunkChooser


def reading(kb: KnowledgeBase) -> Reading:
    """How the offline rules read `kb`'s language (English's patterns when it has no word
    file; its own stop words whatever it is)."""
    return reading_of(kb.language)


def condenser(kb: KnowledgeBase | KnowledgeBases) -> Condenser:
    """A follow-up decided by `kb`'s own search (`follow_up.py`)."""
    return RetrievalCondenser(kb, reading(kb))


def planner(words: Vocabulary, reading: Reading) -> Planner:
    return LocalPlanner(words=words, reading=reading)


def grader(kb: KnowledgeBase) -> Grader:
    return LocalGrader(kb.embedder, reading=reading(kb))


def rewriter(reading: Reading) -> Rewriter:
    return LocalRewriter(reading=reading)


def answerer(kb: KnowledgeBase, strictness: float | None = None) -> Answerer:
    """`strictness`: the support a sentence needs before it is stated (None: the default)."""
    return ExtractiveAnswerer(kb.embedder, min_support=strictness, reading=reading(kb))


def router(kb: KnowledgeBase, words: Vocabulary) -> Router:
    return RuleRouter(kb, words=words, reading=reading(kb))


def follow_ups(kb: KnowledgeBase | KnowledgeBases) -> FollowUps:
    """Several knowledge bases: each KB's own, so links never cross from one to another."""
    if isinstance(kb, KnowledgeBases):
        return FollowUpsByKb(kb, reading(kb))
    return LocalFollowUps(kb, reading=reading(kb))


def scope(kb: KnowledgeBase) -> str:
    """What the knowledge base covers, in a line (the out-of-scope answer says it)."""
    return describe_scope(kb)


def support_checker(kb: KnowledgeBase) -> SupportChecker:
    return SupportChecker(kb.embedder, reading=reading(kb))


def clarifier(kb: KnowledgeBase, words: Vocabulary) -> Clarifier:
    """Asks back when the first search's kept passages answer several readings (issue 30)."""
    return RuleClarifier(words, reading(kb))


def source_chooser(kbs: KnowledgeBases) -> SourceChooser:
    """The offline choice of knowledge base(s) per query when several are served."""
    return NearestChunkChooser(kbs)
