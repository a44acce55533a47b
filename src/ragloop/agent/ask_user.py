"""The `ask_user` tool of the tools driver: the model ends the run with a question back to the
user (status needs_input) when the question has several readings the knowledge base answers
differently and names none of them (issue 30). The offline runs' counterpart is the clarify
rule after step 1 (core.decisions.Clarifier).

Not one of the knowledge base's tools (agent/tools.py): it reads nothing, and the MCP server
does not offer it (its `ask` tool asks the client itself, by elicitation).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from ragloop.agent.tools import plain_schema, tool_error
from ragloop.core.conversation import Clarification
from ragloop.core.errors import ToolError
from ragloop.llm.base import ToolSpec

ASK_USER = "ask_user"
MIN_OPTIONS = 2
MAX_OPTIONS = 5

DESCRIPTION = (
    "Ends the run with a short question back to the user and 2 to 5 options to choose from,"
    " instead of an answer; the user's choice comes back as their next question. Use it only"
    " when a search showed that the question has several readings that the knowledge base"
    " answers differently (several products, plans, versions, quarters, countries) and the"
    " question names none of them; take the options from the documents' own names. Do not use"
    " it when the readings share one answer, when the question or the conversation already"
    " names one, before you have searched, or to ask for anything else: then search and answer,"
    " and name what is missing from it.")

_Line = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
_Option = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=80)]


class AskUserArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: _Line = Field(description="The clarifying question, one short sentence.")
    options: list[_Option] = Field(
        min_length=MIN_OPTIONS, max_length=MAX_OPTIONS,
        description="The readings to choose from, each a short name taken from the documents"
                    " (e.g. a product or version name).")


ASK_USER_SPEC = ToolSpec(name=ASK_USER, description=DESCRIPTION,
                         parameters=plain_schema(AskUserArgs.model_json_schema()))


def parse_ask_user(arguments: Mapping[str, Any]) -> Clarification:
    """The model's call as a Clarification; bad arguments raise ToolError (sent back to the
    model to fix, as any tool's)."""
    try:
        args = AskUserArgs.model_validate(dict(arguments))
    except ValidationError as exc:
        raise ToolError(f"ask_user: {tool_error(exc)}") from None
    options = tuple(dict.fromkeys(args.options))  # the same reading twice is one option
    if len(options) < MIN_OPTIONS:
        raise ToolError(f"ask_user: give {MIN_OPTIONS} to {MAX_OPTIONS} different options")
    return Clarification(question=args.question, options=options,
                         reason="the model asked the user to choose a reading (ask_user)")
