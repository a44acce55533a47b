"""The model's check of an answer's citations: one batched call for every (sentence, cited
passage) pair of the answer, `{verdicts: [{id, supported}]}` through the JSON-schema path of
the other decisions (jsonparse.ask_json). An unreadable reply, one that leaves a pair out, or a
provider error or refusal (the answer is already written: the run must not fail now) returns
None for those pairs: the caller keeps those citations and reports them unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ragloop.agent.jsonparse import ask_json
from ragloop.agent.prompts import DATA_RULE, JSON_RULE, clip
from ragloop.core.data_block import data_block
from ragloop.core.errors import RunFailed
from ragloop.core.types import Usage
from ragloop.llm.base import ChatModel

JUDGE_TOKENS = 1024
# Characters of a passage shown: the sentence's support is usually near its figures.
PASSAGE_CHARS = 1200

JUDGE_SYSTEM = f"""You check the citations of an answer. Each pair has an id, a sentence of the
answer and the passage it cites. A pair is supported only when the passage itself states what
the sentence claims: the same figures, names, codes and dates, in the same relation ("above
£2,500: the CFO" is not supported by "above £2,500: the department head"). Sharing the topic
or the words is not support.
{DATA_RULE}
{JSON_RULE}
Schema: {{"verdicts": [{{"id": 1, "supported": true|false}}, ...]}} with one verdict per id."""


class PairVerdict(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    supported: bool


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    verdicts: list[PairVerdict]


def judge_user(pairs: Sequence[tuple[str, str]]) -> str:
    blocks = [f"id={i}\nsentence: {sentence.strip()}\npassage: {clip(passage, PASSAGE_CHARS)}"
              for i, (sentence, passage) in enumerate(pairs, start=1)]
    return (f"{data_block('answer sentences and cited passages', chr(10).join(blocks))}\n\n"
            f"Judge every pair above. Valid ids: 1 to {len(pairs)}.")


class LLMSupportJudge:
    def __init__(self, chat: ChatModel, *, max_tokens: int = JUDGE_TOKENS) -> None:
        self.chat = chat
        self.max_tokens = max_tokens
        self.usage = Usage()

    def judge(self, pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
        """Per pair: supported, unsupported, or None (the model gave no readable verdict)."""
        if not pairs:
            return []
        try:
            reply, ok = ask_json(self.chat, JUDGE_SYSTEM, judge_user(pairs), JudgeReply,
                                 fallback=None, usage=self.usage, max_tokens=self.max_tokens)
        except RunFailed:
            return [None] * len(pairs)
        if not ok or not isinstance(reply, JudgeReply):
            return [None] * len(pairs)
        said: dict[int, bool] = {}
        for v in reply.verdicts:
            said.setdefault(v.id, v.supported)  # a repeated id: its first verdict
        return [said.get(i) for i in range(1, len(pairs) + 1)]
