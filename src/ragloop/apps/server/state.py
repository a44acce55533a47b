"""What the server's routes share: the served knowledge bases, the run store, the engine and
the job runner. Its own module so that the route modules (app, openai_compat) both read it
without importing each other."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ragloop.agent.engine import Engine
from ragloop.apps.jobs import JobRunner
from ragloop.apps.server.folder_sync import FolderSync
from ragloop.core.config import Settings
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases
from ragloop.storage.protocols import RunStore


@dataclass
class ServerState:
    kb: KnowledgeBase | KnowledgeBases  # several: a catalog served as one (kb/multi.py)
    runs: RunStore
    engine: Engine
    jobs: JobRunner
    settings: Settings
    upload_limit: int
    ingest_lock: threading.Lock
    owns_kb: bool
    sync: FolderSync | None = None  # the scheduled sync of folders, if any
