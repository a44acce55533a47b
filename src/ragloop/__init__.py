"""ragloop: an agentic RAG engine.

    from ragloop import KnowledgeBase, Engine
    kb = KnowledgeBase.open("kb")
    kb.ingest("docs")
    result = Engine(kb).ask("…")

The names below are imported on first use (PEP 562 module `__getattr__`): `import ragloop`
and the command line stay fast, because the engine pulls in the model SDKs and the embedder
pulls in torch only when a program asks for them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and editors; at run time see __getattr__
    from ragloop.agent.engine import Engine
    from ragloop.agent.run import RunResult
    from ragloop.core.config import Settings
    from ragloop.core.errors import ConfigError, NotFoundError, RagloopError, RunFailed, UserError
    from ragloop.core.events import Event
    from ragloop.core.types import (
        Citation,
        DocumentInfo,
        Hit,
        RunStatus,
        SectionInfo,
        Usage,
    )
    from ragloop.ingest.pipeline import IngestReport
    from ragloop.kb import KnowledgeBase

# public name → the module that defines it
_WHERE = {
    "KnowledgeBase": "ragloop.kb",
    "Engine": "ragloop.agent.engine",
    "RunResult": "ragloop.agent.run",
    "Settings": "ragloop.core.config",
    "Citation": "ragloop.core.types",
    "DocumentInfo": "ragloop.core.types",
    "Hit": "ragloop.core.types",
    "RunStatus": "ragloop.core.types",
    "SectionInfo": "ragloop.core.types",
    "Usage": "ragloop.core.types",
    "Event": "ragloop.core.events",
    "IngestReport": "ragloop.ingest.pipeline",
    "RagloopError": "ragloop.core.errors",
    "UserError": "ragloop.core.errors",
    "ConfigError": "ragloop.core.errors",
    "NotFoundError": "ragloop.core.errors",
    "RunFailed": "ragloop.core.errors",
}

__all__ = [
    "Citation",
    "ConfigError",
    "DocumentInfo",
    "Engine",
    "Event",
    "Hit",
    "IngestReport",
    "KnowledgeBase",
    "NotFoundError",
    "RagloopError",
    "RunFailed",
    "RunResult",
    "RunStatus",
    "SectionInfo",
    "Settings",
    "Usage",
    "UserError",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'ragloop' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # the next lookup is a plain module attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
