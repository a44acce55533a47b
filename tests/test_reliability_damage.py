"""Issue 18, point 6: every file of `index/` truncated or garbled in turn, `index` replaced by
a file, ragloop.db damaged. Search rebuilds the indexes from the record (or, for the record
itself, says plainly that the folder is not a knowledge base)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from reliability_kit import assert_consistent, ingested_kb, open_kb, top_doc, write_files

from ragloop.core.errors import UserError
from ragloop.storage.sqlite.lock import WriteLock


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    return ingested_kb(tmp_path_factory.mktemp("damage"))


def index_files(folder) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in (folder / "index").rglob("*")
        if p.is_file() and not p.name.endswith(".lock")
    )


def truncate(path) -> None:
    with path.open("r+b") as f:
        f.truncate(min(50, path.stat().st_size // 2))


def garble(path) -> None:
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(size // 3)
        f.write(os.urandom(max(1, min(4096, size // 3))))


def zero(path) -> None:
    path.write_bytes(b"")


def junk(path) -> None:
    path.write_bytes(b"{not json at all \xff\xfe")


DAMAGE = {"truncated": truncate, "garbled": garble, "emptied": zero, "junk": junk}


def test_the_template_has_the_files_the_cases_name(template) -> None:
    names = index_files(template)
    assert {
        "index/vectors.hnsw",
        "index/vectors.hnsw.json",
        "index/state.json",
        "index/fulltext/meta.json",
    } <= set(names)
    assert len(names) >= 8  # tantivy's segment files too


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_each_index_file_damaged_in_turn_is_rebuilt(template, tmp_path, how) -> None:
    tried = 0
    for name in index_files(template):
        folder = tmp_path / f"{how}-{tried}"
        shutil.copytree(template, folder)
        DAMAGE[how](folder / name)
        with open_kb(folder) as kb:
            for mode in ("bm25", "vector", "hybrid"):
                assert top_doc(kb, "zanzibar clove harvest", mode) == "a.md", (name, mode)
            assert_consistent(kb)
            probe = WriteLock(folder)  # a reader that rebuilt does not keep writers out
            assert probe.try_acquire()
            probe.release()
        with open_kb(folder) as kb:  # and what was rebuilt was saved
            assert top_doc(kb, "CR123A battery") == "b.md"
            assert_consistent(kb)
        tried += 1
    assert tried >= 8


def test_index_being_a_file_is_rebuilt_and_reingest_repairs(template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    shutil.rmtree(folder / "index")
    (folder / "index").write_text("not a folder")
    with open_kb(folder) as kb:
        assert top_doc(kb, "zanzibar") == "a.md"
        assert_consistent(kb)
    truncate(folder / "index" / "vectors.hnsw")
    docs = write_files(tmp_path / "more", {"e.md": "# Ferry\n\nThe ferry runs daily.\n"})
    with open_kb(folder) as kb:  # an ingest meets the damage first: it repairs too
        kb.ingest([docs])
        assert_consistent(kb)
        assert top_doc(kb, "ferry", "vector") == "e.md"


def test_cli_search_on_damaged_indexes_works(template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    truncate(folder / "index" / "vectors.hnsw")
    junk(folder / "index" / "fulltext" / "meta.json")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragloop",
            "search",
            "zanzibar",
            "--mode",
            "bm25",
            "--kb",
            str(folder),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0 and '"a.md"' in res.stdout, res.stderr


@pytest.mark.parametrize("how", ["garbage", "truncated", "foreign"])
def test_a_damaged_ragloop_db_is_not_a_knowledge_base(template, tmp_path, how) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(template, folder)
    db = folder / "ragloop.db"
    for extra in ("ragloop.db-wal", "ragloop.db-shm"):
        (folder / extra).unlink(missing_ok=True)
    if how == "garbage":
        db.write_bytes(os.urandom(8192))
    elif how == "truncated":
        truncate(db)
    else:  # another program's SQLite file with a `documents` table of its own
        import sqlite3

        db.unlink()
        with sqlite3.connect(db) as other:
            other.execute("CREATE TABLE documents (name TEXT)")
    with pytest.raises(UserError, match="not a ragloop knowledge base"):
        open_kb(folder)
    res = subprocess.run(
        [sys.executable, "-m", "ragloop", "docs", "--kb", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "not a ragloop knowledge base" in res.stderr
    assert "Traceback" not in res.stderr
