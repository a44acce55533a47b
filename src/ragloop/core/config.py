"""Settings: one typed model (pydantic-settings) of every `RAGLOOP_*` variable and `ragloop.toml`
key, validated once where settings are made, overridable per call through the same model.

`Settings(...)` takes only what it is given (its defaults otherwise); `Settings.from_env()` reads
`RAGLOOP_<FIELD>` through pydantic-settings' `EnvSettingsSource` with `env_prefix="RAGLOOP_"`
(docs.pydantic.dev/latest/concepts/pydantic_settings, "Environment variable names" and
"Customise settings sources": a source is a callable returning the field values it found).
`ragloop.toml` keys are the variables' own names, so the file is read by core/config_file.py
into the environment's defaults (a `TomlConfigSettingsSource` matches keys to field names, and
the variables no setting object reaches, read where they are used, must see the file too); its
values are checked against this model there, naming the file.

Every bad value, from the environment, a file, a CLI option, an HTTP or MCP argument or Python,
is one `ConfigError` (a `UserError`: exit 2 on the CLI, 400 on HTTP, a tool error on MCP) that
names the setting, the value and what is allowed (`describe_error`).
"""

from __future__ import annotations

import os
import types
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from ragloop.core.errors import ConfigError

LOCAL_EMBEDDER = "local:all-MiniLM-L6-v2"
# the default of a knowledge base in another language (optional extra `multilingual`)
MULTILINGUAL_EMBEDDER = "local:multilingual-e5-small"
# Current, not deprecated, in the installed SDKs' model lists (tests/test_llm_defaults.py).
DEFAULT_ANTHROPIC_MODEL = "anthropic:claude-sonnet-5-5"
DEFAULT_OPENAI_MODEL = "openai:gpt-5.4-mini"
ENV_PREFIX = "RAGLOOP_"
# The least step ceiling that can answer: one search and the answer.
MIN_STEPS = 2
# The most a client (HTTP, MCP) may ask for in one run.
MAX_STEPS_LIMIT = 50

CitationCheckMode = Literal["auto", "offline", "off"]
ClarifyMode = Literal["auto", "off"]
OnOff = Literal["on", "off"]
HiddenTextMode = Literal["drop", "keep"]
EmbedPrecision = Literal["auto", "fp32", "bf16"]
RouteChoice = Literal["auto", "single", "agent"]
DriverChoice = Literal["tools", "pipeline"]

# The names each decision kind's implementations are registered under, filled by
# agent/decisions.py's `register` (core cannot import agent). A decision setting (a field made
# with `decision=KIND`) is checked against them when they are known; a Settings made before
# agent/decisions.py is imported is checked by `decisions.make`, with the same text.
DECISION_NAMES: dict[str, list[str]] = {}


def _default_model() -> str:
    if os.environ.get("RAGLOOP_MODEL"):
        return os.environ["RAGLOOP_MODEL"]
    if os.environ.get("ANTHROPIC_API_KEY"):
        return DEFAULT_ANTHROPIC_MODEL
    if os.environ.get("OPENAI_API_KEY"):
        return DEFAULT_OPENAI_MODEL
    return "offline"


def _doc(value: Any, meaning: str, *, shown: str | None = None, flag: str | None = None,
         decision: str | None = None, **limits: Any) -> Any:
    """A field with its line of the settings table: `meaning`, the default as `shown` there
    (when the default itself says too little), the CLI option that sets it per call, the
    decision kind whose registered implementation it names."""
    extra: dict[str, Any] = {}
    if shown is not None:
        extra["shown"] = shown
    if flag is not None:
        extra["flag"] = flag
    if decision is not None:
        extra["decision"] = decision
    return Field(value, description=meaning, json_schema_extra=extra or None, **limits)


def choices(field: FieldInfo) -> tuple[str, ...]:
    """A choice field's allowed values, from its Literal type (empty for any other field)."""
    found: list[str] = []
    stack = [field.annotation]
    while stack:
        kind = stack.pop()
        if get_origin(kind) is Literal:
            found += [str(v) for v in get_args(kind)]
        elif get_origin(kind) in (Union, types.UnionType):
            stack += list(reversed(get_args(kind)))
    return tuple(found)


