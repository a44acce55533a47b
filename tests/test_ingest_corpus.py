"""An eval corpus (BEIR corpus.jsonl) is written by the ingest pipeline's one write path: the
same batches, checks and stored rows as `ragloop ingest` of the same file."""

from __future__ import annotations

import json
import sqlite3

import pytest

from ragloop.eval.datasets import ingest_corpus
from ragloop.ingest import pipeline
from ragloop.kb import KnowledgeBase

CORPUS = [
    {"_id": "d1", "title": "T9 Sensor", "text": "The T9 sensor is rated IP67. " * 40},
    {"_id": "d2", "title": "Leadership", "text": "The CFO is Priya Raman."},
    {"_id": "d3", "title": "Travel", "text": "Expenses above 2,500 need the CFO."},
    {"_id": "d4", "title": "", "text": ""},  # nothing to index: skipped
]


@pytest.fixture(scope="module")
def embedder():
    from ragloop.embed.local import LocalEmbedder

    return LocalEmbedder()


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "beir" / "corpus.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(c) + "\n" for c in CORPUS), encoding="utf-8")
    return path


def _rows(kb: KnowledgeBase) -> tuple[list[tuple], list[tuple]]:
    db = sqlite3.connect(kb.store.db_path)
    try:
        chunks = db.execute(
            "SELECT id, doc_id, section, ord, text, embed_hash FROM chunks ORDER BY id"
        ).fetchall()
        docs = db.execute(
            "SELECT doc_id, title, content_hash FROM documents ORDER BY doc_id"
        ).fetchall()
    finally:
        db.close()
    return chunks, docs


def test_a_corpus_is_written_in_the_pipelines_batches(
    tmp_path, corpus, embedder, monkeypatch
) -> None:
    monkeypatch.setattr(pipeline, "WRITE_BATCH_CHUNKS", 1)  # one document per write
    with KnowledgeBase.open(tmp_path / "kb", embedder=embedder) as kb:
        assert ingest_corpus(kb, corpus) == 3
        assert kb.store.generation() == 3  # three writes: the pipeline's batching, not its own
        assert ingest_corpus(kb, corpus) == 0


def test_a_corpus_is_stored_as_ragloop_ingest_stores_it(tmp_path, corpus, embedder) -> None:
    with KnowledgeBase.open(tmp_path / "eval", embedder=embedder) as kb:
        assert ingest_corpus(kb, corpus) == 3
        by_eval = _rows(kb)
    with KnowledgeBase.open(tmp_path / "cli", embedder=embedder) as kb:
        report = kb.ingest([corpus])
        assert report.added == 3
        by_cli = _rows(kb)
    assert by_eval == by_cli and len(by_eval[0]) > 3
