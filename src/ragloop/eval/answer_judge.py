"""The LLM judge of an answer against the set's reference answer, when a model is configured.

String match (metrics.exact_match) misses a correct answer worded otherwise ("twenty-five
steps" for "25"); the judge reads both. One call per question through the JSON path of the
other decisions (agent/jsonparse.ask_json); an unreadable reply or a provider error gives
None: the question is left out of `answer_judged`, never counted wrong.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ragloop.agent.jsonparse import ask_json
from ragloop.agent.prompts import DATA_RULE, JSON_RULE, clip
from ragloop.core.data_block import data_block
from ragloop.core.errors import RagloopError
from ragloop.core.types import Usage
from ragloop.llm.base import ChatModel

ANSWER_CHARS = 2000
JUDGE_TOKENS = 256

JUDGE_SYSTEM = f"""You grade an answer to a question against the reference answer. The answer
is correct when it states the reference (or an equivalent: the same figure, name or date in
other words); an answer that only says where to look, or declines, is not correct.
{DATA_RULE}
{JSON_RULE}
Schema: {{"correct": true|false}}"""


class Verdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    correct: bool


def judge_answer(chat: ChatModel, question: str, references: list[str], answer: str,
                 usage: Usage | None = None) -> bool | None:
    """True / False, or None when the model gave no readable verdict."""
    body = (f"question: {question}\nreference: {' | '.join(references)}\n"
            f"answer: {clip(answer or '', ANSWER_CHARS)}")
    try:
        reply, ok = ask_json(chat, JUDGE_SYSTEM, data_block("question, reference and answer",
                                                            body) + "\n\nGrade the answer.",
                             Verdict, fallback=None, usage=usage, max_tokens=JUDGE_TOKENS)
    except RagloopError:
        return None
    return reply.correct if ok and isinstance(reply, Verdict) else None
