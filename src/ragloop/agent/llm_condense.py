"""The LLM `Condenser`: a conversation's new question made standalone in one JSON call,
`{standalone, kind: follow_up | new_topic | standalone, reason}`, through the same
schema-constrained path as the other decisions (jsonparse.ask_json). A reply to a turn that
asked back (needs_input) that the offline rule reads as a choice among its options is the
pending question narrowed to it (`core.conversation.narrowed`), without a call: the same
question either way.

Only the last turns reach the model, each as what was searched and the start of its answer,
inside a data block: earlier answers quote the documents, so they are data, never
instructions. An unreadable reply, or one that drops the question's words for an empty
string, falls back to the offline rule (a bad condense never fails a turn)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragloop.agent.jsonparse import ask_json
from ragloop.agent.prompts import DATA_RULE, JSON_RULE, clip
from ragloop.core.conversation import Condensed, Turn, TurnKind, narrowed
from ragloop.core.data_block import data_block
from ragloop.core.decisions import Condenser
from ragloop.core.types import Usage
from ragloop.llm.base import ChatModel

HISTORY_TURNS = 6  # the last turns shown: a reference further back is rare and costs tokens
ANSWER_CHARS = 400  # of each earlier answer: enough for its subject
CONDENSE_TOKENS = 1024

CONDENSER_SYSTEM = f"""You rewrite the last message of a conversation with a company
knowledge base so that it can be searched on its own, without the conversation.
- "follow_up": the message refers back (a pronoun such as "it" or "he", "what about X",
  "and …", "why?", an ellipsis, "going back to …"). Write "standalone": the message with the
  earlier subject it means put in, in the user's words otherwise, as one question.
- "new_topic": the message names its own subject and leaves the earlier one. Write
  "standalone": the message unchanged.
- "standalone": the message names its own subject, on the same topic. Write "standalone":
  the message unchanged.
Never answer the question; never add facts that are not in the conversation.
"reason": a few words on why. {DATA_RULE}
{JSON_RULE}
Schema: {{"kind": "follow_up"|"new_topic"|"standalone", "standalone": "...", "reason": "..."}}"""


# maxLength is a schema bound, not a check (as agent/tools.py's arguments): llama.cpp turns it
# into a bounded repetition in the reply's grammar (grammars/README.md, "JSON Schemas →
# GBNF": a string's minLength/maxLength become `char{m,n}`), so a grammar-constrained small
# model cannot loop inside a string. Without it SmolLM2-135M on the tests' server wrote one
# string until max_tokens (2048), was asked again with twice the budget, filled the 4096-token
# context and failed the turn (benchmarks/conversations.py, dev split). Kept well under the
# repetition cap newer llama-server builds put on a grammar (a maxLength near 2000 is refused).
STANDALONE_CHARS = 500
REASON_CHARS = 200


class CondenseReply(BaseModel):
    """`kind` first: a grammar-constrained server writes the properties in the schema's order
    (llama.cpp's converter: `root ::= "{" kind-kv "," standalone-kv …`), and what to write in
    `standalone` depends on the kind (the prompt's rules), so the decision comes before the
    text it governs, as PlanReply's need_search does. Written the other way round the model
    copied the message into `standalone` first, then called it a new topic."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["follow_up", "new_topic", "standalone"]
    standalone: str = Field(min_length=1, json_schema_extra={"maxLength": STANDALONE_CHARS})
    reason: Annotated[str, Field(json_schema_extra={"maxLength": REASON_CHARS})] | None = ""


def condenser_user(history: Sequence[Turn], question: str) -> str:
    shown = list(history)[-HISTORY_TURNS:]
    first = len(history) - len(shown) + 1
    turns = "\n".join(f"Turn {first + i}. Question: {t.searched}\n"
                      f"Answer: {clip(t.answer, ANSWER_CHARS) or '(none)'}"
                      for i, t in enumerate(shown))
    return (f"The conversation so far:\n{data_block('conversation', turns)}\n\n"
            f"The user's new message:\n<message>\n{question.strip()}\n</message>")


class LLMCondenser:
    def __init__(self, chat: ChatModel, fallback: Condenser, *,
                 max_tokens: int = CONDENSE_TOKENS) -> None:
        self.chat = chat
        self.fallback = fallback
        self.max_tokens = max_tokens
        self.usage = Usage()

    def condense(self, history: Sequence[Turn], question: str) -> Condensed:
        q = " ".join(question.split())
        if not history:
            return Condensed(q, TurnKind.STANDALONE, "the first turn: nothing to refer to")
        last = history[-1]
        if last.asked_back:  # the user's choice among the options: narrowed as the rule does
            ruled = self.fallback.condense(history, q)
            if ruled.question == narrowed(last.searched, q):
                return ruled
        reply, ok = ask_json(self.chat, CONDENSER_SYSTEM, condenser_user(history, q),
                             CondenseReply, fallback=None, usage=self.usage,
                             max_tokens=self.max_tokens)
        if not ok or not isinstance(reply, CondenseReply):
            offline = self.fallback.condense(history, q)
            return Condensed(offline.question, offline.kind,
                             f"model reply unreadable; the offline rule: {offline.reason}",
                             offline.subject, offline.refers_to, fell_back=True,
                             queries=offline.queries, prior=offline.prior)
        kind = TurnKind(reply.kind)
        # a turn that does not follow up is searched as typed, whatever the model rewrote
        text = " ".join(reply.standalone.split()) if kind is TurnKind.FOLLOW_UP else q
        return Condensed(text or q, kind, (reply.reason or "").strip() or f"the model: {kind}")
