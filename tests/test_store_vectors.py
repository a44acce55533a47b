"""Chunk vectors kept once in the record, as float16 (store.VECTORS_LAYOUT), and knowledge
bases of the layout before it (float32 in the `embeddings` cache) migrated without loss.

The old-layout KB is tests/fixtures/kb_layout1, written by the store's code before this layout
(make_kb_layout1.py), with what its searches returned then."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from reliability_kit import DOCS, HashEmbedder, assert_consistent, open_kb, write_files

from ragloop.storage.migrate import migrate
from ragloop.storage.sqlite.store import VECTORS_LAYOUT

FIXTURE = Path(__file__).parent / "fixtures" / "kb_layout1"
MODEL = HashEmbedder.name


@pytest.fixture
def old_kb(tmp_path) -> Path:
    folder = tmp_path / "old"
    shutil.copytree(FIXTURE, folder, ignore=shutil.ignore_patterns("expected.json"))
    return folder


def expected() -> dict[str, list]:
    return json.loads((FIXTURE / "expected.json").read_text())["results"]


def raw(folder: Path) -> sqlite3.Connection:
    return sqlite3.connect(folder / "ragloop.db")


def results(kb) -> dict[str, list]:
    out = {}
    for key in expected():
        mode, q = key.split(":", 1)
        out[key] = [[h.chunk_id, h.doc_id, round(h.score, 6)] for h in kb.search(q, 5, mode)]
    return out


def test_the_fixture_is_the_old_layout(old_kb) -> None:
    db = raw(old_kb)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "chunk_vectors" not in tables
    chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    held = db.execute("SELECT count(*) FROM chunks c JOIN embeddings e ON e.model = ?"
                      " AND e.hash = c.embed_hash", (MODEL,)).fetchone()[0]
    assert chunks >= 4 and held == chunks


def test_an_old_kb_opens_migrated_and_answers_as_before(old_kb) -> None:
    db = raw(old_kb)
    old = {cid: np.frombuffer(blob, dtype=np.float32) for cid, blob in db.execute(
        "SELECT c.id, e.vector FROM chunks c JOIN embeddings e ON e.model = ?"
        " AND e.hash = c.embed_hash", (MODEL,))}
    queries_before = db.execute("SELECT count(*) FROM embeddings").fetchone()[0] - len(old)
    db.close()
    with open_kb(old_kb, create=False) as kb:
        assert results(kb) == expected()  # the saved indexes still serve, unchanged
        assert_consistent(kb)
    db = raw(old_kb)
    assert db.execute("SELECT value FROM meta WHERE key='vectors'").fetchone()[0] \
        == VECTORS_LAYOUT
    new = {cid: np.frombuffer(blob, dtype="<f2").astype(np.float32)
           for cid, blob in db.execute("SELECT id, vector FROM chunk_vectors")}
    assert new.keys() == old.keys()
    for cid, v in old.items():
        assert np.abs(new[cid] - v / np.linalg.norm(v)).max() < 1e-3
    # the float32 copies of chunk vectors are gone; the cached query vectors stay
    assert db.execute("SELECT count(*) FROM embeddings e JOIN chunks c"
                      " ON e.hash = c.embed_hash").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM embeddings").fetchone()[0] == queries_before > 0


def test_a_migrated_kb_rebuilt_from_its_float16_record_finds_the_same(old_kb) -> None:
    with open_kb(old_kb, create=False):
        pass
    shutil.rmtree(old_kb / "index")
    with open_kb(old_kb, create=False) as kb:
        got = results(kb)
        assert_consistent(kb)
    for key, hits in expected().items():
        assert [h[:2] for h in got[key]] == [h[:2] for h in hits], key
        assert np.allclose([h[2] for h in got[key]], [h[2] for h in hits], atol=2e-3), key


def test_an_old_kb_migrates_into_a_new_folder(old_kb, tmp_path) -> None:
    migrate(str(old_kb), str(tmp_path / "copy"))
    with open_kb(tmp_path / "copy", create=False) as kb:
        assert [h.doc_id for h in kb.search("zanzibar clove harvest", 1, "vector")] == ["a.md"]
        assert_consistent(kb)
    db = raw(tmp_path / "copy")
    assert db.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] \
        == db.execute("SELECT count(*) FROM chunks").fetchone()[0]


def test_new_writes_keep_each_chunk_vector_once(tmp_path) -> None:
    docs = write_files(tmp_path / "docs", DOCS)
    with open_kb(tmp_path / "kb") as kb:
        kb.ingest([docs])
    db = raw(tmp_path / "kb")
    hashes = dict(db.execute("SELECT id, embed_hash FROM chunks"))
    half = {h: np.frombuffer(blob, dtype="<f2").astype(np.float32) for h, blob in db.execute(
        "SELECT c.embed_hash, v.vector FROM chunks c JOIN chunk_vectors v ON v.id = c.id")}
    assert {r[0] for r in db.execute("SELECT id FROM chunk_vectors")} == set(hashes)
    assert db.execute("SELECT count(*) FROM embeddings e JOIN chunks c"
                      " ON e.hash = c.embed_hash").fetchone()[0] == 0
    db.close()
    with open_kb(tmp_path / "kb", create=False) as kb:
        kb.search("zanzibar", 1, "vector")  # loads the index
        cached = kb.store.get_embeddings(MODEL, list(hashes.values()))
        assert cached.keys() == half.keys()
        # the cache answers chunk texts from the index: float32 as ingested, not float16
        assert all(np.abs(cached[h] - v).max() < 1e-3 for h, v in half.items())
        assert any(not np.array_equal(cached[h], v) for h, v in half.items())
        assert kb.store.get_embeddings("another:model", list(hashes.values())) == {}
    (docs / "b.md").write_text(DOCS["b.md"] + "\n## Storage\nKeep it dry.\n")
    with open_kb(tmp_path / "kb", create=False) as kb:
        kb.ingest([docs])
        assert_consistent(kb)
        assert kb.search("keep it dry", 1, "vector")[0].doc_id == "b.md"
        kb.store.remove_document("c.md")
    db = raw(tmp_path / "kb")
    assert db.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] \
        == db.execute("SELECT count(*) FROM chunks").fetchone()[0]
