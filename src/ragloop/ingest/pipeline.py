"""Ingest: walk paths, parse, chunk, embed (cached) and write, idempotent by content hash."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragloop.core.config import Settings
from ragloop.core.errors import DiskFullError, ReaderError, UserError
from ragloop.core.types import Chunk, DocumentInfo, ParsedDocument
from ragloop.core.unicode import clean_text, is_text
from ragloop.embed.cache import CachedEmbedder, text_hash
from ragloop.ingest.access import FolderAccess, signature, with_access
from ragloop.ingest.chunking import chunk_document
from ragloop.ingest.fetch import Reach
from ragloop.ingest.limits import ReadLimits
from ragloop.ingest.metadata import with_tags
from ragloop.ingest.readers import SUPPORTED_SUFFIXES, read_file
from ragloop.ingest.readers.visibility import hidden_text
from ragloop.ingest.readers.web import is_sitemap, is_url, read_url, sitemap_urls
from ragloop.retrieval.index_text import index_text
from ragloop.storage.protocols import DocumentWrite, Store

# Chunks embedded and written together: large enough to fill embedding batches, small
# enough that an interrupted ingest loses little.
WRITE_BATCH_CHUNKS = 512
# The first batch is this small and each next one twice the last, up to WRITE_BATCH_CHUNKS:
# on a slow or loaded machine embedding 512 chunks takes minutes, and an ingest killed before
# its first write would keep nothing, run after run.
FIRST_BATCH_CHUNKS = 16
# admit(doc, content_hash) -> None to go on, or the reason the document is skipped
Admit = Callable[[ParsedDocument, str], str | None]
# Store meta key of each file's (size, mtime, inode) when last read, with the documents it
# gave: a file whose stat and reading settings are unchanged is not read or hashed again.
FILE_STATS_KEY = "file_stats"
# A file modified this close to the moment it was read may change again within the same
# mtime tick without its stat changing ("racily clean", as git calls it): not recorded, so
# the next ingest reads and hashes it.
RACY_S = 2.0


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during an ingest, with the report of what was written before it."""

    def __init__(self, report: IngestReport) -> None:
        super().__init__()
        self.report = report

    def message(self) -> str:
        written = self.report.added + self.report.updated
        return (f"interrupted: {written} documents written, run again to finish (unchanged"
                " files are skipped)")


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    chunks: int = 0  # chunks written by this run
    embedded: int = 0  # texts sent to the embedder (cache misses)
    unsupported: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    # (doc_id, reason): documents the caller's `admit` refused (an upload may not replace them)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    # (doc_id, "added" | "updated" | "removed"), in the order they happened
    changes: list[tuple[str, str]] = field(default_factory=list)
    # a sync (`ingest --sync`): the doc_ids of documents whose files are gone, removed
    removed: list[str] | None = None
    # every doc_id this run read (unchanged ones too): what a sync keeps
    read: set[str] = field(default_factory=set, repr=False)
    # a sync that removed nothing although documents looked gone: why (the folder is gone or
    # unreadable, or too many would go), and the doc_ids it kept (`--allow-mass-delete`)
    held: str | None = None
    held_back: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged,
                "chunks": self.chunks, "embedded": self.embedded,
                "unsupported": self.unsupported,
                "failed": [{"path": p, "reason": r} for p, r in self.failed],
                "conflicts": [{"doc_id": d, "reason": r} for d, r in self.conflicts],
                "seconds": round(self.seconds, 3),
                **({} if self.removed is None else {
                    "removed": self.removed,
                    "changes": [{"doc_id": d, "change": c} for d, c in self.changes]}),
                **({} if self.held is None else {"held": self.held,
                                                 "held_back": self.held_back})}

    def skipped(self) -> list[tuple[str, str]]:
        """(path, reason) of every file this ingest left out: failed, then unsupported."""
        return [*self.failed, *((p, f"unsupported file type {Path(p).suffix or '(none)'}")
                                for p in self.unsupported)]

    def summary(self) -> str:
        removed = "" if self.removed is None else f", removed {len(self.removed)}"
        text = (f"added {self.added}, updated {self.updated}, unchanged {self.unchanged}"
                f"{removed} documents; {self.chunks} chunks written ({self.embedded} embedded)"
                f" in {self.seconds:.1f} s")
        if self.failed:
            text += f"; {len(self.failed)} file(s) failed"
        if self.unsupported:
            text += f"; {len(self.unsupported)} unsupported file(s) skipped"
        if self.conflicts:
            text += f"; {len(self.conflicts)} existing document(s) not replaced"
        if self.held:
            text += f"; {self.held}"
        return text


