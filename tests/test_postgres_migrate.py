"""`ragloop migrate`: SQLite -> Postgres -> SQLite keeps every document, section, chunk and
vector (no re-embedding), and the search results come back identical."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ragloop.core.config import Settings
from ragloop.core.errors import EmbedderMismatchError
from ragloop.kb import KnowledgeBase
from ragloop.storage.migrate import migrate

QUERIES = ["who approves expenses above 2,500", "is it waterproof", "CR123A battery life",
           "chief financial officer", '"foo" AND (bar OR -baz*) NEAR: 🙂']


def _results(location: str, embedder) -> dict:
    out = {}
    with KnowledgeBase.open(location, Settings(), embedder=embedder) as kb:
        for q in QUERIES:
            for mode in ("bm25", "vector", "hybrid"):
                out[q, mode] = [(h.doc_id, h.section, h.text, round(h.score, 6))
                                for h in kb.search(q, k=5, mode=mode)]
        out["docs"] = [d.to_dict() | {"source": None} for d in kb.documents()]
        out["sections"] = [s.to_dict() for d in kb.documents() for s in kb.sections(d.doc_id)]
        out["meta"] = (kb.store.get_meta("embedder"), kb.store.get_meta("dim"))
    return out


@pytest.fixture(scope="module")
def embedder():
    from ragloop.embed.local import LocalEmbedder

    return LocalEmbedder()


def test_round_trip_sqlite_postgres_sqlite(small_kb_template, pg_url, tmp_path,
                                           embedder) -> None:
    report = migrate(str(small_kb_template), pg_url)
    assert report.documents == 3 and report.chunks > 3 and report.embeddings >= report.chunks
    back = tmp_path / "back"
    again = migrate(pg_url, str(back))
    assert (again.documents, again.chunks) == (report.documents, report.chunks)
    original = _results(str(small_kb_template), embedder)
    returned = _results(str(back), embedder)
    assert returned == original  # identical search results after the round trip
    in_pg = _results(pg_url, embedder)
    assert in_pg["docs"] == original["docs"] and in_pg["sections"] == original["sections"]
    assert in_pg["meta"] == original["meta"]
    for q in QUERIES:  # the same vectors: the same nearest neighbours in Postgres
        assert [r[:3] for r in in_pg[q, "vector"]] == [r[:3] for r in original[q, "vector"]]
    # nothing was re-embedded: the cached vectors were copied with the chunks
    with KnowledgeBase.open(str(back), Settings(), embedder=embedder) as kb:
        assert kb.store.get_meta("embedder") == original["meta"][0]


def test_migrate_cli_and_embedder_mismatch(small_kb_template, pg_url, tmp_path) -> None:
    res = subprocess.run([sys.executable, "-m", "ragloop", "migrate",
                          str(small_kb_template), pg_url, "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["documents"] == 3
    res = subprocess.run([sys.executable, "-m", "ragloop", "docs", "--kb", pg_url, "--json"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == 3
    other = tmp_path / "other"
    from ragloop.storage.sqlite.store import SqliteStore

    s = SqliteStore(other)
    s.set_meta("embedder", "openai:text-embedding-3-small")
    s.close()
    with pytest.raises(EmbedderMismatchError):
        migrate(pg_url, str(other))
