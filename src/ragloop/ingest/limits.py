"""What reading one file may cost: bytes held, bytes inflated from an archive, cells and
columns of a table, text produced, wall time (the RAGLOOP_READ_* settings).

`read_file` opens a Budget for each file (`reading`); readers spend from it while they read
(`spend_text`, `bounded_rows`, `check_time`, `check_archive`), so a hostile file is stopped
where it grows, not after it has been read whole. Past a limit a reader raises
ReadLimitError, a ReaderError that names the setting to raise: the file is refused (nothing
of it indexed) and the ingest goes on with the other files.

The budget is found through a context variable rather than passed through every Reader, so
the Reader protocol stays `read(path, doc_id)`. A reader called on its own, outside
read_file, gets a fresh default budget at each check: the per-piece limits hold, the running
totals (text, time) only within one call.
"""

from __future__ import annotations

import time
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ragloop.core.config import Settings, default
from ragloop.core.errors import ReaderError

_ROW = TypeVar("_ROW", bound=Sequence[object])
# members an office file or e-book's library parses into a tree (media are only held)
_PARSED = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".vml")
_CHUNK = 1 << 20
_TIME_EVERY = 256  # rows between clock reads


@dataclass(frozen=True)
class ReadLimits:
    max_bytes: int = default("read_max_bytes")
    max_member_bytes: int = default("read_max_member_bytes")
    max_inflated_bytes: int = default("read_max_inflated_bytes")
    max_cells: int = default("read_max_cells")
    max_columns: int = default("read_max_columns")
    max_text_chars: int = default("read_max_text_chars")
    timeout_s: float = default("read_timeout_s")
    download_timeout_s: float = default("download_timeout_s")

    @classmethod
    def from_settings(cls, settings: Settings) -> ReadLimits:
        return cls(settings.read_max_bytes, settings.read_max_member_bytes,
                   settings.read_max_inflated_bytes, settings.read_max_cells,
                   settings.read_max_columns, settings.read_max_text_chars,
                   settings.read_timeout_s, settings.download_timeout_s)


class ReadLimitError(ReaderError):
    """A file (or download) went past one of the read limits; `setting` is the one to raise."""

    def __init__(self, what: str, setting: str, limit: float) -> None:
        self.setting = setting
        shown = f"{limit:g} s" if setting.endswith("_s") else f"{limit:,}"
        super().__init__(f"over a read limit: {what} (limit {shown},"
                         f" RAGLOOP_{setting.upper()})")


class Budget:
    """One file's spending against its limits."""

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.timeout_s
        self.text = self.cells = self.rows = 0

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise ReadLimitError("reading took too long", "read_timeout_s",
                                 self.limits.timeout_s)

    def spend_text(self, chars: int) -> None:
        self.text += chars
        if self.text > self.limits.max_text_chars:
            raise ReadLimitError("the document's text is too long", "read_max_text_chars",
                                 self.limits.max_text_chars)
        self.check_time()

    def spend_row(self, width: int) -> None:
        if width > self.limits.max_columns:
            raise ReadLimitError(f"a row of {width:,} columns", "read_max_columns",
                                 self.limits.max_columns)
        self.cells += max(width, 1)  # an empty row costs a step too
        if self.cells > self.limits.max_cells:
            raise ReadLimitError("too many cells", "read_max_cells", self.limits.max_cells)
        self.rows += 1
        if self.rows % _TIME_EVERY == 0:
            self.check_time()


_CURRENT: ContextVar[Budget | None] = ContextVar("ragloop_read_budget", default=None)


def current() -> Budget:
    """The open budget of the file being read, else a fresh one with the default limits."""
    return _CURRENT.get() or Budget(ReadLimits())


@contextmanager
def reading(limits: ReadLimits | None = None) -> Iterator[Budget]:
    budget = Budget(limits or ReadLimits())
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def check_time() -> None:
    current().check_time()


def spend_text(chars: int) -> None:
    current().spend_text(chars)


def bounded_rows(rows: Iterable[_ROW]) -> Iterator[_ROW]:
    """`rows` as they come, each counted against the columns, cells and time limits."""
    budget = current()
    for row in rows:
        budget.spend_row(len(row))
        yield row


def check_size(path: Path, limit: int | None = None, setting: str = "read_max_bytes") -> None:
    """Refuse a file larger than what may be read into memory whole (or `limit`)."""
    limit = current().limits.max_bytes if limit is None else limit
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # the read that follows names the reason
    if size > limit:
        raise ReadLimitError(f"a file of {size:,} bytes", setting, limit)


def _parsed(info: zipfile.ZipInfo) -> bool:
    return info.filename.lower().endswith(_PARSED)


def read_member(book: zipfile.ZipFile, name: str | zipfile.ZipInfo) -> bytes:
    """One member, inflated in pieces and counted as it comes: past the member limit it
    stops there, whatever its header claims."""
    budget = current()
    limit = budget.limits.max_member_bytes
    label = name.filename if isinstance(name, zipfile.ZipInfo) else name
    out = bytearray()
    with book.open(name) as member:
        while piece := member.read(_CHUNK):
            out += piece
            if len(out) > limit:
                raise ReadLimitError(f"{label} inflates past the limit", "read_max_member_bytes",
                                     limit)
            budget.check_time()
    return bytes(out)


def check_archive(book: zipfile.ZipFile | Path, inflate: bool = True) -> None:
    """Refuse an office file or e-book whose members would inflate past the limits, before a
    library parses it. The central directory's sizes first (zipfile never inflates more than
    a member declares: it stops there and fails the CRC, CPython zipfile.ZipExtFile._read1);
    then each member a library parses into a tree is inflated and counted (read_member), so a
    lying header or a broken member is found here too (`inflate=False`: the caller reads
    them through read_member itself)."""
    if not isinstance(book, zipfile.ZipFile):
        with zipfile.ZipFile(book) as opened:
            return check_archive(opened, inflate)
    limits = current().limits
    infos = book.infolist()
    total = sum(i.file_size for i in infos)
    if total > limits.max_inflated_bytes:
        raise ReadLimitError(f"the archive inflates to {total:,} bytes",
                             "read_max_inflated_bytes", limits.max_inflated_bytes)
    for info in infos:
        if _parsed(info) and info.file_size > limits.max_member_bytes:
            raise ReadLimitError(f"{info.filename} inflates to {info.file_size:,} bytes",
                                 "read_max_member_bytes", limits.max_member_bytes)
    for info in infos:
        if inflate and _parsed(info):
            read_member(book, info)
    return None