def iter_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, str, str | None]]:
    """(file, doc_id, reason to skip it or None) for every file under `paths`; doc_id is the
    path relative to the root given (a folder) or the file name (a file), with forward
    slashes. Skipped: names that are not valid UTF-8 (a doc_id must be text), and symlinks
    that lead out of the folder (ingesting a folder must not pull in files from elsewhere;
    a link inside it is read as the file it points to), and what is not a regular file
    (a dangling link, a link loop, a FIFO), each with its reason."""
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise UserError(f"{root}: no such file or folder")
        if not root.is_dir():
            yield root, root.name, _name_problem(root.name) or _not_a_file(root)
            continue
        real_root = root.resolve()
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts) or path.is_dir():
                continue
            doc_id = rel.as_posix()
            reason = _name_problem(doc_id) or _not_a_file(path)
            if reason is None and not path.resolve().is_relative_to(real_root):
                reason = (f"a symlink to {path.resolve()}, outside {root}: not followed"
                          " (copy the file into the folder to ingest it)")
            yield path, doc_id, reason


def _not_a_file(path: Path) -> str | None:
    """Why `path` (not a folder) cannot be read as a file, or None. Named, not passed over in
    silence: the user asked for the folder and should hear what of it was left out. A FIFO is
    never opened (reading it would wait for a writer forever)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if path.is_symlink():
            target = os.readlink(path)
            if exc.errno == errno.ELOOP:
                return f"a symlink loop (to {target}): nothing to read"
            return f"a dangling symlink (to {target}, which does not exist): nothing to read"
        return f"cannot read it: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISBLK(mode) or stat.S_ISCHR(mode) else "not a regular file")
    return f"{kind}, not a file: not read"


def _name_problem(name: str) -> str | None:
    if is_text(name):
        return None
    return "its name is not valid UTF-8 (rename the file to ingest it)"


def shown(value: str | Path) -> str:
    """A path fit to print and to put in JSON: undecodable bytes become U+FFFD."""
    return clean_text(value)


def _doc_problem(doc: ParsedDocument) -> str | None:
    fields = [doc.doc_id, doc.title, doc.source]
    for s in doc.sections:
        fields += [s.section, s.title, s.text, *s.title_path]
    if all(is_text(f) for f in fields):
        return None
    return f"{doc.doc_id!r}: text that is not valid Unicode (a lone surrogate); skipped"


def unique_chunks(doc: ParsedDocument, chunks: list[Chunk]) -> list[Chunk]:
    """A document's chunks without repeats of the same text under the same titles: a file
    that repeats one paragraph 70,000 times is stored, embedded and indexed once per distinct
    chunk (identical vectors by the thousand also clog the HNSW graph)."""
    seen: set[str] = set()
    out = []
    for c in chunks:
        key = embed_text(doc, c)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def document_hash(doc: ParsedDocument, settings: Settings) -> str:
    """Hash of what ends up in the store: a change of text, sections or chunking re-ingests."""
    h = hashlib.sha256(f"{settings.chunk_tokens}|{settings.chunk_overlap}|{doc.title}".encode())
    if doc.metadata:  # a new tag or date re-writes the document (documents without keep
        # the hash they had before metadata was stored)
        h.update(json.dumps(doc.metadata, sort_keys=True).encode())
    for s in doc.sections:
        h.update(b"\x00" + s.section.encode() + b"\x00" + "\x1f".join(s.title_path).encode())
        h.update(b"\x00" + s.text.encode())
    return h.hexdigest()


def embed_text(doc: ParsedDocument, chunk: Chunk) -> str:
    """What the embedder sees for a chunk: the same titles-then-text that BM25 indexes."""
    path = next((s.title_path for s in doc.sections if s.section == chunk.section), ())
    return index_text(doc.title, path, chunk.text)


class _Writer:
    """The one write path, for files and for documents read elsewhere (an eval corpus): each
    document is checked, chunked and batched; a batch's chunks are embedded (cached) and
    written together."""

    def __init__(self, store: Store, embedder: Callable[[], CachedEmbedder], settings: Settings,
                 admit: Admit | None = None,
                 before_write: Callable[[list[ParsedDocument]], None] | None = None) -> None:
        self.store, self.embedder, self.settings = store, embedder, settings
        self.admit, self.before_write = admit, before_write
        self.report = IngestReport()
        self.known = store.content_hashes()  # doc_id -> content hash before this ingest
        self.seen: set[str] = set()
        self.batch: list[tuple[ParsedDocument, str, list[Chunk], bool]] = []
        self.size = 0  # chunks in the batch
        self.limit = min(FIRST_BATCH_CHUNKS, WRITE_BATCH_CHUNKS)  # chunks that fill this batch
        self.stats: FileStats | None = None  # set by ingest_paths (files, no `admit`)
        self.hashes: dict[str, str] = {}  # doc_id -> content hash of each document read

    def fail(self, where: str | Path, reason: str) -> None:
        self.report.failed.append((shown(where), shown(reason)))

    def add(self, doc: ParsedDocument, where: str | Path) -> None:
        """Queue `doc` (read from `where`) for writing, unless it is unchanged or refused."""
        problem = _doc_problem(doc)
        if problem is not None:
            self.fail(where, problem)
            return
        if doc.doc_id in self.seen:
            self.fail(where, f"duplicate doc_id {doc.doc_id!r} skipped")
            return
        self.seen.add(doc.doc_id)
        self.report.read.add(doc.doc_id)
        content_hash = document_hash(doc, self.settings)
        self.hashes[doc.doc_id] = content_hash
        refused = self.admit(doc, content_hash) if self.admit else None
        if refused:
            self.report.conflicts.append((doc.doc_id, refused))
            return
        if self.known.get(doc.doc_id) == content_hash:
            self.report.unchanged += 1
            return
        chunks = unique_chunks(
            doc, chunk_document(doc, self.settings.chunk_tokens, self.settings.chunk_overlap))
        if not chunks:
            self.fail(where, f"{doc.doc_id}: no text to index")
            return
        self.batch.append((doc, content_hash, chunks, doc.doc_id not in self.known))
        self.size += len(chunks)
        if self.size >= self.limit:
            self.flush()
            self.limit = min(2 * self.limit, WRITE_BATCH_CHUNKS)

    def flush(self) -> None:
        if not self.batch:
            return
        report = self.report
        if self.before_write is not None:
            self.before_write([doc for doc, _, _, _ in self.batch])
        emb = self.embedder()
        misses_before = emb.misses
        texts = [[embed_text(doc, c) for c in chunks] for doc, _, chunks, _ in self.batch]
        vectors = emb.embed([t for doc_texts in texts for t in doc_texts])
        writes, start = [], 0
        for (doc, content_hash, chunks, _), doc_texts in zip(self.batch, texts, strict=True):
            writes.append(DocumentWrite(doc=doc, content_hash=content_hash, chunks=chunks,
                                        vectors=vectors[start:start + len(chunks)],
                                        embed_hashes=[text_hash(t) for t in doc_texts]))
            start += len(chunks)
        self.store.write_documents(writes)
        # counted once written: an interrupted ingest reports what is in the record
        for doc, _, chunks, new in self.batch:
            report.chunks += len(chunks)
            report.added += new
            report.updated += not new
            report.changes.append((doc.doc_id, "added" if new else "updated"))
        report.embedded += emb.misses - misses_before
        self.batch, self.size = [], 0

    def finish(self, started: float) -> IngestReport:
        self.flush()
        self.store.flush()
        if self.stats is not None:
            self.stats.save(self.store, self.known.keys() | self.report.read)
        self.report.seconds = time.perf_counter() - started
        return self.report


@contextmanager
def _interruptible(writer: _Writer) -> Iterator[None]:
    """A Ctrl-C becomes IngestInterrupted, carrying what was written (the batch being written
    is rolled back by the store, so the count is exact)."""
    try:
        yield
    except IngestInterrupted:
        raise
    except KeyboardInterrupt:
        raise IngestInterrupted(writer.report) from None


def _progress(label: str, with_names: bool, progress: bool) -> Progress:
    names = [TextColumn("{task.fields[name]}", markup=False)] if with_names else []
    return Progress(TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), *names,
                    TimeElapsedColumn(), disable=not progress, transient=True)


def ingest_paths(store: Store, embedder: Callable[[], CachedEmbedder], paths: Iterable[str | Path],
                 settings: Settings, progress: bool = False, admit: Admit | None = None,
                 before_write: Callable[[list[ParsedDocument]], None] | None = None,
                 tags: list[str] | None = None, private_urls: bool = False,
                 link_local_urls: bool = False,
                 access: list[str] | None = None) -> IngestReport:
    """Ingest files and web pages (URLs; a sitemap URL: its pages); `embedder` is called only
    when some chunk actually needs a vector. `tags`: added to each document's `tags`
    metadata; `private_urls`: allow URLs on loopback and private addresses;
    `link_local_urls`: allow link-local ones (169.254.169.254, where cloud metadata answers).
    Each file and download is read within the settings' read limits (ingest/limits.py).

    `admit(doc, content_hash)`, when given, sees every parsed document first; a reason it
    returns skips the document into `report.conflicts` (the server's uploads use it).
    `before_write` sees each batch's documents first (the KB settles its language there).
    `access`: who may read what this ingest reads where the source itself says nothing
    (ingest/access.py)."""
    started = time.perf_counter()
    writer = _Writer(store, embedder, settings, admit, before_write)
    report = writer.report
    # an upload's `admit` must see every document, so uploads never skip by stat
    # the --access option is part of what an unchanged file was read with, as tags are
    shaped_by = (tags or []) + ([f"access={','.join(access)}"] if access is not None else [])
    stats = writer.stats = None if admit else FileStats.load(store, settings, shaped_by)
    rules = FolderAccess()
    paths = [str(p) if isinstance(p, str) else p for p in paths]
    limits = ReadLimits.from_settings(settings)
    reach = Reach(private=private_urls, link_local=link_local_urls)
    hidden = settings.hidden_text  # checked when the settings were made (core/config.py)
    for url in [p for p in paths if isinstance(p, str) and is_url(p)]:
        with hidden_text(hidden):
            for doc in _web_documents(writer, url, reach, limits):
                _add(writer, _tagged(doc, tags), doc.source, None, access)
    files = list(iter_files(p for p in paths if not (isinstance(p, str) and is_url(p))))
    with _progress("ingest", True, progress) as bar, _interruptible(writer):
        task = bar.add_task("files", total=len(files), name="")
        for path, doc_id, skip in files:
            bar.update(task, advance=1, name=shown(doc_id)[-50:])
            if skip is not None:
                writer.fail(path, skip)
                continue
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                report.unsupported.append(shown(path))
                continue
            rule = rules.for_file(path)
            before = stats.stat(path) if stats is not None else None
            if before is not None and (rule is not None or access is not None):
                # an edited access file (or option) reads the files it covers again
                before = [*before, signature(rule, access)]
            if stats is not None and stats.unchanged(writer, path, before):
                continue
            try:
                docs = read_file(path, doc_id, limits, hidden)
            except ReaderError as exc:
                writer.fail(path, str(exc))
                continue
            except Exception as exc:  # a reader bug must not lose the rest of the folder
                writer.fail(path, f"unexpected {type(exc).__name__}: {exc}")
                continue
            failed = len(report.failed)
            for doc in docs:
                _add(writer, _tagged(doc, tags), path, rule, access)
            if stats is not None:  # a document that failed: read again next time
                stats.record(path, before if len(report.failed) == failed else None,
                             {d.doc_id: writer.hashes[d.doc_id] for d in docs
                              if d.doc_id in writer.hashes})
        return writer.finish(started)


class FileStats:
    """What each file's stat was when it was last read, and the documents (with their content
    hashes) it gave. A file whose size, mtime and inode, and the settings that shape its
    documents (chunking, tags, the ragloop version and so its readers), are all as recorded,
    and whose documents are all still stored with those hashes, is unchanged without being
    read: a sync of an unchanged folder reads no file (issue 41)."""

    def __init__(self, entries: dict[str, dict[str, object]], key: str) -> None:
        self.entries, self.key = entries, key
        self.changed = False

    @classmethod
    def load(cls, store: Store, settings: Settings, tags: list[str] | None) -> FileStats:
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("ragloop")
        except PackageNotFoundError:
            release = ""
        key = json.dumps([release, settings.chunk_tokens, settings.chunk_overlap,
                          sorted(tags or [])])
        try:
            entries = json.loads(store.get_meta(FILE_STATS_KEY) or "{}")
        except ValueError:  # a damaged record: every file is read again
            entries = {}
        return cls(entries if isinstance(entries, dict) else {}, key)

    @staticmethod
    def stat(path: Path) -> list[int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        if time.time() - st.st_mtime < RACY_S:
            return None  # racily clean: read it, and record nothing
        return [st.st_size, st.st_mtime_ns, st.st_ino]

    def unchanged(self, writer: _Writer, path: Path, stat: list[int] | None) -> bool:
        """True, with its documents counted unchanged, if `path` need not be read."""
        entry = self.entries.get(str(path.resolve()))
        if stat is None or not isinstance(entry, dict) or entry.get("key") != self.key \
                or entry.get("stat") != stat:
            return False
        docs = entry.get("docs")
        if not isinstance(docs, dict) or not docs or any(
                writer.known.get(d) != h or d in writer.seen for d, h in docs.items()):
            return False
        writer.seen.update(docs)
        writer.report.read.update(docs)
        writer.report.unchanged += len(docs)
        return True

    def record(self, path: Path, stat: list[int] | None, docs: dict[str, str]) -> None:
        where = str(path.resolve())
        entry = None if stat is None or not docs else {"stat": stat, "key": self.key,
                                                         "docs": docs}
        if self.entries.get(where) != entry:
            self.changed = True
            if entry is None:
                self.entries.pop(where, None)
            else:
                self.entries[where] = entry

    def save(self, store: Store, stored: Iterable[str]) -> None:
        """Kept: the entries whose documents are all still in the store."""
        have = set(stored)
        kept = {p: e for p, e in self.entries.items()
                if isinstance(e, dict) and isinstance(e.get("docs"), dict)
                and have.issuperset(e["docs"])}
        if self.changed or len(kept) != len(self.entries):  # a read-only KB read unchanged
            # only speed is lost if this cannot be written (a full disk): not the ingest
            with contextlib.suppress(DiskFullError):
                store.set_meta(FILE_STATS_KEY, json.dumps(kept, sort_keys=True))


def _add(writer: _Writer, doc: ParsedDocument, where: str | Path,
         rule: list[str] | str | None, access: list[str] | None) -> None:
    """Queue `doc` with its access list; a bad one fails the document (never opens it)."""
    try:
        doc = with_access(doc, rule, access)
    except UserError as exc:
        writer.fail(where, str(exc))
        return
    writer.add(doc, where)


def _tagged(doc: ParsedDocument, tags: list[str] | None) -> ParsedDocument:
    return replace(doc, metadata=with_tags(doc.metadata, tags)) if tags else doc


def _web_documents(writer: _Writer, url: str, reach: Reach,
                   limits: ReadLimits) -> Iterator[ParsedDocument]:
    """The page at `url`, or each page its sitemap lists; a page that fails is reported
    under its URL and the rest go on."""
    pages = [url]
    if is_sitemap(url):
        try:
            pages = sitemap_urls(url, reach, limits)
        except ReaderError as exc:
            writer.fail(url, str(exc))
            return
        except Exception as exc:  # trafilatura's download errors
            writer.fail(url, f"unreadable sitemap ({type(exc).__name__}: {exc})")
            return
        if not pages:
            writer.fail(url, "no page URLs in the sitemap (or it could not be downloaded)")
            return
    for page in pages:
        try:
            yield read_url(page, reach, limits)
        except ReaderError as exc:
            writer.fail(page, str(exc))
        except Exception as exc:  # a reader bug must not lose the other pages
            writer.fail(page, f"unexpected {type(exc).__name__}: {exc}")


def ingest_documents(store: Store, embedder: Callable[[], CachedEmbedder],
                     docs: Sequence[ParsedDocument], settings: Settings, progress: bool = False,
                     before_write: Callable[[list[ParsedDocument]], None] | None = None,
                     label: str = "ingest") -> IngestReport:
    """Ingest documents parsed elsewhere (an eval corpus) by the same path as files; a
    document's failures are reported under its `source`."""
    started = time.perf_counter()
    writer = _Writer(store, embedder, settings, before_write=before_write)
    with _progress(label, False, progress) as bar, _interruptible(writer):
        task = bar.add_task("docs", total=len(docs))
        for doc in docs:
            bar.update(task, advance=1)
            writer.add(doc, doc.source)
        return writer.finish(started)


