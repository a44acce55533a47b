"""POST /documents: write the uploaded files, ingest them, and keep what was not the upload's.

An upload may add documents and replace documents that uploads created; a document that came
from anywhere else (`ragloop ingest` of a folder, a migration) is left as it is and reported
as a conflict, unless the caller passes overwrite=true. "Created by an upload" means the
stored document's `source` lies in the upload area: `<kb>/uploads/` for a SQLite knowledge
base, the server's `ragloop-upload-*` temporary folders for Postgres.

A file the ingest could not use (unreadable, no text, every document a conflict) does not
stay in `<kb>/uploads/`: the file it replaced is put back, or it is removed.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from ragloop.core import audit
from ragloop.core.access import Principal
from ragloop.core.types import ParsedDocument
from ragloop.ingest.pipeline import IngestReport
from ragloop.kb import KnowledgeBase

UPLOADS_DIR = "uploads"
TEMP_PREFIX = "ragloop-upload-"
# One text for every conflict, naming no source: a document the uploader may not read gets
# the same answer as any other (it is never replaced, even with overwrite=true).
CONFLICT = (
    "already exists and this upload may not replace it (overwrite=true replaces a document"
    " you may read that was not created by an upload)"
)


def upload_area(kb: KnowledgeBase) -> str:
    """The prefix every source written by an upload starts with."""
    folder = kb.store.folder
    if folder is None:  # Postgres: uploads are ingested from temporary folders
        return os.path.join(tempfile.gettempdir(), TEMP_PREFIX)
    return str(Path(folder) / UPLOADS_DIR) + os.sep


class UploadGuard:
    """The ingest's `admit`: which documents this upload may write, and what each file gave."""

    def __init__(self, kb: KnowledgeBase, paths: list[Path], overwrite: bool,
                 principal: Principal | None = None) -> None:
        self.kb = kb
        self.overwrite = overwrite
        self.principal = principal
        self.area = upload_area(kb)
        self.known = kb.store.content_hashes()
        self._existing: dict[str, tuple[str, dict]] | None = None
        self.admitted: dict[Path, list[tuple[str, str]]] = {p: [] for p in paths}

    def existing(self, doc_id: str) -> tuple[str, dict]:
        """(source, metadata) of a stored document."""
        if self._existing is None:  # only when the upload names an existing document
            self._existing = {d.doc_id: (d.source, d.metadata) for d in self.kb.documents()}
        return self._existing.get(doc_id, ("", {}))

    def admit(self, doc: ParsedDocument, content_hash: str) -> str | None:
        if doc.doc_id in self.known:
            source, metadata = self.existing(doc.doc_id)
            if self.principal is not None and not self.principal.may_read(metadata):
                audit.denied(self.principal.user, "upload", "hidden", doc_id=doc.doc_id)
                return CONFLICT
            if not self.overwrite and not source.startswith(self.area):
                return CONFLICT
        for path in self.admitted:
            if doc.source == str(path) or doc.source.startswith(f"{path}#"):
                self.admitted[path].append((doc.doc_id, content_hash))
        return None

    def unused(self) -> list[Path]:
        """The files none of whose documents the store now holds as this upload read them."""
        stored = self.kb.store.content_hashes()
        return [
            path
            for path, docs in self.admitted.items()
            if not any(stored.get(doc_id) == h for doc_id, h in docs)
        ]


@dataclass
class UploadResult:
    report: IngestReport
    status: int
    message: str | None


def ingest_uploads(
    kb: KnowledgeBase, lock: threading.Lock, files: list[tuple[str, bytes]], overwrite: bool,
    principal: Principal | None = None,
) -> UploadResult:
    folder = kb.store.folder
    if folder is None:  # Postgres: the uploaded files need no home after ingest
        with lock, tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as tmp:
            paths = []
            for name, data in files:
                (Path(tmp) / name).write_bytes(data)
                paths.append(Path(tmp) / name)
            guard = UploadGuard(kb, paths, overwrite, principal)
            return _result(kb.ingest(paths, admit=guard.admit))
    uploads = Path(folder) / UPLOADS_DIR
    with lock:
        uploads.mkdir(parents=True, exist_ok=True)
        previous: dict[Path, bytes | None] = {}
        for name, data in files:
            path = uploads / name
            previous[path] = path.read_bytes() if path.exists() else None
            path.write_bytes(data)
        guard = UploadGuard(kb, list(previous), overwrite, principal)
        try:
            report = kb.ingest(list(previous), admit=guard.admit)
        finally:
            # what the knowledge base does not hold (the store says) leaves no file behind
            for path in guard.unused():
                if previous[path] is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(previous[path])
    return _result(report)


def _result(report: IngestReport) -> UploadResult:
    if report.added or report.updated or report.unchanged:
        return UploadResult(report, 200, None)
    parts = []
    if report.conflicts:
        parts.append(
            f"{len(report.conflicts)} document(s) already exist and were not created"
            " by an upload (pass overwrite=true to replace them)"
        )
    if report.failed:
        parts.append(f"{len(report.failed)} file(s) or document(s) could not be read")
    message = "Nothing was ingested: " + "; ".join(parts or ["no documents"]) + "."
    return UploadResult(report, 409 if report.conflicts else 422, message)
