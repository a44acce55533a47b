"""The server's scheduled sync: every `every` seconds, each folder is synced into its knowledge
base by the rule of `ragloop ingest FOLDER --sync` (new files added, changed ones updated,
documents of files gone removed; nothing from other folders or uploads), under the lock
uploads and DELETE take, so writes never interleave. A failed pass is logged and the next one
tries again; a pass that finds its folder gone, unreadable or mostly emptied removes nothing
and logs why (KnowledgeBase.sync), unless the server was started with --allow-mass-delete.

With several knowledge bases served, each `--sync` names its KB: `NAME=FOLDER`, NAME as the
catalog names it (a catalog of one takes a plain FOLDER too); one KB served alone takes plain
folders, as it always did."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragloop.core.errors import ConfigError
from ragloop.kb import KnowledgeBase
from ragloop.kb.multi import KnowledgeBases, write_target

log = logging.getLogger("ragloop.server")

HOW = "--sync NAME=FOLDER"


@dataclass(frozen=True)
class SyncTarget:
    folder: str
    kb: str = ""  # the catalog's name of the KB it syncs into; "": the one served


def sync_targets(values: Sequence[str], names: Sequence[str] | None) -> list[SyncTarget]:
    """The `--sync` values as targets; `names`: the catalog's names (None: one KB served
    alone, whose values are folders as they are). A value naming no KB when several are
    served, or naming one that is not served, is a ConfigError listing the names."""
    if names is None:
        return [SyncTarget(v) for v in values]
    out = []
    for value in values:
        name, sep, folder = value.partition("=")
        if sep and name in names:
            if not folder.strip():
                raise ConfigError(f"--sync {value!r}: no folder after {name}=")
            out.append(SyncTarget(folder.strip(), name))
        elif len(names) == 1 and (not sep or Path(value).exists()):
            out.append(SyncTarget(value, names[0]))
        else:
            said = f"{name!r} is not a knowledge base served" if sep else "no NAME="
            raise ConfigError(f"--sync {value!r}: {said}; with several knowledge bases each"
                              f" --sync is NAME=FOLDER, NAME one of: {', '.join(names)}")
    return out


class FolderSync:
    def __init__(self, kb: KnowledgeBase | KnowledgeBases, lock: threading.Lock,
                 targets: Sequence[SyncTarget], every: float,
                 allow_mass_delete: bool = False) -> None:
        self.targets = [(t, write_target(kb, t.kb or None, HOW)) for t in targets]
        self.lock, self.every = lock, every
        self.allow_mass_delete = allow_mass_delete
        self.held: dict[str, str] = {}  # folder -> why its last pass removed nothing
        self.passes = 0  # completed passes (every folder tried once)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ragloop-sync", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def sync_once(self) -> None:
        for target, kb in self.targets:
            where = f"{target.kb}={target.folder}" if target.kb else target.folder
            try:
                with self.lock:
                    report = kb.sync(Path(target.folder),
                                     allow_mass_delete=self.allow_mass_delete)
            except Exception as exc:  # the next pass retries
                log.warning("sync of %s failed: %s", where, exc)
                continue
            for doc_id, change in report.changes:
                log.info("sync %s: %s %s", where, change, doc_id)
            if report.held:  # a share not mounted: said each pass until it is back
                log.warning("sync of %s: %s", where, report.held)
                self.held[where] = report.held
            else:
                self.held.pop(where, None)
        self.passes += 1

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sync_once()
            self._stop.wait(self.every)
