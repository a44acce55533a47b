"""The rule router: easy questions go single-shot, the rest to the agent, and questions the
knowledge base plainly does not cover are answered at once as out of scope."""

from __future__ import annotations

import re

from ragloop.core.decisions import Route
from ragloop.core.errors import EmptyQueryError
from ragloop.kb import KnowledgeBase
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.text import content_terms, section_refs
from ragloop.offline.vocabulary import ENGLISH_WORDS
from ragloop.retrieval.languages import month_pattern

# Below this cosine to the nearest chunk, with no shared term, a question is off topic
# (MiniLM: on-topic questions score 0.35–0.8 against the example KB, nonsense < 0.2).
OUT_OF_SCOPE_COSINE = 0.22
SHORT_QUESTION_WORDS = 12
_COMPARE = re.compile(r"\b(compare|compared|versus|vs\.?|differ|difference|between|both|"
                      r"each of|which of)\b", re.IGNORECASE)
_CHAIN = re.compile(r"\b(who (?:approves|heads|leads|owns|signs)|whose|the person who|"
                    r"responsible for|according to the)\b", re.IGNORECASE)
_QUARTER, _FY = ENGLISH_WORDS.period_code("quarter"), ENGLISH_WORDS.year_code
_MONTHS = month_pattern(short=False)
_DATE = re.compile(rf"\b({_QUARTER}|{_FY}\s?\d{{2,4}}|(?:19|20)\d\d|{_MONTHS})\b", re.IGNORECASE)


def describe_scope(kb: KnowledgeBase, limit: int = 12) -> str:
    docs = kb.documents()
    titles = [d.title for d in docs[:limit]]
    more = f", and {len(docs) - limit} more documents" if len(docs) > limit else ""
    return "; ".join(titles) + more + "." if titles else "nothing yet (the KB is empty)."


class RuleRouter:
    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.planner = LocalPlanner()

    def out_of_scope(self, question: str) -> str | None:
        """Why the knowledge base plainly does not cover the question, or None."""
        try:
            bm25 = self.kb.search(question, k=1, mode="bm25")
            vector = self.kb.search(question, k=1, mode="vector")
        except EmptyQueryError:
            return "the question has no words to search for"
        best = vector[0].vector_score if vector and vector[0].vector_score else 0.0
        if not bm25 and best < OUT_OF_SCOPE_COSINE:
            return (f"no document shares its key terms and the closest chunk is only"
                    f" {best:.2f} similar in meaning")
        return None

    def route(self, question: str) -> Route:
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
        if _COMPARE.search(question):
            reasons.append("a comparison")
        if len(set(m.group(0).lower() for m in _DATE.finditer(question))) >= 2:
            reasons.append("two dates")
        if section_refs(question):
            reasons.append("a section reference")
        if _CHAIN.search(question):
            reasons.append("a chained entity")
        if len(words) > SHORT_QUESTION_WORDS:
            reasons.append(f"long ({len(words)} words)")
        if reasons:
            return Route("agent", "needs the agent: " + ", ".join(reasons))
        terms = content_terms(question)
        return Route("single", f"short question with one topic ({', '.join(terms[:4])})")
