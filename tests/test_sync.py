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


# Eight files: more than the settings' sync_max_remove_count (5), so emptying the folder is
# a mass deletion by both measures.
MANY = {f"notes/n{i}.md": f"# Note {i}\n\nNote number {i} is about topic {i}.\n"
        for i in range(8)}


def _aged(folder, seconds: float = 100.0) -> None:
    """Every file's mtime moved into the past: a file written just now is "racily clean"
    (pipeline.RACY_S) and is always read again, which would hide the stat skip."""
    import os
    import time

    when = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def _counting_reads(monkeypatch, on_read=None) -> list[str]:
    """Calls of the real read_file, in order; `on_read(n)` runs before the n-th (1-based)."""
    from ragloop.ingest import pipeline

    calls: list[str] = []
    real = pipeline.read_file

    def read(path, doc_id, *limits_and_visibility):
        calls.append(doc_id)
        if on_read is not None:
            on_read(len(calls))
        return real(path, doc_id, *limits_and_visibility)

    monkeypatch.setattr(pipeline, "read_file", read)
    return calls


def _ids(kb) -> set[str]:
    return {d.doc_id for d in kb.documents()}


def test_files_moved_away_mid_sync_are_failed_not_removed(tmp_path, embedder,
                                                          monkeypatch) -> None:
    """Two files renamed away while a sync reads the folder (and put back after it): they
    fail to read, and a file that fails to read is never counted as deleted."""
    folder, away = tmp_path / "share", tmp_path / "away"
    _write(folder, MANY)
    away.mkdir()
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)

        def move(n: int) -> None:
            if n == 2:
                for name in ("n5.md", "n6.md"):
                    (folder / "notes" / name).rename(away / name)

        _counting_reads(monkeypatch, move)
        report = kb.sync(folder)
        assert report.removed == [] and report.held is None
        assert sorted(p.rsplit("/", 1)[-1] for p, _ in report.failed) == ["n5.md", "n6.md"]
        assert _ids(kb) == set(MANY)
        for name in ("n5.md", "n6.md"):
            (away / name).rename(folder / "notes" / name)
        monkeypatch.undo()
        again = kb.sync(folder)
        assert (again.unchanged, again.removed, again.failed) == (8, [], [])


def test_a_folder_renamed_away_mid_sync_removes_nothing(tmp_path, embedder,
                                                        monkeypatch) -> None:
    """The issue's race: the folder renamed away a moment into the sync and put back after
    it. Every later file fails to read and the folder is gone when the sync would remove."""
    folder, away = tmp_path / "share", tmp_path / "share.moved"
    _write(folder, MANY)
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        _counting_reads(monkeypatch, lambda n: n == 2 and folder.rename(away))
        report = kb.sync(folder)
        assert report.removed == [] and len(report.failed) == 7
        assert report.held and "is gone" in report.held
        assert report.to_dict()["held"] == report.held
        assert _ids(kb) == set(MANY)
        away.rename(folder)
        monkeypatch.undo()
        again = kb.sync(folder)
        assert (again.unchanged, again.removed, again.held) == (8, [], None)


def test_an_emptied_folder_needs_confirmation(tmp_path, embedder) -> None:
    """An unmounted share leaves an empty mount point: every document would go."""
    folder = tmp_path / "share"
    _write(folder, MANY)
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        for name in MANY:
            (folder / name).unlink()
        report = kb.sync(folder)
        assert report.removed == [] and sorted(report.held_back) == sorted(MANY)
        assert "8 of the folder's 8 documents" in report.held
        assert "--allow-mass-delete" in report.held and "nothing removed" in report.summary()
        assert _ids(kb) == set(MANY)
        confirmed = kb.sync(folder, allow_mass_delete=True)
        assert sorted(confirmed.removed) == sorted(MANY) and confirmed.held is None
        assert _ids(kb) == set()


def test_the_threshold_counts_documents_and_share(tmp_path, embedder) -> None:
    folder = tmp_path / "share"
    _write(folder, MANY)
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        for i in range(3):  # 3 of 8: under both the count (5) and the share (50%)
            (folder / f"notes/n{i}.md").unlink()
        assert len(kb.sync(folder).removed) == 3
        for i in range(3, 7):  # 4 of the 5 left: 80%, but not more than 5 documents
            (folder / f"notes/n{i}.md").unlink()
        assert len(kb.sync(folder).removed) == 4
    other = tmp_path / "other"
    _write(other, MANY)
    strict = Settings().with_(sync_max_remove_count=1, sync_max_remove_share=0.2)
    with KnowledgeBase.open(tmp_path / "kb2", strict, embedder=embedder) as kb:
        kb.sync(other)
        for i in range(2):
            (other / f"notes/n{i}.md").unlink()
        held = kb.sync(other)
        assert held.removed == [] and "more than 20% and more than 1" in held.held


