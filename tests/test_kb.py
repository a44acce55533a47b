"""The knowledge base end to end: real SQLite file, real indexes, real MiniLM vectors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import SMALL_DOCS, write_docs

from ragloop.core.config import Settings
from ragloop.core.errors import EmbedderMismatchError, EmptyQueryError, NotFoundError
from ragloop.kb import KnowledgeBase

QUERY_SYNTAX = [
    '"ingress protection',
    "(battery OR life",
    "battery AND NOT life",
    "NEAR(approval, cfo)",
    "approv*",
    "-waterproof sensor",
    "title:approval",
    "battery life? 💧🌊",
    "a:b:c ((battery)) \"\" '' ^~ {}[]",
    "AND OR NOT",
]


@pytest.mark.parametrize("query", QUERY_SYNTAX)
@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_any_user_text_is_a_valid_query(small_kb: KnowledgeBase, query: str, mode: str) -> None:
    hits = small_kb.search(query, k=3, mode=mode)
    assert hits, f"{query!r} found nothing in {mode} mode"


@pytest.mark.parametrize("query", ["", "   ", "?!", "💧"])
def test_empty_query_is_a_clear_error(small_kb: KnowledgeBase, query: str) -> None:
    with pytest.raises(EmptyQueryError, match="empty"):
        small_kb.search(query)


def test_hits_carry_section_and_component_ranks(small_kb: KnowledgeBase) -> None:
    hits = small_kb.search("who approves expenses above 2,500", k=3)
    top = hits[0]
    assert (top.doc_id, top.section, top.section_title) == (
        "policies/travel.md", "4.2", "4.2 Approval thresholds")
    assert top.bm25_rank == 1 and top.bm25_score > 0
    assert top.vector_rank is not None and 0 < top.vector_score <= 1
    assert top.score == pytest.approx(1 / 61 + 1 / (60 + top.vector_rank))
    # vocabulary gap: no shared word with "waterproof", found by meaning
    vec = small_kb.search("is it waterproof", k=1, mode="vector")[0]
    assert vec.doc_id == "products/sensor.md" and vec.bm25_rank is None


def test_sections_and_documents(small_kb: KnowledgeBase) -> None:
    s = small_kb.section("policies/travel.md", "4.2")
    assert s.title_path == ("Travel and Expense Policy", "4 Approvals", "4.2 Approval thresholds")
    assert "Chief Financial Officer" in s.text and "Booking" not in s.text
    docs = {d.doc_id: d for d in small_kb.documents()}
    assert set(docs) == set(SMALL_DOCS)
    assert docs["policies/travel.md"].title == "Travel and Expense Policy"
    assert docs["policies/travel.md"].sections >= 3
    with pytest.raises(NotFoundError, match="its sections: "):
        small_kb.section("policies/travel.md", "9.9")
    with pytest.raises(NotFoundError, match="ragloop docs"):
        small_kb.section("nope.md", "1")


def test_reingest_is_idempotent_and_an_edit_rechunks_one_file(tmp_path) -> None:
    docs = write_docs(tmp_path / "docs")
    for i in range(30):
        (docs / f"notes/note{i:02}.md").parent.mkdir(exist_ok=True)
        (docs / f"notes/note{i:02}.md").write_text(
            f"# Note {i}\n\n## Body\nMeeting {i} decided item {i * 7} about topic {i}.\n")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        first = kb.ingest([docs])
        assert (first.added, first.updated, first.unchanged) == (33, 0, 0)
        chunks = kb.store.chunk_count()
        second = kb.ingest([docs])
        assert (second.added, second.updated, second.unchanged, second.chunks) == (0, 0, 33, 0)
        assert kb.store.chunk_count() == chunks
        before = {d.doc_id: d.content_hash for d in kb.documents()}
        (docs / "notes/note05.md").write_text("# Note 5\n\n## Body\nThe zebra budget moved.\n")
        third = kb.ingest([docs])
        assert (third.added, third.updated, third.unchanged) == (0, 1, 32)
        assert third.embedded == 1  # only the edited chunk met the embedder
        after = {d.doc_id: d.content_hash for d in kb.documents()}
        assert [d for d in after if after[d] != before[d]] == ["notes/note05.md"]
        assert kb.search("zebra budget", k=1)[0].doc_id == "notes/note05.md"
        assert not any(h.doc_id == "notes/note05.md" for h in kb.search("Meeting 5 decided", k=3)
                       if "item 35" in h.text)
        assert kb.remove("notes/note05.md")
        assert not kb.remove("notes/note05.md")
        assert all(h.doc_id != "notes/note05.md" for h in kb.search("zebra budget", k=5))


def test_bad_files_are_reported_and_the_rest_goes_in(tmp_path) -> None:
    docs = write_docs(tmp_path / "docs")
    (docs / "empty.md").write_bytes(b"")
    (docs / "binary.txt").write_bytes(bytes(range(256)) * 20)
    (docs / "latin.txt").write_bytes("Café menu: crème brûlée costs £4.\n".encode("cp1252"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7 this is not really a pdf")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # a truncated image
    (docs / "drawing.odg").write_bytes(b"PK\x03\x04")
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        report = kb.ingest([docs])
        failed = {p.split("/")[-1]: reason for p, reason in report.failed}
        assert set(failed) == {"empty.md", "binary.txt", "broken.pdf", "image.png"}
        assert "empty" in failed["empty.md"]
        assert "binary" in failed["binary.txt"]
        assert "image" in failed["image.png"]  # unreadable, or OCR not installed
        assert report.unsupported == [str(docs / "drawing.odg")]
        assert report.added == len(SMALL_DOCS) + 1
        hit = kb.search("crème brûlée", k=1, mode="bm25")[0]
        assert hit.doc_id == "latin.txt" and "£4" in hit.text


def test_another_embedder_on_open_is_a_clear_error(small_kb_template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    with pytest.raises(EmbedderMismatchError, match="all-MiniLM-L6-v2"):
        KnowledgeBase.open(folder, Settings(embedder="openai:text-embedding-3-small"))


def test_indexes_are_rebuilt_from_the_record(small_kb_template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    shutil.rmtree(folder / "index")
    with KnowledgeBase.open(folder) as kb:
        assert kb.search("CR123A battery", k=1)[0].doc_id == "products/sensor.md"
        assert kb.store.index_sizes() == (kb.store.chunk_count(), kb.store.chunk_count())


def ragloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300)


def test_cli_search_docs_section_rm(small_kb_template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    kb = ["--kb", str(folder)]
    res = ragloop("search", "who signs off big trips?", "-k", "2", "--json", *kb)
    assert res.returncode == 0, res.stderr
    hits = json.loads(res.stdout)
    assert len(hits) == 2 and {"doc_id", "section", "bm25_rank", "vector_rank"} <= set(hits[0])
    res = ragloop("search", "((battery", "--mode", "bm25", *kb)
    assert res.returncode == 0, res.stderr
    res = ragloop("search", "  ", *kb)
    assert res.returncode == 2 and "empty" in res.stderr
    res = ragloop("docs", "--json", *kb)
    assert {d["doc_id"] for d in json.loads(res.stdout)} == set(SMALL_DOCS)
    res = ragloop("section", "policies/travel.md", "4.2", "--json", *kb)
    assert json.loads(res.stdout)["title"] == "4.2 Approval thresholds"
    res = ragloop("section", "policies/travel.md", "7", *kb)
    assert res.returncode == 2 and "has no section" in res.stderr
    assert ragloop("rm", "org/leadership.md", *kb).returncode == 0
    res = ragloop("rm", "org/leadership.md", *kb)
    assert res.returncode == 2 and "No document" in res.stderr


def test_hnsw_path_forgets_removed_chunks_across_reopen(small_kb_template, tmp_path,
                                                        monkeypatch) -> None:
    """Force the HNSW path (not the exact scan of small KBs): removals and reopen hold."""
    from ragloop.storage.sqlite import indexes

    monkeypatch.setattr(indexes, "EXACT_SEARCH_BELOW", 0)
    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    with KnowledgeBase.open(folder) as kb:
        before = {h.doc_id for h in kb.search("CR123A battery life", k=10, mode="vector")}
        assert "products/sensor.md" in before
        assert kb.remove("products/sensor.md")
        after = {h.doc_id for h in kb.search("CR123A battery life", k=10, mode="vector")}
        assert "products/sensor.md" not in after and after
    with KnowledgeBase.open(folder) as kb:  # loaded from the saved graph + tombstone sidecar
        assert not (folder / "index" / "state.json").read_text().count("null")
        hits = kb.search("CR123A battery life", k=10, mode="vector")
        assert {h.doc_id for h in hits} == after
        assert kb.store.index_sizes()[1] == kb.store.chunk_count()


def test_an_index_folder_of_an_older_format_is_rebuilt(small_kb_template, tmp_path) -> None:
    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    state = folder / "index" / "state.json"
    state.write_text(json.dumps({"generation": json.loads(state.read_text())["generation"]}))
    (folder / "index" / "vectors.hnsw").unlink()
    with KnowledgeBase.open(folder) as kb:
        assert kb.search("CR123A battery", k=1, mode="vector")[0].doc_id == "products/sensor.md"
    assert (folder / "index" / "vectors.hnsw").exists()