def _bounds(field: FieldInfo) -> tuple[Any, Any, Any]:
    """(at least, more than, at most) from the field's Field(ge=, gt=, le=)."""
    found: dict[str, Any] = {}
    for m in field.metadata:
        for key in ("ge", "gt", "le"):
            if getattr(m, key, None) is not None:
                found[key] = getattr(m, key)
    return found.get("ge"), found.get("gt"), found.get("le")


def decision_kind(field: FieldInfo) -> str | None:
    """The decision kind a field names an implementation of (None: not a decision setting)."""
    return (field.json_schema_extra or {}).get("decision")  # type: ignore[union-attr,return-value]


def allowed(field: FieldInfo, *, registered: bool = True) -> str:
    """What a field accepts, in words (the error text and the settings table say the same).
    `registered`: a decision setting lists the names registered now (the table does not: what
    is registered depends on what a program imports)."""
    kind = decision_kind(field)
    if kind is not None:
        names = DECISION_NAMES.get(kind)
        if registered and names:
            return "one of " + ", ".join(names)
        return f"the name of a registered {kind.replace('_', ' ')}"
    options = choices(field)
    if options:
        return "one of " + ", ".join(options)
    low, above, high = _bounds(field)
    kind = "a whole number" if _is(field, int) else "a number" if _is(field, float) else "text"
    if low is not None and high is not None:
        return f"{kind} from {low:g} to {high:g}"
    if low is not None:
        return f"{kind}, at least {low:g}"
    if above is not None:
        return f"{kind} above {above:g}"
    return kind


def _is(field: FieldInfo, kind: type) -> bool:
    ann = field.annotation
    return ann is kind or kind in get_args(ann)


