"""Ingest: walk paths, parse, chunk, embed (cached) and write, idempotent by content hash."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ragloop.config import Settings
from ragloop.embed.base import Embedder
from ragloop.embed.cache import text_hash
from ragloop.errors import ReaderError, UserError
from ragloop.ingest.chunking import chunk_document
from ragloop.ingest.readers import SUPPORTED_SUFFIXES, read_file
from ragloop.store.base import DocumentWrite, Store
from ragloop.store.sqlite import index_text
from ragloop.types import Chunk, ParsedDocument

# Chunks embedded and written together: large enough to fill embedding batches, small
# enough that an interrupted ingest loses little.
WRITE_BATCH_CHUNKS = 512


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    chunks: int = 0  # chunks written by this run
    embedded: int = 0  # texts sent to the embedder (cache misses)
    unsupported: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"added": self.added, "updated": self.updated, "unchanged": self.unchanged,
                "chunks": self.chunks, "embedded": self.embedded,
                "unsupported": self.unsupported,
                "failed": [{"path": p, "reason": r} for p, r in self.failed],
                "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        text = (f"added {self.added}, updated {self.updated}, unchanged {self.unchanged} documents;"
                f" {self.chunks} chunks written ({self.embedded} embedded) in {self.seconds:.1f} s")
        if self.failed:
            text += f"; {len(self.failed)} file(s) failed"
        if self.unsupported:
            text += f"; {len(self.unsupported)} unsupported file(s) skipped"
        return text


def iter_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, str]]:
    """(file, doc_id) for every file under `paths`; doc_id is the path relative to the root
    given (a folder) or the file name (a file), with forward slashes."""
    for raw in paths:
        root = Path(raw)
        if not root.exists():
            raise UserError(f"{root}: no such file or folder")
        if root.is_file():
            yield root, root.name
            continue
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts) or not path.is_file():
                continue
            yield path, rel.as_posix()


def document_hash(doc: ParsedDocument, settings: Settings) -> str:
    """Hash of what ends up in the store: a change of text, sections or chunking re-ingests."""
    h = hashlib.sha256(f"{settings.chunk_tokens}|{settings.chunk_overlap}|{doc.title}".encode())
    for s in doc.sections:
        h.update(b"\x00" + s.section.encode() + b"\x00" + "\x1f".join(s.title_path).encode())
        h.update(b"\x00" + s.text.encode())
    return h.hexdigest()


def embed_text(doc: ParsedDocument, chunk: Chunk) -> str:
    """What the embedder sees for a chunk: the same titles-then-text that BM25 indexes."""
    path = next((s.title_path for s in doc.sections if s.section == chunk.section), ())
    return index_text(doc.title, path, chunk.text)


class _Batch:
    def __init__(self) -> None:
        self.docs: list[tuple[ParsedDocument, str, list[Chunk], bool]] = []
        self.size = 0

    def add(self, doc: ParsedDocument, content_hash: str, chunks: list[Chunk], new: bool) -> None:
        self.docs.append((doc, content_hash, chunks, new))
        self.size += len(chunks)


def ingest_paths(store: Store, embedder: Callable[[], Embedder], paths: Iterable[str | Path],
                 settings: Settings, progress: bool = False,
                 before_write: Callable[[list[ParsedDocument]], None] | None = None,
                 ) -> IngestReport:
    """Ingest files; `embedder` is called only when some chunk actually needs a vector;
    `before_write` sees each batch's documents first (the KB settles its language there)."""
    started = time.perf_counter()
    report = IngestReport()
    known = store.content_hashes()
    seen: set[str] = set()
    files = list(iter_files(paths))
    batch = _Batch()

    def flush() -> None:
        nonlocal batch
        if not batch.docs:
            return
        if before_write is not None:
            before_write([doc for doc, _, _, _ in batch.docs])
        emb = embedder()
        misses_before = getattr(emb, "misses", 0)
        texts = [[embed_text(doc, c) for c in chunks] for doc, _, chunks, _ in batch.docs]
        vectors = emb.embed([t for doc_texts in texts for t in doc_texts])
        writes, start = [], 0
        for (doc, content_hash, chunks, new), doc_texts in zip(batch.docs, texts, strict=True):
            writes.append(DocumentWrite(doc=doc, content_hash=content_hash, chunks=chunks,
                                        vectors=vectors[start:start + len(chunks)],
                                        embed_hashes=[text_hash(t) for t in doc_texts]))
            start += len(chunks)
            report.chunks += len(chunks)
            report.added += new
            report.updated += not new
        store.write_documents(writes)
        report.embedded += getattr(emb, "misses", 0) - misses_before
        batch = _Batch()

    bar = Progress(TextColumn("[bold]ingest[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[name]}"), TimeElapsedColumn(),
                   disable=not progress, transient=True)
    with bar:
        task = bar.add_task("files", total=len(files), name="")
        for path, doc_id in files:
            bar.update(task, advance=1, name=doc_id[-50:])
            if path.suffix.lower() not in SUPPORTED_SUFFIXES:
                report.unsupported.append(str(path))
                continue
            try:
                docs = read_file(path, doc_id)
            except ReaderError as exc:
                report.failed.append((str(path), str(exc)))
                continue
            except Exception as exc:  # a reader bug must not lose the rest of the folder
                report.failed.append((str(path), f"unexpected {type(exc).__name__}: {exc}"))
                continue
            for doc in docs:
                if doc.doc_id in seen:
                    report.failed.append((str(path), f"duplicate doc_id {doc.doc_id!r} skipped"))
                    continue
                seen.add(doc.doc_id)
                content_hash = document_hash(doc, settings)
                if known.get(doc.doc_id) == content_hash:
                    report.unchanged += 1
                    continue
                chunks = chunk_document(doc, settings.chunk_tokens, settings.chunk_overlap)
                if not chunks:
                    report.failed.append((str(path), f"{doc.doc_id}: no text to index"))
                    continue
                batch.add(doc, content_hash, chunks, doc.doc_id not in known)
                if batch.size >= WRITE_BATCH_CHUNKS:
                    flush()
        flush()
    store.flush()
    report.seconds = time.perf_counter() - started
    return report