def test_a_vanished_folder_removes_nothing_unless_confirmed(tmp_path, embedder) -> None:
    folder = tmp_path / "share"
    _write(folder, {"a.md": "# A\n\nAlpha.\n", "b.md": "# B\n\nBeta.\n"})
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        shutil.rmtree(folder)
        report = kb.sync(folder)  # two documents: under the count, but the folder is gone
        assert report.removed == [] and "is gone" in report.held
        assert _ids(kb) == {"a.md", "b.md"}
        confirmed = kb.sync(folder, allow_mass_delete=True)
        assert sorted(confirmed.removed) == ["a.md", "b.md"] and _ids(kb) == set()


def test_the_cli_and_the_server_watcher_hold_a_mass_delete(tmp_path, embedder) -> None:
    import threading

    from ragloop.apps.server.folder_sync import FolderSync, SyncTarget

    folder = tmp_path / "share"
    _write(folder, MANY)
    kb = str(tmp_path / "kb")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync"]).exit_code == 0
    for name in MANY:
        (folder / name).unlink()
    # the CLI finds the folder empty before it syncs (cli._empty_folders) and removes nothing
    held = runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync", "--json"])
    assert held.exit_code == 1 and "nothing removed" in held.output
    with KnowledgeBase.open(kb, Settings(), embedder=embedder) as base:
        assert _ids(base) == set(MANY)
        watcher = FolderSync(base, threading.Lock(), [SyncTarget(str(folder))], 60)
        watcher.sync_once()
        assert _ids(base) == set(MANY) and "nothing removed" in watcher.held[str(folder)]
    done = runner.invoke(app, ["ingest", str(folder), "--kb", kb, "--sync",
                               "--allow-mass-delete"])
    assert done.exit_code == 0, done.output
    assert "removed 8" in done.output
    _write(folder, MANY)
    with KnowledgeBase.open(kb, Settings(), embedder=embedder) as base:
        base.sync(folder)
        for name in MANY:
            (folder / name).unlink()
        FolderSync(base, threading.Lock(), [SyncTarget(str(folder))], 60,
                   allow_mass_delete=True).sync_once()
        assert _ids(base) == set()


def test_an_unchanged_file_is_not_read_again(tmp_path, embedder, monkeypatch) -> None:
    """Skipped by size, mtime and inode before any read or hash; an edit that keeps the
    size but moves the mtime is read again, and so is a file whose document was deleted."""
    import os

    folder = tmp_path / "share"
    _write(folder, MANY)
    _aged(folder)
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        calls = _counting_reads(monkeypatch)
        assert kb.sync(folder).added == 8 and len(calls) == 8
        calls.clear()
        again = kb.sync(folder)
        assert (again.unchanged, again.removed, calls) == (8, [], [])
        edited = folder / "notes/n3.md"
        before = edited.stat()
        edited.write_text(edited.read_text().replace("topic 3", "tipoc 3"), encoding="utf-8")
        os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        assert edited.stat().st_size == before.st_size
        report = kb.sync(folder)
        assert calls == ["notes/n3.md"] and report.updated == 1
        assert kb.search("tipoc", 1, "bm25")[0].doc_id == "notes/n3.md"
        calls.clear()
        kb.remove("notes/n4.md")
        back = kb.ingest([folder])
        assert calls == ["notes/n4.md"] and back.added == 1 and back.unchanged == 7
        calls.clear()
        tagged = kb.ingest([folder], tags=["plant"])  # new tags: new documents, all read
        assert len(calls) == 8 and tagged.updated == 8


def test_a_file_written_just_now_is_read_again(tmp_path, embedder, monkeypatch) -> None:
    """Racily clean: a file modified within RACY_S of its reading may change again within the
    same mtime tick, so its stat is not trusted."""
    folder = tmp_path / "share"
    _write(folder, {"fresh.md": "# Fresh\n\nJust written.\n"})
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        calls = _counting_reads(monkeypatch)
        kb.sync(folder)
        kb.sync(folder)
        assert calls == ["fresh.md", "fresh.md"]


def test_a_subfolder_that_cannot_be_listed_keeps_its_documents(tmp_path, embedder,
                                                               monkeypatch) -> None:
    """A folder the sync cannot list (permissions, a stale network mount) is passed over in
    silence by a walk: its files would look deleted. Simulated through os.scandir, which
    both pathlib's rglob and os.walk use (the tests run as root, who reads everything)."""
    import os

    folder = tmp_path / "share"
    _write(folder, {**MANY, "locked/secret.md": "# Secret\n\nLocked away.\n",
                    "locked/deep/more.md": "# More\n\nDeeper.\n"})
    with KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=embedder) as kb:
        kb.sync(folder)
        real = os.scandir
        locked = str(folder / "locked")

        def scandir(path="."):
            if os.fspath(path) == locked:
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path)

        monkeypatch.setattr(os, "scandir", scandir)
        report = kb.sync(folder)
        monkeypatch.undo()
        assert report.removed == [] and report.held is None
        assert any("cannot list this folder" in why for _, why in report.failed)
        assert {"locked/secret.md", "locked/deep/more.md"} <= _ids(kb)
