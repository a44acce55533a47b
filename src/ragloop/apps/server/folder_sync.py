"""The server's scheduled sync: every `every` seconds, each folder is synced into the served
knowledge base by the rule of `ragloop ingest FOLDER --sync` (new files added, changed ones
updated, documents of files gone removed; nothing from other folders or uploads), under the
lock uploads and DELETE take, so writes never interleave. A failed pass is logged and the
next one tries again."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from ragloop.kb import KnowledgeBase

log = logging.getLogger("ragloop.server")


class FolderSync:
    def __init__(self, kb: KnowledgeBase, lock: threading.Lock, folders: list[str],
                 every: float) -> None:
        self.kb, self.lock, self.folders, self.every = kb, lock, folders, every
        self.passes = 0  # completed passes (every folder tried once)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ragloop-sync", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def sync_once(self) -> None:
        for folder in self.folders:
            try:
                with self.lock:
                    report = self.kb.sync(Path(folder))
            except Exception as exc:  # a folder gone or unreadable: the next pass retries
                log.warning("sync of %s failed: %s", folder, exc)
                continue
            for doc_id, change in report.changes:
                log.info("sync %s: %s %s", folder, change, doc_id)
        self.passes += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sync_once()
            self._stop.wait(self.every)
