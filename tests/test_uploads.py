"""POST /documents for real (uvicorn + httpx + a real SQLite KB): an upload adds documents
and updates the ones uploads created, never silently replaces a document from elsewhere, and
leaves no file it could not use in uploads/."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from test_server import serving

from ragloop.kb import KnowledgeBase

SENSOR = "products/sensor.md"
LIE = "The T9 is NOT waterproof and must never touch water."


def jsonl(*rows: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def post(c: httpx.Client, *files: tuple[str, bytes], **params: str) -> httpx.Response:
    return c.post(
        "/documents",
        params=params,
        files=[("files", (name, data, "application/octet-stream")) for name, data in files],
    )


def sensor_text(c: httpx.Client, section: str = "1") -> str:
    return c.get(f"/documents/{SENSOR}/sections/{section}").json()["text"]


def uploads(kb: KnowledgeBase) -> list[str]:
    folder = Path(kb.store.folder) / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_beir_upload_does_not_replace_a_document_it_did_not_create(small_kb) -> None:
    with serving(small_kb) as server, server.client() as c:
        before = c.get(f"/documents/{SENSOR}").json()
        original = sensor_text(c)
        r = post(c, ("corpus.jsonl", jsonl({"_id": SENSOR, "text": LIE})))
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["error"] == "conflict" and "overwrite=true" in body["message"]
        assert [x["doc_id"] for x in body["conflicts"]] == [SENSOR]
        assert "overwrite=true" in body["conflicts"][0]["reason"]
        assert body["added"] == body["updated"] == 0
        assert c.get(f"/documents/{SENSOR}").json() == before and sensor_text(c) == original
        answer = c.post("/ask", json={"question": "Is the T9 sensor waterproof?"}).json()
        assert "IP67" in answer["answer"] and "NOT" not in answer["answer"]
        assert uploads(small_kb) == []  # the refused file is not kept

        # one line new, one line a conflict: the new one goes in, the other is reported
        r = post(
            c,
            (
                "mixed.jsonl",
                jsonl(
                    {"_id": SENSOR, "text": LIE},
                    {"_id": "beir/fresh", "text": "Fresh clove notes."},
                ),
            ),
        )
        assert r.status_code == 200, r.text
        assert r.json()["added"] == 1 and [x["doc_id"] for x in r.json()["conflicts"]] == [SENSOR]
        assert sensor_text(c) == original
        assert uploads(small_kb) == ["mixed.jsonl"]

        # a later upload may update what an upload created
        r = post(c, ("more.jsonl", jsonl({"_id": "beir/fresh", "text": "Fresher clove notes."})))
        assert r.status_code == 200 and r.json()["updated"] == 1 and not r.json()["conflicts"]

        # the caller can ask for it
        r = post(c, ("corpus.jsonl", jsonl({"_id": SENSOR, "text": LIE})), overwrite="true")
        assert r.status_code == 200 and r.json()["updated"] == 1, r.text
        assert sensor_text(c, "0") == LIE  # a BEIR document has one section, "0"


def test_a_file_upload_does_not_replace_a_document_of_the_same_name(small_kb, tmp_path) -> None:
    local = tmp_path / "handbook.md"
    local.write_text("# Handbook\n\n## Leave\nStaff get 30 days of leave.\n", encoding="utf-8")
    assert small_kb.ingest([local]).added == 1  # doc_id handbook.md, from `ragloop ingest`
    with serving(small_kb) as server, server.client() as c:
        fake = b"# Handbook\n\n## Leave\nStaff get no leave at all.\n"
        r = post(c, ("handbook.md", fake))
        assert r.status_code == 409, r.text
        assert "30 days" in c.get("/documents/handbook.md/sections/1").json()["text"]
        assert uploads(small_kb) == []

        note = b"# Pager\n\n## On call\nPages are answered in 15 minutes.\n"
        assert post(c, ("oncall.md", note)).json()["added"] == 1
        r = post(c, ("oncall.md", note.replace(b"15", b"10")))
        assert r.status_code == 200 and r.json()["updated"] == 1  # its own upload: updated
        assert post(c, ("handbook.md", fake), overwrite="true").json()["updated"] == 1
        assert "no leave" in c.get("/documents/handbook.md/sections/1").json()["text"]
        assert (
            c.post(
                "/documents",
                params={"overwrite": "maybe"},
                files=[("files", ("x.md", note, "text/markdown"))],
            ).status_code
            == 422
        )
    # `ragloop ingest` (the local user) still updates any document, as before
    local.write_text("# Handbook\n\n## Leave\nStaff get 31 days of leave.\n", encoding="utf-8")
    report = small_kb.ingest([local])
    assert report.updated == 1 and not report.conflicts


def test_a_rejected_file_of_a_partly_successful_upload_leaves_no_file(small_kb) -> None:
    good = b"# Good\n\n## Part\nA readable note about the clove harvest.\n"
    with serving(small_kb) as server, server.client() as c:
        assert post(c, ("keep.md", good)).status_code == 200
        r = post(
            c,
            ("fine.md", good.replace(b"Good", b"Fine")),
            ("empty.md", b""),
            ("blank.txt", b"   \n\n "),
            ("keep.md", b"\x00\x01\x02binary\x00"),
            ("notbeir.jsonl", b'{"x": 1}\n'),
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["added"] == 1 and len(body["failed"]) == 4, body
        # the unreadable new files are gone; the unreadable new keep.md gave back the old one
        assert uploads(small_kb) == ["fine.md", "keep.md"]
        folder = Path(small_kb.store.folder) / "uploads"
        assert (folder / "keep.md").read_bytes() == good
        assert "clove harvest" in c.get("/documents/keep.md/sections/1").json()["text"]
        # nothing usable at all: 422, and still nothing left behind
        r = post(c, ("empty2.md", b""))
        assert r.status_code == 422 and r.json()["error"] and r.json()["failed"]
        assert uploads(small_kb) == ["fine.md", "keep.md"]


def test_uploads_to_a_postgres_knowledge_base_keep_the_same_rule(pg_small_url) -> None:
    from test_server import LiveServer

    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings

    app = create_app(Settings().with_(kb=pg_small_url, model="offline"), local_workers=0)
    with LiveServer(app) as server, server.client() as c:
        original = sensor_text(c)
        r = post(c, ("corpus.jsonl", jsonl({"_id": SENSOR, "text": LIE})))
        assert r.status_code == 409 and r.json()["conflicts"][0]["doc_id"] == SENSOR, r.text
        assert sensor_text(c) == original
        note = b"# Pager\n\n## On call\nPages are answered in 15 minutes.\n"
        assert post(c, ("oncall.md", note)).json()["added"] == 1
        r = post(c, ("oncall.md", note.replace(b"15", b"10")))
        assert r.status_code == 200 and r.json()["updated"] == 1, r.text
        r = post(c, ("corpus.jsonl", jsonl({"_id": SENSOR, "text": LIE})), overwrite="true")
        assert r.status_code == 200 and r.json()["updated"] == 1, r.text
