"""Which implementation of each decision a run uses: one registry, by kind and name.

Every decision kind (router, planner, grader, rewriter, condenser, clarifier, answerer, citation
check) maps a name to a factory that builds it from what a run has (`Build`: the knowledge
base, its words and reading, the settings, the chat models). `choose` says which name a run's
settings pick: the kind's setting (`RAGLOOP_ROUTER`, `RAGLOOP_PLANNER`, `RAGLOOP_GRADER`,
`RAGLOOP_REWRITER`, `RAGLOOP_CONDENSER`, `RAGLOOP_ANSWERER`: any registered name;
`RAGLOOP_CLARIFY`, `RAGLOOP_CITATION_CHECK`: their own choices), else "model" when a chat model
is configured for it and "offline" when not. Adding an implementation is one new file, whose
builder carries `@decision(KIND, NAME)` (core/registry.py), and the one line importing it:
`offline/factory.py` imports the offline decisions' files, the block below the agent's (and
registers the model ones); its name is then a value of the kind's setting (checked where
settings are made, core/config.py `DECISION_NAMES`); the engine only asks `make(kind, build)`.
"""

from __future__ import annotations

from typing import Any

from ragloop.agent.citation_judge import LLMSupportJudge
from ragloop.agent.citations import CitationCheck
from ragloop.agent.llm_condense import LLMCondenser
from ragloop.agent.llm_decisions import LLMAnswerer, LLMGrader, LLMPlanner, LLMRewriter
from ragloop.core.config import DECISION_NAMES, Settings, decision_kind
from ragloop.core.errors import ConfigError
from ragloop.core.registry import FACTORIES as _REGISTRY
from ragloop.core.registry import Factory, Kind, names, register
from ragloop.llm.base import ChatModel
from ragloop.offline import factory as offline
from ragloop.offline.factory import Build

# (a decision of agent/ in a file of its own is registered by its `@decision` and loaded by
# one import line here, as offline/factory.py loads the offline ones)

__all__ = ["DECISION_NAMES", "OFF", "Build", "Factory", "Kind", "choose", "make", "names",
           "register"]

# the name of a kind switched off for the run (`make` returns None)
OFF = "off"


def _has_setting(kind: Kind) -> bool:
    """Whether `kind` has a setting naming its implementation (`Settings.grader`, …)."""
    field = Settings.model_fields.get(kind)
    return field is not None and decision_kind(field) == kind


def choose(kind: Kind, build: Build) -> str:
    """The name the run's settings pick for `kind`."""
    s = build.settings
    own = getattr(s, kind) if _has_setting(kind) else None
    if own is not None:
        return own
    if kind == "citation_check":
        if s.citation_check == "auto":
            return "model" if build.grader_chat is not None else "offline"
        return s.citation_check
    if kind == "clarifier":
        return OFF if s.clarify == OFF else "offline"
    if kind == "grader":
        return "model" if build.grader_chat is not None else "offline"
    if kind == "router":
        return "offline"
    return "model" if build.chat is not None else "offline"


def make(kind: Kind, build: Build, name: str | None = None) -> Any:
    """The `kind` decision named `name` (default: the settings' choice); None when "off"."""
    chosen = name is None
    name = name or choose(kind, build)
    if name == OFF:
        return None
    try:
        factory = _REGISTRY[kind][name]
    except KeyError:
        if chosen and _has_setting(kind):  # the settings were made before register
            raise ConfigError(f"Bad setting {Settings.setting_name(kind)}={name!r}: must be"
                              f" one of {', '.join(names(kind))}") from None
        raise ConfigError(f"No {kind} named {name!r}; there are: {', '.join(names(kind))}"
                          ) from None
    return factory(build)


def _budget(build: Build) -> int:
    return build.settings.decision_max_tokens


def _model(build: Build) -> ChatModel:
    if build.chat is None:  # RAGLOOP_PLANNER=model (say) with RAGLOOP_MODEL=offline
        raise ConfigError("A model decision needs a chat model: set RAGLOOP_MODEL (--model)")
    return build.chat


def _grader_model(build: Build) -> ChatModel:
    if build.grader_chat is None:
        raise ConfigError("The model grader needs a chat model: set RAGLOOP_MODEL (--model)"
                          " or RAGLOOP_GRADER_MODEL (--grader-model)")
    return build.grader_chat


def _support_check(build: Build, judge: LLMSupportJudge | None) -> CitationCheck:
    return CitationCheck(offline.support_checker(build.kb), judge, words=build.words)


# -- the registrations: kind, name, factory (one line per implementation) ------------------

register("router", "offline", lambda b: offline.router(b.kb, b.words))
register("planner", "offline", lambda b: offline.planner(b.words, b.reading))
register("planner", "model", lambda b: LLMPlanner(_model(b), max_tokens=_budget(b)))
register("grader", "offline", lambda b: offline.grader(b.kb))
register("grader", "model", lambda b: LLMGrader(_grader_model(b), max_tokens=_budget(b)))
register("rewriter", "offline", lambda b: offline.rewriter(b.reading))
register("rewriter", "model", lambda b: LLMRewriter(_model(b), max_tokens=_budget(b)))
# the model's condenser falls back on the offline one (a bad reply never ends a run)
register("condenser", "offline", lambda b: offline.condenser(b.kb))
register("condenser", "model", lambda b: LLMCondenser(
    _model(b), offline.condenser(b.kb), max_tokens=_budget(b)))
register("clarifier", "offline", lambda b: offline.clarifier(b.kb, b.words))
register("answerer", "offline", lambda b: offline.answerer(b.kb, b.settings.strictness))
register("answerer", "model", lambda b: LLMAnswerer(
    _model(b), words=b.words, max_tokens=b.settings.loop_max_tokens))
register("citation_check", "offline", lambda b: _support_check(b, None))
register("citation_check", "model", lambda b: _support_check(
    b, LLMSupportJudge(_grader_model(b), max_tokens=_budget(b))))
