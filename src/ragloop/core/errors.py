"""Errors split by audience.

- ToolError: goes back to the model as a tool result; the run continues.
- UserError: names a fix for the person at the keyboard (bad query, wrong embedder, missing doc).
- RunFailed: ends a run with status `failed`, keeping what was gathered; ModelRefused ends it
  with status `refused` and the provider's reason.
- RunCancelled: stops a run on purpose between two of its events (its client went away); the
  run ends `failed` with the reason as its error.
"""


class RagloopError(Exception):
    """Base of every error ragloop raises on purpose."""


class ToolError(RagloopError):
    """A tool could not do what the model asked; the message is shown to the model."""


class UserError(RagloopError):
    """Something the user can fix; the message says how."""


class EmptyQueryError(UserError):
    pass


class EmbedderMismatchError(UserError):
    pass


class LanguageMismatchError(UserError):
    pass


class ConfigError(UserError):
    pass


class NotFoundError(UserError):
    pass


class DiskFullError(UserError):
    """No space left where the knowledge base is written; the message names the folder."""


class ReaderError(RagloopError):
    """A file could not be read; ingest reports it by name and goes on."""


class RunFailed(RagloopError):
    """A run cannot go on (provider down after retries, ...)."""


class ProviderError(RunFailed):
    pass


class ModelRefused(RunFailed):
    """The model declined to continue (a refusal stop or a content filter)."""


class RunCancelled(BaseException):
    """A run stopped before its end because no one waits for it any more (the client of a
    streamed reply disconnected). A BaseException, as asyncio's CancelledError: the drivers'
    `except Exception` fallbacks (a bad grader reply, a model retry) must not swallow it and
    go on calling the model; the engine ends the run `failed` with this message."""