class _Validated(BaseModel):
    """Raises ConfigError (one text per bad value) instead of pydantic's ValidationError."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe_error(type(self), exc)) from None

    @classmethod
    def setting_name(cls, field: str) -> str:
        return field

    @field_validator("*", mode="before")
    @classmethod
    def _choice_words(cls, value: Any, info: Any) -> Any:
        """A choice is read as a word: " OFF" is off (as the hand-written checks read it)."""
        field = cls.model_fields.get(info.field_name)
        if isinstance(value, str) and field is not None and (choices(field)
                                                             or decision_kind(field)):
            return value.strip().lower()
        if isinstance(value, os.PathLike) and field is not None and _is(field, str):
            return os.fspath(value)  # a folder given as a Path, as Python callers write it
        return value


def check_decision(field: FieldInfo, value: str | None) -> str | None:
    """A decision setting's value, refused (ValueError) when its kind's names are known and it
    is not one of them."""
    kind = decision_kind(field)
    names = DECISION_NAMES.get(kind or "")
    if value is not None and names and value not in names:
        raise ValueError(f"no {kind} named {value!r}")
    return value


def describe_error(model: type[_Validated], exc: ValidationError) -> str:
    """"Bad setting RAGLOOP_CLARIFY='never': must be one of auto, off" (each bad value)."""
    parts = []
    for error in exc.errors():
        name = str(error["loc"][0]) if error["loc"] else "?"
        field = model.model_fields.get(name)
        if field is None:
            parts.append(f"{name!r}: not a setting")
            continue
        flag = (field.json_schema_extra or {}).get("flag")  # type: ignore[union-attr]
        value = error.get("input")
        shown = "***" if field.annotation in (SecretStr, SecretStr | None) else repr(value)
        also = f" ({flag})" if flag else ""
        parts.append(f"{model.setting_name(name)}={shown}{also}: must be {allowed(field)}")
    return "Bad setting " + "; ".join(parts)


class Settings(_Validated, BaseSettings):
    """Every setting, typed. `Settings(max_steps=3)`; `Settings.from_env()`; `s.with_(...)`."""

    # env_prefix: RAGLOOP_<FIELD> (the docs' "Environment variable names"); extra="forbid": a
    # misspelt keyword is an error, not a silent default.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True,
                                      frozen=True, extra="forbid", validate_default=False)

    kb: str = _doc('kb', "knowledge base folder, or a `postgresql://` URL (see"
                   " [Postgres](docs/postgres.md))", flag="--kb")
    model: str = _doc(
        'offline',
        "`anthropic:<model>`, `openai:<model>`, `ollama:<model>`, `llamacpp:<model>`,"
        " `offline`", flag="--model",
        shown=f"`offline`, or `{DEFAULT_ANTHROPIC_MODEL}` / `{DEFAULT_OPENAI_MODEL}` when"
              " `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` is set")
    grader_model: str | None = _doc(None, "a cheaper model for grading; `offline` grades locally",
                                    shown="the main model", flag="--grader-model")
    base_url: str | None = _doc(
        None,
        "OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio); `OPENAI_BASE_URL` too;"
        " `ANTHROPIC_BASE_URL` (read by the SDK) for an Anthropic gateway", flag="--base-url")
    # None means "whatever the knowledge base records" (LOCAL_EMBEDDER for a new one).
    embedder: str | None = _doc(
        None,
        "the embedding model: `local:<model>` (packaged) or `openai:<embedding model>`",
        flag="--embedder",
        shown=f"what the KB records (for a new one `{LOCAL_EMBEDDER}` in English,"
              f" `{MULTILINGUAL_EMBEDDER}` in any other language)")
    embed_base_url: str | None = _doc(None, "OpenAI-compatible embeddings endpoint")
    embed_batch_size: int = _doc(32, "texts per embedding call", ge=1)
    # read by the embedders through `env_setting` (they are made below any settings object)
    embed_precision: EmbedPrecision = _doc(
        'auto',
        "the torch path (ingest): `auto` (bf16 where the CPU has it and a probe matches fp32 at"
        " cos ≥ 0.999), `fp32`, `bf16`")
    embed_threads: int | None = _doc(None, "threads of the local embedder",
                                     shown="the CPUs available", ge=1)
    # the KB's language (retrieval/languages.py); None: recorded in the KB, else detected
    language: str | None = _doc(
        None,
        "the knowledge base's language: `en`, `it`, `fr`, `de`, `es`, `pt`, `zh`, `ja`, `he`,"
        " … or `mixed`",
        flag="--language",
        shown="what the KB records; for a new one, detected from its first documents")
    chunk_tokens: int = _doc(200, "chunk size (tokens of the embedding model)", ge=1)
    chunk_overlap: int = _doc(40, "tokens two neighbouring chunks share", ge=0)
    max_steps: int = _doc(6, "step ceiling of a run", flag="--max-steps", ge=MIN_STEPS)
    search_k: int = _doc(8, "chunks per search", ge=1)
    single_k: int = _doc(5, "documents single-shot RAG answers from (`ragloop eval` uses its `-k`)",
                         ge=1)
    tool_result_chars: int = _doc(6000, "character budget of one tool result", ge=1)
    # A thinking model on a long prompt can take minutes; the SDKs' own default is 10.
    request_timeout_s: float = _doc(300.0, "seconds per model call", gt=0)
    max_retries: int = _doc(3, "retries per model call; the SDKs retry 408/409/429/5xx themselves",
                            ge=0)
    # Output budgets; thinking tokens count against them on current models.
    loop_max_tokens: int = _doc(8192, "output budget of a loop step or an answer (thinking counts"
                                " against it)", ge=1)
    decision_max_tokens: int = _doc(
        2048, "output budget of a planner, grader or rewriter call", ge=1)
    citation_check: CitationCheckMode = _doc(
        'auto',
        "who checks that a cited passage supports its sentence: `auto` (the model, in one"
        " batched call, when one is configured; else offline), `offline`, `off`")
    # None: the answerer's own default (offline/answerer.py MIN_SUPPORT). The curve it trades is
    # in docs/evaluation.md.
    strictness: float | None = _doc(
        None,
        "offline answers: how much of a part's words (or meaning) a sentence must share before"
        " it is stated; higher declines more, see [Strictness](docs/evaluation.md#strictness)",
        shown="0.34", flag="--strict", ge=0.0, le=1.0)
    clarify: ClarifyMode = _doc(
        'auto',
        "ask the user back when a question has several readings the KB answers differently"
        " (status `needs_input`; issue 30): `auto` (the offline rule, or the model's `ask_user`"
        " tool) or `off`")
    # Which implementation of a decision runs, by its registered name (agent/decisions.py);
    # None: the model's when a chat model is configured for it, else the offline one.
    router: str | None = _doc(None, "the router's implementation", shown="`offline`",
                              decision="router")
    planner: str | None = _doc(None, "the planner's implementation", decision="planner",
                               shown="`model` when a model is configured, else `offline`")
    grader: str | None = _doc(None, "the grader's implementation (see [how to add one]"
                              "(docs/layout.md#how-to-add-a-grader))", decision="grader",
                              shown="`model` when a grader model is configured, else `offline`")
    rewriter: str | None = _doc(None, "the rewriter's implementation", decision="rewriter",
                                shown="`model` when a model is configured, else `offline`")
    condenser: str | None = _doc(None, "the follow-up condenser's implementation",
                                 decision="condenser",
                                 shown="`model` when a model is configured, else `offline`")
    answerer: str | None = _doc(None, "the answerer's implementation", decision="answerer",
                                shown="`model` when a model is configured, else `offline`")
    hidden_text: HiddenTextMode = _doc(
        'drop',
        "text a reader of the file cannot see (HTML `hidden`/`display:none`/white on white, a"
        " Word hidden run, invisible PDF text) is `drop`ped from the index, or `keep` reads it;"
        " see [Hidden text](docs/search-and-ingest.md#hidden-text)")
    # An emptied folder (an unmounted share) or one moved away mid-sync looks like mass
    # deletion (issue 39).
    sync_max_remove_count: int = _doc(
        5,
        "a sync that would remove more than this many of a folder's documents and more than"
        " the share below removes nothing unless `--allow-mass-delete` ([Folders kept in"
        " sync](docs/search-and-ingest.md#folders-kept-in-sync))", ge=0)
    sync_max_remove_share: float = _doc(0.5, "the share of a folder's documents, see above",
                                        ge=0.0, le=1.0)
    # A 5 MB query kept the MCP server busy 58 s (issue 39).
    max_query_chars: int = _doc(
        4000,
        "longest query or question an MCP client may send (HTTP's `/ask`, `/search` and `/v1`"
        " have the same bound)", ge=1)
    # A paid model is not called for no one.
    stop_on_disconnect: OnOff = _doc(
        'on',
        "a `/v1` streamed run stops when its client disconnects (status `failed`, error"
        " `cancelled: …`); `off` lets it finish. `POST /runs` runs always outlive their client")
    # What reading one file, or one download, may cost (ingest/limits.py); past a limit the
    # file is refused with an error that names the setting, and the ingest goes on.
    read_max_bytes: int = _doc(
        100_000_000,
        "a file read whole, or one download ([read limits](docs/search-and-ingest.md"
        "#read-limits-and-addresses))", ge=1)
    read_max_member_bytes: int = _doc(
        25_000_000,
        "an .html or .md file, or one XML part of a docx, pptx, xlsx or epub, inflated", ge=1)
    read_max_inflated_bytes: int = _doc(
        300_000_000, "all parts of one such archive, inflated", ge=1)
    read_max_cells: int = _doc(2_000_000, "cells of one spreadsheet or CSV", ge=1)
    read_max_columns: int = _doc(2000, "columns of one row", ge=1)
    read_max_text_chars: int = _doc(20_000_000, "text of one document", ge=1)
    read_timeout_s: float = _doc(120.0, "wall time to read one file", gt=0)
    download_timeout_s: float = _doc(
        60.0, "wall time of one download, connect to last byte (not per"
                                     " read)", gt=0)
    # read where they are used (the server, the SQLite lock, the Postgres store), below any
    # settings object, through `env_setting`: typed and checked by this model there too
    api_key: SecretStr | None = _doc(
        None,
        "required on every HTTP data path when set (`Authorization: Bearer <key>` or"
        " `X-API-Key`); `ragloop serve` refuses a non-loopback address without one")
    mcp_key: SecretStr | None = _doc(
        None,
        "`ragloop mcp` answers as this key's user (`ragloop keys add`): every tool searches,"
        " lists, fetches and asks only what that user may read, and `ask` continues only that"
        " user's conversations; `--as USER` names a user instead; neither: everything")
    max_upload_mb: float = _doc(20.0, "largest upload the server takes, in MB", gt=0)
    lock_wait: float = _doc(120.0, "seconds a writer waits for another one to finish", ge=0)
    pg_pool_size: int = _doc(4, "connections per Postgres store", ge=1)
    pg_ef_search: int | None = _doc(
        None, "pgvector HNSW `ef_search`", shown="by the KB's size", ge=1)
    pg_fts_budget: int | None = _doc(None, "full-text candidates read per search",
                                     shown="by the KB's size", ge=1)
    pg_ts_config: str | None = _doc(None, "Postgres text search configuration",
                                    shown="the KB's language's")
    pg_prepare: OnOff | Literal["1", "0", "true", "false", "yes", "no"] = _doc(
        '1',
        "prepared statements (off behind a pooler in transaction mode)")
    pg_maintenance_work_mem: str = _doc(
        '512MB', "`maintenance_work_mem` while an HNSW index is built")

    @field_validator("*")
    @classmethod
    def _registered(cls, value: Any, info: Any) -> Any:
        """A decision setting names a registered implementation (the others pass as they are)."""
        field = cls.model_fields[info.field_name]
        return check_decision(field, value) if decision_kind(field) else value

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: Any,
                                   **_others: Any) -> tuple[Any, ...]:
        """Only what the caller passes: `from_env` reads the environment explicitly, so a
        `Settings(...)` in a test or a program never picks up a stray variable."""
        return (init_settings,)

    @classmethod
    def setting_name(cls, field: str) -> str:
        return ENV_PREFIX + field.upper()

    @classmethod
    def from_env(cls) -> Settings:
        """Each field from RAGLOOP_<FIELD> (an empty variable counts as unset); a value that
        does not fit is a ConfigError naming the variable."""
        try:
            values = EnvSettingsSource(cls)()  # reads the model_config's env_prefix
        except Exception as exc:  # a value pydantic-settings itself cannot decode
            raise ConfigError(f"Bad setting in the environment: {exc}") from None
        values["model"] = _default_model()
        return cls(**values)

    def with_(self, **changes: object) -> Settings:
        """A copy with `changes` (None: keep the current value), validated like the rest."""
        given = {k: v for k, v in changes.items() if v is not None}
        if not given:
            return self
        return Settings(**{**self.model_dump(), **given})

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """RAGLOOP_<FIELD> → field, for every setting."""
        return {cls.setting_name(name): name for name in cls.model_fields}


def default(name: str) -> Any:
    """A setting's default value (ingest/limits.py reads its limits' from here)."""
    return Settings.model_fields[name].default


def env_setting(name: str, given: Any = None) -> Any:
    """One setting for a reader below any Settings object (the SQLite lock, the Postgres
    store, the embedders, the server's upload limit): `given` when it is not None, else
    RAGLOOP_<NAME> (unset or empty: the default), typed and checked by the model as anywhere,
    so a bad value is the same ConfigError naming the variable, not a parse of its own."""
    if given is None:
        given = os.environ.get(Settings.setting_name(name)) or None
    if given is None:
        return default(name)
    return getattr(Settings(**{name: given}), name)


class RunOptions(_Validated):
    """What one call of `Engine.ask` chooses beside the settings, checked the same way."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    route: RouteChoice = _doc(
        "auto", "the router decides (auto), one search (single) or the loop (agent)",
        flag="--route")
    driver: DriverChoice | None = _doc(
        None, "tools (the model calls the tools; needs a chat model) or pipeline (plan, search,"
        " grade, rewrite; runs offline)", flag="--driver")


def option_help(model: type[BaseModel], name: str) -> str:
    """A CLI option's help from the model: the field's meaning and its choices."""
    field = model.model_fields[name]
    options = choices(field)
    said = " | ".join(options) + ": " if options else ""
    return said + (field.description or "")


TABLE_START = "<!-- settings table: `ragloop settings --markdown` writes it from core/config.py -->"
TABLE_END = "<!-- end of settings table -->"


def _shown_default(field: FieldInfo) -> str:
    shown = (field.json_schema_extra or {}).get("shown")  # type: ignore[union-attr]
    if shown is not None:
        return str(shown) if "`" in str(shown) or " " in str(shown) else f"`{shown}`"
    value = field.default
    if value is None:
        return "—"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def settings_table() -> str:
    """The docs' table of every setting (README, Configuration), made from the model: its
    variable, default, what it accepts and what it means."""
    rows = ["| variable | default | accepts | meaning |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        flag = (field.json_schema_extra or {}).get("flag")  # type: ignore[union-attr]
        also = f" (also `{flag}`)" if flag else ""
        rows.append(f"| `{Settings.setting_name(name)}` | {_shown_default(field)} |"
                    f" {allowed(field, registered=False)} | {field.description}{also} |")
    return "\n".join(rows) + "\n"
