"""One writer at a time per knowledge-base folder, across processes (an flock on a file).

tantivy allows one IndexWriter per index and the HNSW file is rewritten whole on save, so a
second ingest into the same folder must wait until the first has saved its indexes; it waits
a bounded time, then says another ingest is running instead of dying on tantivy's LockBusy.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ragloop.core.config import env_setting
from ragloop.core.errors import UserError

try:
    import fcntl
except ImportError:  # Windows: no flock; one writer at a time is then the user's care
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "write.lock"


def lock_wait_s() -> float:
    """Seconds a writer waits for another one to finish (RAGLOOP_LOCK_WAIT, core/config.py)."""
    wait: float = env_setting("lock_wait")
    return wait


class WriteLock:
    """Re-entrant within one store object: acquire() says whether this call took it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if free (True), else False at once; True too when already held."""
        if self._fd is not None or fcntl is None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def acquire(self, wait_s: float | None = None) -> bool:
        """Wait (bounded) for the lock; True when this call took it, False if already held."""
        if self._fd is not None:
            return False
        wait_s = lock_wait_s() if wait_s is None else wait_s
        deadline = time.monotonic() + wait_s
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise UserError(
                    f"Another ingest into {self.folder} is running (it holds {self.path}):"
                    f" waited {wait_s:.0f} s. Run this again when it has finished"
                    " (RAGLOOP_LOCK_WAIT sets how many seconds to wait)."
                )
            time.sleep(0.1)
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
