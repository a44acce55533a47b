"""What a decision is built from, for one run over one knowledge base (`Build`).

Here, below agent/, so that an offline decision's own file can name it in its builder
(`@decision("grader", "NAME")` over `def build(b: Build) -> Grader`, core/registry.py);
agent/decisions.py fills it for the run."""

from __future__ import annotations

from dataclasses import dataclass

from ragloop.core.config import Settings
from ragloop.kb import KnowledgeBase
from ragloop.language.text import Reading, reading
from ragloop.language.vocabulary import Vocabulary, vocabulary
from ragloop.llm.base import ChatModel


@dataclass
class Build:
    """What a decision is built from, for one run over one knowledge base."""

    kb: KnowledgeBase  # several served: the run's view of them (KnowledgeBases) for the router
    settings: Settings
    chat: ChatModel | None = None  # the main model (None: offline)
    grader_chat: ChatModel | None = None  # the grader's and support judge's model

    @property
    def words(self) -> Vocabulary:
        """The KB's language's words; the language is passed in, never ambient."""
        return vocabulary(self.kb.language)

    @property
    def reading(self) -> Reading:
        """How the offline rules read the KB's language (its stop words and patterns)."""
        return reading(self.kb.language)
