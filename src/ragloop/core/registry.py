"""The decision registry's table: each decision kind's implementations, by name.

It sits in core/ so that a decision in any layer registers itself where it is written: a file
under `offline/` or `agent/` puts `@decision("grader", "NAME")` on the function that builds it
(from a run's `offline.build.Build`), and the one import that loads the file is its
registration (`offline/factory.py` imports the offline ones, `agent/decisions.py` the agent's).
`agent/decisions.py` chooses among them for a run and builds the chosen one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from ragloop.core.config import DECISION_NAMES

Kind = Literal["router", "planner", "grader", "rewriter", "condenser", "clarifier", "answerer",
               "citation_check"]
KINDS: tuple[str, ...] = Kind.__args__  # type: ignore[attr-defined]

Factory = Callable[[Any], Any]  # Build -> the decision (typed where each is written)
FACTORIES: dict[str, dict[str, Factory]] = {}

F = TypeVar("F", bound=Factory)


def register(kind: Kind, name: str, factory: Factory) -> None:
    """`factory` builds the `kind` decision named `name`; a name registered twice for one kind
    is an error (two files claiming one setting value), not a silent replacement."""
    if kind not in KINDS:
        raise ValueError(f"no decision kind {kind!r}; there are: {', '.join(KINDS)}")
    own = FACTORIES.setdefault(kind, {})
    if name in own and own[name] is not factory:
        raise ValueError(f"two {kind.replace('_', ' ')}s registered as {name!r}")
    own[name] = factory
    known = DECISION_NAMES.setdefault(kind, [])  # what the kind's setting accepts
    if name not in known:
        known.append(name)


def decision(kind: Kind, name: str) -> Callable[[F], F]:
    """Decorator: register the decorated builder as the `kind` decision named `name`."""
    def add(factory: F) -> F:
        register(kind, name, factory)
        return factory
    return add


def names(kind: Kind) -> tuple[str, ...]:
    return tuple(FACTORIES.get(kind, {}))
