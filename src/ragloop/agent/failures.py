"""The one rule for errors during a run: which continue the loop and which end it.

- `ToolError` (a bad argument, an unknown tool, a query with no words to search, a section
  that does not exist, a page out of range) continues the loop: the tools driver returns the
  message to the model as a tool result flagged `is_error`; the pipeline driver marks that
  sub-question exhausted or that pointer unreadable; single-shot answers from nothing found.
- `ModelRefused` (a refusal stop, a content filter) ends the run with status `refused`: one
  `error` event, and the answer gives the provider's reason and the evidence gathered so far.
- Any other `RunFailed` (`ProviderError`: a provider still down after its retries, from the
  loop's model or the grader's) ends the run with status `failed`, the same way.
- Anything else (a bug, Ctrl-C) records the run `failed` with the exception's repr and
  propagates to the caller.

Errors raised before a run starts (a `ConfigError`: an unknown route or driver, a ceiling below
2) reach the caller as they are and record no run.
"""

from __future__ import annotations

from ragloop.core.errors import ModelRefused, RunFailed, ToolError
from ragloop.core.types import RunStatus

# `except CONTINUES`: the drivers handle these and go on.
CONTINUES: tuple[type[Exception], ...] = (ToolError,)
# `except ENDS`: the engine ends the run with `ended_status(exc)`, keeping what was gathered.
ENDS: tuple[type[Exception], ...] = (RunFailed,)


def ended_status(exc: BaseException) -> RunStatus:
    """The status of a run that `exc` ended."""
    return RunStatus.REFUSED if isinstance(exc, ModelRefused) else RunStatus.FAILED


def ended_answer(exc: BaseException, gathered: str) -> str:
    """What the user reads when `exc` ended the run: what happened and what was gathered."""
    text = (f"The model declined to answer: {exc}." if isinstance(exc, ModelRefused)
            else f"The run failed: {exc}.")
    return text + (f" Evidence gathered so far: {gathered}." if gathered else "")
