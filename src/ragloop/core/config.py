"""Settings, read from RAGLOOP_* environment variables, overridable per call."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from ragloop.core.errors import ConfigError

LOCAL_EMBEDDER = "local:all-MiniLM-L6-v2"
# the default of a knowledge base in another language (optional extra `multilingual`)
MULTILINGUAL_EMBEDDER = "local:multilingual-e5-small"
# Current, not deprecated, in the installed SDKs' model lists (tests/test_llm_defaults.py).
DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-sonnet-5-5"
DEFAULT_OPENAI_MODEL = "openai:gpt-5.4-mini"


def _default_model() -> str:
    if os.environ.get("RAGLOOP_MODEL"):
        return os.environ["RAGLOOP_MODEL"]
    if os.environ.get("ANTHROPIC_API_KEY"):
        return DEFAULT_ANTHROPIC_MODEL
    if os.environ.get("OPENAI_API_KEY"):
        return DEFAULT_OPENAI_MODEL
    return "offline"


@dataclass(frozen=True)
class Settings:
    kb: str = "kb"
    # None means "whatever the knowledge base records" (LOCAL_EMBEDDER for a new one).
    embedder: str | None = None
    embed_base_url: str | None = None
    # the KB's language (retrieval/languages.py); None: recorded in the KB, else detected
    language: str | None = None
    embed_batch_size: int = 32
    chunk_tokens: int = 200
    chunk_overlap: int = 40
    model: str = "offline"
    grader_model: str | None = None
    base_url: str | None = None
    max_steps: int = 6
    search_k: int = 8
    # documents single-shot RAG answers from (the eval sets it to its k)
    single_k: int = 5
    tool_result_chars: int = 6000
    # A thinking model on a long prompt can take minutes; the SDKs' own default is 10.
    request_timeout_s: float = 300.0
    max_retries: int = 3
    # Output budgets; thinking tokens count against them on current models.
    loop_max_tokens: int = 8192  # a tools-loop step and an LLM answer
    decision_max_tokens: int = 2048  # planner, grader, rewriter
    # Who checks that a cited passage supports its sentence: "auto" (the model, in one
    # batched call, when one is configured; else offline), "offline", or "off".
    citation_check: str = "auto"
    # How much of a part's words (or meaning) a sentence must share before the offline
    # answerer states it (0..1): higher declines more, lower answers more. The curve it trades
    # (abstained vs wrongly declined on the example hard splits) is in docs/evaluation.md. None: the
    # answerer's own default (offline/answerer.py MIN_SUPPORT, 0.34).
    strictness: float | None = None
    # Ask the user back when a question has several readings the knowledge base answers
    # differently (issue 30): "auto" (the offline rule, or the model's ask_user tool) or "off"
    # (always answer; RAGLOOP_CLARIFY=off).
    clarify: str = "auto"
    # A sync (`ingest --sync`, `serve --sync`) that would remove more than this many of a
    # folder's documents AND more than this share of them stops and removes nothing unless
    # confirmed (`--allow-mass-delete`): an emptied folder (an unmounted share) or a folder
    # moved away mid-sync looks like mass deletion (issue 39).
    sync_max_remove_count: int = 5
    # The longest question or search query a client (MCP) may send, in characters: a 5 MB
    # query kept the MCP server busy 58 s (issue 39). HTTP's /ask, /search and /v1 have the
    # same bound in their request schemas (apps/server/app.py MAX_QUESTION_CHARS).
    max_query_chars: int = 4000
    # "on": a run whose reply streams to its client (the /v1 stream) stops at its next event
    # once that client disconnects (a paid model is not called for no one), ending `failed`
    # with "cancelled: …" as its error; "off": it runs to the end. POST /runs is meant to
    # outlive its client and always does.
    stop_on_disconnect: str = "on"
    sync_max_remove_share: float = 0.5
    # What reading one file, or one download, may cost (ingest/limits.py); past a limit the
    # file is refused with an error that names the setting, and the ingest goes on.
    read_max_bytes: int = 100_000_000  # a file read whole (text formats); one download
    read_max_member_bytes: int = 25_000_000  # one XML/XHTML part of a docx/pptx/xlsx/epub
    read_max_inflated_bytes: int = 300_000_000  # all parts of one such archive, inflated
    read_max_cells: int = 2_000_000  # cells of one spreadsheet or CSV
    read_max_columns: int = 2_000  # columns of one row
    read_max_text_chars: int = 20_000_000  # text of one document
    read_timeout_s: float = 120.0  # wall time to read one file
    download_timeout_s: float = 60.0  # wall time of one download, connect to last byte
    # Text a reader of the file cannot see (HTML display:none, white on white, a Word hidden
    # run, invisible PDF text): "drop" (not indexed, so it cannot reach an answer; issue 39)
    # or "keep" (RAGLOOP_HIDDEN_TEXT=keep). ingest/readers/visibility.py.
    hidden_text: str = "drop"

    @classmethod
    def from_env(cls) -> Settings:
        """Each field from RAGLOOP_<FIELD>; a number that does not parse is a ConfigError
        naming the variable. (Hand-written: pydantic-settings costs more, see docs/layout.md,
        Dependencies.)"""
        env = os.environ
        kwargs: dict[str, object] = {"model": _default_model()}
        for f in fields(cls):
            name = f"RAGLOOP_{f.name.upper()}"
            raw = env.get(name)
            if raw is None or f.name == "model":
                continue
            kind = f.type if isinstance(f.type, str) else f.type.__name__
            parse = int if kind.startswith("int") else float if kind.startswith("float") else str
            try:
                kwargs[f.name] = parse(raw)
            except ValueError:
                what = "a whole number" if parse is int else "a number"
                raise ConfigError(
                    f"Bad setting in the environment: {name}={raw!r} is not {what}"
                ) from None
        return cls(**kwargs)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})
