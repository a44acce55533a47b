"""Issue 18, points 1 and 8 and the fault-injection suite: whatever fails inside a write, the
tantivy and HNSW indexes end up holding exactly the chunks of the SQLite record."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
from reliability_kit import (
    DOCS,
    HashEmbedder,
    assert_consistent,
    ingested_kb,
    open_kb,
    top_doc,
    write_files,
)

from ragloop.core.errors import UserError
from ragloop.ingest import pipeline
from ragloop.storage.sqlite.indexes import FullTextIndex, VectorIndex
from ragloop.storage.sqlite.lock import WriteLock
from ragloop.storage.sqlite.store import SqliteStore


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return ingested_kb(tmp_path_factory.mktemp("write"))


@pytest.fixture
def kb_folder(template, tmp_path):
    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    return folder


def test_a_bad_file_name_then_another_ingest_keeps_search_right(tmp_path) -> None:
    """The issue's repro: a non-UTF-8 file name aborted the batch after tantivy had taken
    a.md; the next ingest then committed the orphan index entries and `zanzibar` found c.md."""
    d = write_files(tmp_path / "d", {"a.md": "The zanzibar clove harvest.\n"})
    (d / os.fsdecode(b"b\xff.md")).write_text("Another file with some words in it.\n")
    c = write_files(tmp_path / "c", {"c.md": "# Cobalt\n\nUnrelated cobalt mining text.\n"})
    with open_kb(tmp_path / "kb") as kb:
        report = kb.ingest([d])
        assert report.added == 1 and "not valid UTF-8" in report.failed[0][1]
        kb.ingest([c])
        assert top_doc(kb, "zanzibar") == "a.md"
        assert_consistent(kb)
    with open_kb(tmp_path / "kb") as kb:
        assert top_doc(kb, "zanzibar") == "a.md" and top_doc(kb, "cobalt") == "c.md"
        assert_consistent(kb)


def test_a_jsonl_whose_second_line_is_bad_keeps_the_update_searchable(kb_folder, tmp_path) -> None:
    """The issue's HTTP repro: line 1 updates an existing doc, line 2 has a lone-surrogate
    _id. Before, the batch died and the updated doc vanished from search for good."""
    lines = [
        json.dumps({"_id": "a.md", "text": "The nutmeg harvest replaced cloves."}),
        '{"_id": "bad\\udc80", "text": "lone surrogate"}',
    ]
    up = tmp_path / "up"
    up.mkdir()
    (up / "data.jsonl").write_text("\n".join(lines) + "\n")
    with open_kb(kb_folder) as kb:
        report = kb.ingest([up])
        assert report.updated == 1
        assert top_doc(kb, "nutmeg") == "a.md"
        assert_consistent(kb)
    with open_kb(kb_folder) as kb:
        assert top_doc(kb, "nutmeg") == "a.md"
        assert_consistent(kb)


class Boom(Exception):
    pass


# Every stage of a write batch (and of the flush that ends an ingest).
STAGES = [
    (HashEmbedder, "embed"),
    (SqliteStore, "_delete_doc"),
    (FullTextIndex, "delete_doc"),
    (VectorIndex, "remove"),
    (FullTextIndex, "add"),
    (VectorIndex, "add"),
    (SqliteStore, "_bump"),
    (SqliteStore, "_mark_indexes_dirty"),
    (FullTextIndex, "commit"),
    (VectorIndex, "save"),
    (SqliteStore, "_write_state"),
]
FAULTS = [(cls, name, nth) for cls, name in STAGES for nth in (1, 2, 3)]


def fail_on_call(monkeypatch, cls, name: str, nth: int) -> None:
    original = getattr(cls, name)
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            raise Boom(f"{cls.__name__}.{name} call {nth}")
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, failing)


@pytest.mark.parametrize(
    ("cls", "name", "nth"), FAULTS, ids=[f"{c.__name__}.{n}#{i}" for c, n, i in FAULTS]
)
def test_a_fault_at_any_stage_of_a_write_leaves_indexes_matching_the_record(
    kb_folder, tmp_path, monkeypatch, cls, name, nth
) -> None:
    edits = write_files(
        tmp_path / "docs",
        {
            **DOCS,
            "a.md": "# Harvest\n\nThe nutmeg harvest replaced the zanzibar cloves.\n",
            "d.md": "# Ferry\n\nThe ferry timetable changes in winter.\n",
        },
    )
    monkeypatch.setattr(pipeline, "WRITE_BATCH_CHUNKS", 1)  # several batches per ingest
    kb = open_kb(kb_folder)
    with monkeypatch.context() as m:
        fail_on_call(m, cls, name, nth)
        try:
            kb.ingest([edits])
            kb.remove("c.md")
        except Boom:
            pass
    assert_consistent(kb)  # the same process goes on
    kb.close()
    with open_kb(kb_folder) as kb:  # what close() saved does not claim too much
        assert_consistent(kb)
        kb.ingest([edits])  # and a plain re-ingest finishes the work
        assert_consistent(kb)
        assert top_doc(kb, "nutmeg") == "a.md" and top_doc(kb, "ferry") == "d.md"
        assert (
            top_doc(kb, "Harvest nutmeg harvest replaced the zanzibar cloves", "vector") == "a.md"
        )


def test_a_fault_while_removing_a_document(kb_folder, monkeypatch) -> None:
    with open_kb(kb_folder) as kb, monkeypatch.context() as m:
        fail_on_call(m, SqliteStore, "_bump", 1)
        with pytest.raises(Boom):
            kb.remove("a.md")
        m.undo()
        assert_consistent(kb)
        assert top_doc(kb, "zanzibar") == "a.md"


def test_two_ingests_into_one_kb_at_once_both_finish(kb_folder, tmp_path, monkeypatch) -> None:
    """Before: the second writer died on tantivy's LockBusy; now it waits its turn."""
    monkeypatch.setattr(pipeline, "WRITE_BATCH_CHUNKS", 1)
    sets = [
        write_files(
            tmp_path / f"set{i}",
            {f"s{i}/{j}.md": f"# T{i}{j}\n\nword{i}x{j} text.\n" for j in range(6)},
        )
        for i in range(2)
    ]
    errors: list[BaseException] = []

    def run(folder) -> None:
        try:
            with open_kb(kb_folder) as kb:
                kb.ingest([folder])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in sets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    with open_kb(kb_folder) as kb:
        assert len(kb.documents()) == len(DOCS) + 12
        assert top_doc(kb, "word1x5") == "s1/5.md"
        assert_consistent(kb)


def test_a_writer_that_waits_too_long_says_another_ingest_is_running(
    kb_folder, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("RAGLOOP_LOCK_WAIT", "0.3")
    docs = write_files(tmp_path / "new", {"n.md": "# New\n\nA new document.\n"})
    holder = WriteLock(kb_folder)
    holder.acquire()
    try:
        with open_kb(kb_folder) as kb, pytest.raises(UserError, match="Another ingest"):
            kb.ingest([docs])
    finally:
        holder.release()
    with open_kb(kb_folder) as kb:
        kb.ingest([docs])
        assert_consistent(kb)


def test_cli_ingest_blocked_by_another_writer_is_a_clear_error(tmp_path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    docs = write_files(tmp_path / "new", {"n.md": "# New\n\nA new document.\n"})
    holder = WriteLock(folder)
    holder.acquire()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "ragloop", "ingest", str(docs), "--kb", str(folder)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "RAGLOOP_LOCK_WAIT": "0.3"},
        )
    finally:
        holder.release()
    assert res.returncode == 2 and "Another ingest" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
