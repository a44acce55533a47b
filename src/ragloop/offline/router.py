"""The rule router: easy questions go single-shot, the rest to the agent, and questions the
knowledge base plainly lacks are answered at once as out of scope."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragloop.core.decisions import Route
from ragloop.core.errors import EmptyQueryError
from ragloop.kb import KnowledgeBase
from ragloop.language.text import Reading
from ragloop.language.vocabulary import ENGLISH_WORDS, Vocabulary, vocabulary
from ragloop.offline.planner import LocalPlanner
from ragloop.retrieval.languages import month_pattern

# Below this cosine to the nearest chunk, with no shared term, a question is off topic
# (MiniLM: on-topic questions score 0.35–0.8 against the example KB, nonsense < 0.2).
OUT_OF_SCOPE_COSINE = 0.22
SHORT_QUESTION_WORDS = 12


@dataclass(frozen=True)
class Cues:
    """What sends a question to the agent, built from a language's words ("router_cues" of
    language/lang/<code>.json, and its period codes)."""

    compare: re.Pattern[str]
    chain: re.Pattern[str]
    date: re.Pattern[str]

    @classmethod
    def of(cls, words: Vocabulary) -> Cues:
        quarter, fy = words.period_code("quarter"), words.year_code
        months = month_pattern(words.code, short=False)
        b = words.edge  # none between Chinese words
        return cls(
            compare=re.compile(
                rf"{b}{words.alternatives('router_cues.comparison')}{b}", re.IGNORECASE
            ),
            chain=re.compile(rf"{b}{words.alternatives('router_cues.chain')}{b}", re.IGNORECASE),
            date=re.compile(
                rf"\b({quarter}|{fy}\s?\d{{2,4}}|(?:19|20)\d\d|{months})\b", re.IGNORECASE
            ),
        )


ENGLISH_CUES = Cues.of(ENGLISH_WORDS)


def describe_scope(kb: KnowledgeBase, limit: int = 12) -> str:
    """The first `limit` titles, in a sentence of the knowledge base's language."""
    words = vocabulary(kb.language).table("answer_text")
    docs = kb.documents()
    titles = "; ".join(d.title for d in docs[:limit])
    if not titles:
        return words["empty_scope"]
    if len(docs) > limit:
        return words["more_documents"].format(titles=titles, n=len(docs) - limit)
    return words["scope"].format(titles=titles)


@dataclass(frozen=True)
class ScopeCheck:
    """What the out-of-scope rule looks at: does any chunk share the question's terms, and how
    close in meaning is the nearest one."""

    shared_terms: bool
    best_cosine: float


class RuleRouter:
    """`words` is the language whose cue words and planner the router reads (English);
    `out_of_scope_cosine` the floor below which a question no chunk shares a term with is out
    of scope (benchmarks/grader_calibration.py --router measures it)."""

    def __init__(self, kb: KnowledgeBase, *, words: Vocabulary, reading: Reading,
                 out_of_scope_cosine: float = OUT_OF_SCOPE_COSINE) -> None:
        self.kb = kb
        self.reading = reading  # the knowledge base's language (its stop words too)
        self.planner = LocalPlanner(words=words, reading=reading)
        self.cues = ENGLISH_CUES if words is ENGLISH_WORDS else Cues.of(words)
        self.out_of_scope_cosine = out_of_scope_cosine

    def scope(self, question: str) -> ScopeCheck:
        """The out-of-scope rule's evidence for `question` (EmptyQueryError: no words)."""
        bm25 = self.kb.search(question, k=1, mode="bm25")
        vector = self.kb.search(question, k=1, mode="vector")
        best = vector[0].vector_score if vector and vector[0].vector_score else 0.0
        return ScopeCheck(shared_terms=bool(bm25), best_cosine=best)

    def out_of_scope(self, question: str) -> str | None:
        """Why the question is plainly outside the knowledge base, or None."""
        try:
            check = self.scope(question)
        except EmptyQueryError:
            return "the question has no words to search for"
        if not check.shared_terms and check.best_cosine < self.out_of_scope_cosine:
            return (
                f"no document shares its key terms and the closest chunk is only"
                f" {check.best_cosine:.2f} similar in meaning"
            )
        return None

    def route(self, question: str) -> Route:
        rd = self.reading
        plan = self.planner.plan(question)
        if not plan.need_search:
            return Route("agent", "no search needed (small talk): the planner replies")
        why = self.out_of_scope(question)
        if why:
            return Route("out_of_scope", why)
        words = question.split()
        reasons = []
        if len(plan.sub_questions) > 1:
            reasons.append(f"{len(plan.sub_questions)} parts")
        if self.cues.compare.search(question):
            reasons.append("a comparison")
        if len(set(m.group(0).lower() for m in self.cues.date.finditer(question))) >= 2:
            reasons.append("two dates")
        if rd.section_refs(question):
            reasons.append("a section reference")
        if self.cues.chain.search(question):
            reasons.append("a chained entity")
        if len(words) > SHORT_QUESTION_WORDS:
            reasons.append(f"long ({len(words)} words)")
        if reasons:
            return Route("agent", "needs the agent: " + ", ".join(reasons))
        # the user's own words, not their stems ("double texting", not "doubl text")
        said = rd.content_words(question)
        return Route("single", f"short question with one topic ({', '.join(said[:4])})")
