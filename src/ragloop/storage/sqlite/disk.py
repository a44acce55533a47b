"""A full disk under a knowledge-base folder, recognised in each way it surfaces.

SQLite says "database or disk is full" (SQLITE_FULL), tantivy raises ValueError with Rust's
"No space left on device (os error 28)", Python's own writes raise OSError ENOSPC, and hnswlib
says nothing at all (its saveIndex writes through an unchecked std::ofstream, so a full disk
leaves a short file: VectorIndex.save checks the size it wrote).
"""

from __future__ import annotations

import errno
import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragloop.core.errors import DiskFullError

# ENOSPC as tantivy's errors print it: Rust's io::Error Display ("No space left on device
# (os error 28)") or its Debug form ("kind: StorageFull")
_RUST_NO_SPACE = re.compile(r"\(os error 28\)|\bStorageFull\b")
_TANTIVY_WORKER_DIED = "index writer was killed"


def is_disk_full(exc: BaseException, *folders: Path) -> bool:
    """Whether `exc` comes of a full disk. `folders` are where the writes went: an error that
    gives no reason (SQLite's "disk I/O error" when it cannot size its shared-memory file,
    tantivy's "index writer was killed" after a worker thread's io::Error) counts when one of
    them has under 1 MB free."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, sqlite3.Error):
        return exc.sqlite_errorcode == sqlite3.SQLITE_FULL or (
            exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_IOERR and _low_space(folders))
    if isinstance(exc, ValueError):
        return _RUST_NO_SPACE.search(str(exc)) is not None or (
            _TANTIVY_WORKER_DIED in str(exc) and _low_space(folders))
    return False


def _low_space(folders: tuple[Path, ...]) -> bool:
    for folder in folders:
        try:
            if shutil.disk_usage(folder).free < 1 << 20:
                return True
        except OSError:
            continue
    return False


def disk_full_error(folder: Path) -> DiskFullError:
    return DiskFullError(
        f"No space left on the disk of {folder}; nothing in the knowledge base was lost (a"
        " write under way was rolled back). Free some space on that disk (or ingest into a"
        " --kb on another disk) and run the ingest again: what was written is kept, and"
        " unchanged files are skipped.")


@contextmanager
def disk_full_as_user_error(folder: Path, *more: Path) -> Iterator[None]:
    """A full disk inside the block (writing to `folder` or `more`) becomes one DiskFullError
    naming `folder` and the fix."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as exc:
        if is_disk_full(exc, folder, *more):
            raise disk_full_error(folder) from None
        raise
