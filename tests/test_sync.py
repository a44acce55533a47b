"""`ingest --sync` on both backends: after files are deleted, changed and added, a synced
knowledge base equals a fresh ingest of the folder (documents, chunks, search results), and
nothing from another folder or an upload is removed; `DELETE /documents/{id}` over real HTTP."""

from __future__ import annotations

import json
import shutil

from test_server import serving
from typer.testing import CliRunner

from ragloop.apps.cli import app
from ragloop.core.config import Settings
from ragloop.core.errors import UserError
from ragloop.kb import KnowledgeBase

QUERIES = ["boiler pressure valve", "canteen menu Monday", "fire drill assembly point",
           "new parking rules"]


def _write(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


FILES = {
    "plant/boiler.md": "# Boiler\n\n## Valves\nCheck the boiler pressure valve weekly.\n",
    "plant/canteen.md": "# Canteen\n\nThe canteen menu changes every Monday.\n",
    "safety/fire.md": "# Fire drill\n\n## Assembly\nThe assembly point is the north car park.\n",
    "safety/old.md": "# Old rules\n\nThese rules were retired.\n",
}


def snapshot(kb: KnowledgeBase) -> dict:
    """What must be equal: documents, each one's chunks, and the search results (chunk ids
    differ between two knowledge bases, so hits are compared by document, section, text)."""
    docs = [(d.doc_id, d.title, d.content_hash, d.sections, d.chunks) for d in kb.documents()]
    sections = {d.doc_id: [(s.section, s.text) for s in kb.sections(d.doc_id)]
                for d in kb.documents()}
    searches = {q: [(h.doc_id, h.section, h.text) for h in kb.search(q, 5, mode)]
                for q in QUERIES for mode in ("bm25", "vector")}
    return {"docs": docs, "sections": sections, "searches": searches}


def test_sync_equals_a_fresh_ingest(location, embedder, tmp_path) -> None:
    folder = tmp_path / "share"
    _write(folder, FILES)
    other = tmp_path / "other"
    _write(other, {"elsewhere.md": "# Elsewhere\n\nA document from another folder.\n"})
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as kb:
        first = kb.sync(folder)
        assert (first.added, first.removed) == (4, [])
        kb.ingest([other])
        # delete one file, change one, add one
        (folder / "safety/old.md").unlink()
        _write(folder, {"plant/canteen.md": "# Canteen\n\nThe canteen menu changes every"
                                            " Monday and Thursday.\n",
                        "admin/parking.md": "# Parking\n\nNew parking rules start in May.\n"})
        report = kb.sync(folder)
        assert report.removed == ["safety/old.md"]
        assert sorted(report.changes) == [("admin/parking.md", "added"),
                                          ("plant/canteen.md", "updated"),
                                          ("safety/old.md", "removed")]
        assert (report.added, report.updated, report.unchanged) == (1, 1, 2)
        # the other folder's document stays; then compare without it
        assert "elsewhere.md" in {d.doc_id for d in kb.documents()}
        assert kb.remove("elsewhere.md")
        synced = snapshot(kb)
        again = kb.sync(folder)
        assert (again.added, again.updated, again.removed, again.changes) == (0, 0, [], [])
    fresh_location = str(tmp_path / "fresh")
    with KnowledgeBase.open(fresh_location, Settings(), embedder=embedder) as fresh:
        fresh.ingest([folder])
        assert snapshot(fresh) == synced


def test_a_file_that_fails_to_read_keeps_its_document(tmp_path, embedder) -> None:
    folder = tmp_path / "share"
    _write(folder, FILES)
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        (folder / "plant/boiler.md").write_bytes(b"")  # still there, but empty: not gone
        report = kb.sync(folder)
        assert report.removed == [] and report.failed
        assert "plant/boiler.md" in {d.doc_id for d in kb.documents()}


def test_the_cli_reports_each_change(tmp_path) -> None:
    folder = tmp_path / "share"
    _write(folder, FILES)
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync"]).exit_code == 0
    (folder / "safety/old.md").unlink()
    result = runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["removed"] == ["safety/old.md"]
    assert body["changes"] == [{"doc_id": "safety/old.md", "change": "removed"}]
    (folder / "plant/boiler.md").write_text("# Boiler\n\nA new boiler.\n", encoding="utf-8")
    text = runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync"])
    assert text.exit_code == 0
    assert "updated plant/boiler.md" in text.output and "removed 0" in text.output
    single = runner.invoke(app, ["ingest", str(folder / "plant/boiler.md"), "--kb", kb,
                                 "--sync"])
    # the CLI's main() prints a UserError as a one-line error
    assert isinstance(single.exception, UserError) and "needs a folder" in str(single.exception)


def test_delete_and_filtered_search_over_http(small_kb_template, tmp_path) -> None:
    shutil.copytree(small_kb_template, tmp_path / "kb")
    settings = Settings().with_(kb=str(tmp_path / "kb"))
    with (KnowledgeBase.open(tmp_path / "kb", settings) as kb, serving(kb) as live,
          live.client() as client):
        within = client.get("/search", params={"q": "battery approval", "k": 3,
                                               "doc_id_prefix": "policies/"}).json()
        assert within["hits"] and all(h["doc_id"].startswith("policies/")
                                      for h in within["hits"])
        bad = client.get("/search", params={"q": "x", "metadata": "author"})
        assert bad.status_code == 400 and "KEY=VALUE" in bad.json()["message"]
        gone = client.delete("/documents/products/sensor.md")
        assert gone.status_code == 200 and gone.json()["deleted"] is True
        assert client.get("/documents/products/sensor.md").status_code == 404
        assert client.delete("/documents/products/sensor.md").status_code == 404
        hits = client.get("/search", params={"q": "waterproof sensor", "k": 8}).json()
        assert all(h["doc_id"] != "products/sensor.md" for h in hits["hits"])


def test_the_server_syncs_its_folders_on_a_schedule(small_kb_template, tmp_path) -> None:
    import time

    folder = tmp_path / "share"
    _write(folder, FILES)
    shutil.copytree(small_kb_template, tmp_path / "kb")
    settings = Settings().with_(kb=str(tmp_path / "kb"))

    def wait_for(client, want, gone) -> set[str]:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ids = {d["doc_id"] for d in client.get("/documents").json()["documents"]}
            if want <= ids and not gone & ids:
                return ids
            time.sleep(0.2)
        raise AssertionError(f"not synced: {sorted(ids)}")

    with (KnowledgeBase.open(tmp_path / "kb", settings) as kb,
          serving(kb, sync_folders=[str(folder)], sync_every=0.2) as live,
          live.client() as client):
        ids = wait_for(client, set(FILES), set())
        assert "policies/travel.md" in ids  # from another folder: kept
        (folder / "safety/old.md").unlink()
        _write(folder, {"admin/parking.md": "# Parking\n\nNew parking rules start in May.\n"})
        ids = wait_for(client, {"admin/parking.md"}, {"safety/old.md"})
        assert "policies/travel.md" in ids
