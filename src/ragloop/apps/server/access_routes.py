"""The admin's view over HTTP (issue 43.5): who may read a document, which documents a user
may read. Admins only (the single RAGLOOP_API_KEY, an admin user's key, the keyless loopback
server); anyone else gets 403 whatever the id, so the answer says nothing about the
documents, and the attempt is an audit line (core/audit.py)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException

from ragloop.apps.server.access_guard import principal_of
from ragloop.core import audit
from ragloop.core.errors import NotFoundError
from ragloop.kb.access import readers, stored_principals


def _admin_only(request: Request) -> None:
    principal = principal_of(request)
    if not principal.admin:
        audit.denied(principal.user, "admin", "not_admin", path=request.url.path)
        raise HTTPException(403, "Only an admin may read who can see what.")


def add_access_routes(app: FastAPI) -> None:
    @app.get("/access/documents/{doc_id:path}", tags=["access"])
    def who_reads(doc_id: str, request: Request) -> dict[str, Any]:
        """Admins: a document's access list (null: everyone) and the users it lets in."""
        _admin_only(request)
        kb = request.app.state.ragloop.kb
        found = readers(kb.documents(), doc_id, stored_principals(
            kb.backend.principals.users()))
        if found is None:
            raise NotFoundError(f"No document {doc_id!r}; GET /documents lists the doc_ids.")
        return found

    @app.get("/access/users/{user}/documents", tags=["access"])
    def user_documents(user: str, request: Request) -> dict[str, Any]:
        """Admins: the documents `user` may read (doc_id, title; `kb` when several)."""
        _admin_only(request)
        kb = request.app.state.ragloop.kb
        principal = kb.backend.principals.principal_of(user)
        docs = kb.for_principal(principal).documents()
        return {"user": principal.user, "documents": [
            {"doc_id": d.doc_id, "title": d.title, **({"kb": d.kb} if d.kb else {})}
            for d in docs]}