def folder_documents(documents: Iterable[DocumentInfo], root: str | Path,
                     keep_under: Path | None = None) -> list[DocumentInfo]:
    """The documents whose source lies under folder `root`: what a sync of it may remove.
    Documents from other folders or uploads (sources under `keep_under`, the knowledge base's
    own folder) are never among them. Sources are compared resolved against the working
    directory, as recorded."""
    base = Path(root).resolve()
    own = keep_under.resolve() if keep_under is not None else None
    out = []
    for d in documents:
        where = Path(d.source.split("#", 1)[0]).resolve()
        if where.is_relative_to(base) and not (own is not None and where.is_relative_to(own)):
            out.append(d)
    return out


def stale_documents(documents: Iterable[DocumentInfo], report: IngestReport) -> list[str]:
    """Of a folder's `documents` (folder_documents), the doc_ids a sync removes after
    `report` (the ingest of the folder that went first): those the ingest did not read again
    because their file is gone or no longer yields them. A file that failed to read keeps
    its documents, whether or not it is there now: a file renamed away and back during the
    sync, or a share that went away mid-read, must not empty the knowledge base (issue 39)."""
    failed = {Path(p).resolve() for p, _ in report.failed}

    def failed_to_read(file: Path) -> bool:  # the file, or a folder above it (unlistable)
        return file in failed or any(parent in failed for parent in file.parents)

    return [d.doc_id for d in documents if d.doc_id not in report.read
            and not failed_to_read(Path(d.source.split("#", 1)[0]).resolve())]


def unlistable_folders(root: str | Path) -> list[tuple[Path, str]]:
    """(folder, reason) for each folder under `root` that cannot be listed: a walk passes
    over such a folder in silence (pathlib's rglob too), so its files look deleted."""
    out: list[tuple[Path, str]] = []

    def note(exc: OSError) -> None:
        if exc.filename is not None:
            out.append((Path(exc.filename), f"cannot list this folder"
                        f" ({exc.strerror or exc}): its documents are kept"))

    for _ in os.walk(root, onerror=note):
        pass
    return out


def folder_problem(folder: str | Path) -> str | None:
    """Why `folder` cannot be synced now (gone, not a folder, or not listable), or None. A
    folder that cannot be listed looks empty to a walk, which would read as "every file
    deleted"."""
    path = Path(folder)
    try:
        with os.scandir(path):
            return None
    except FileNotFoundError:
        return f"the folder {shown(path)} is gone (moved, deleted, or a share not mounted)"
    except NotADirectoryError:
        return f"{shown(path)} is not a folder"
    except OSError as exc:
        return f"the folder {shown(path)} cannot be read ({exc.strerror or exc})"


def mass_delete_reason(removing: int, of: int, settings: Settings) -> str | None:
    """Why removing `removing` of a folder's `of` documents needs the user's confirmation:
    more than settings.sync_max_remove_count of them and more than
    settings.sync_max_remove_share of the folder's documents (an emptied or half-copied
    folder looks like mass deletion); None when it does not."""
    share = settings.sync_max_remove_share
    if removing <= settings.sync_max_remove_count or removing <= share * of:
        return None
    return (f"{removing} of the folder's {of} documents would be removed (more than"
            f" {share:.0%} and more than"
            f" {settings.sync_max_remove_count})")
