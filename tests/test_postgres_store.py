"""What only the Postgres store has: versioned migrations, the text search configuration,
clear connection errors, and two ingests of the same folder at once."""

from __future__ import annotations

import threading

import psycopg
import pytest
from conftest import write_docs

from ragloop.core.config import Settings
from ragloop.core.errors import ConfigError
from ragloop.kb import KnowledgeBase
from ragloop.storage.postgres import schema as pg_schema
from ragloop.storage.postgres.store import PostgresStore


@pytest.fixture(scope="module")
def embedder():
    from ragloop.embed.local import LocalEmbedder

    return LocalEmbedder()


def test_migrations_are_versioned_and_applied_once(pg_url) -> None:
    PostgresStore(pg_url).close()
    PostgresStore(pg_url).close()  # a second open applies nothing
    with psycopg.connect(pg_url) as conn:
        versions = [r[0] for r in conn.execute(
            "SELECT version FROM schema_version ORDER BY version")]
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        indexes = {r[0] for r in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'postings'")}
    assert versions == [m.version for m in pg_schema.MIGRATIONS] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert {"meta", "documents", "sections", "chunks", "embeddings", "runs", "events",
            "postings", "term_stats", "fts_stats"} <= tables
    assert {"postings_impact", "postings_chunk"} <= indexes


def test_concurrent_opens_of_a_fresh_database_migrate_once(pg_url) -> None:
    errors: list[BaseException] = []

    def open_close() -> None:
        try:
            PostgresStore(pg_url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_close) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with psycopg.connect(pg_url) as conn:
        count = conn.execute("SELECT count(*) FROM schema_version").fetchone()[0]
        assert count == len(pg_schema.MIGRATIONS)


def test_a_text_search_configuration_from_before_languages_names_the_language(
        pg_url, tmp_path, embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "viaggi.md").write_text(
        "# Politica viaggi\n\n## Approvazioni\nLe spese superiori a 2.500 euro devono essere"
        " approvate dal direttore finanziario.\n", encoding="utf-8")
    italian = f"{pg_url}&ts_config=italian"
    with KnowledgeBase.open(italian, Settings(), embedder=embedder) as kb:
        assert kb.store.language() == "it"
        kb.ingest([docs])
        # Italian stemming: "approvata" and "approvate" meet at the same term
        hit = kb.search("spesa approvata", k=1, mode="bm25")[0]
        assert hit.doc_id == "viaggi.md"
    store = PostgresStore(pg_url)  # no parameter: the recorded language is used
    assert store.language() == "it" and store.get_meta("language") == "it"
    store.close()
    with pytest.raises(ConfigError, match="language is 'it', not 'en'"):
        PostgresStore(f"{pg_url}&ts_config=english")


def test_an_unknown_text_search_configuration_is_a_clear_error(pg_url) -> None:
    with pytest.raises(ConfigError, match="Unknown text search configuration 'klingon'"):
        PostgresStore(f"{pg_url}&ts_config=klingon")


def test_a_server_that_is_not_there_is_a_clear_error(tmp_path) -> None:
    url = f"postgresql://postgres:secret@/nope?host={tmp_path}"
    with pytest.raises(ConfigError, match="is the server running") as info:
        KnowledgeBase.open(url)
    assert "secret" not in str(info.value)


def test_two_ingests_of_the_same_folder_at_once_write_each_document_once(pg_url, tmp_path,
                                                                        embedder) -> None:
    docs = write_docs(tmp_path / "docs")
    for i in range(40):
        (docs / f"notes/note{i:02}.md").parent.mkdir(exist_ok=True)
        (docs / f"notes/note{i:02}.md").write_text(
            f"# Note {i}\n\n## Body\nMeeting {i} decided item {i * 7} about topic {i}.\n")
    bases = [KnowledgeBase.open(pg_url, Settings(), embedder=embedder) for _ in range(2)]
    barrier = threading.Barrier(2)
    for base in bases:  # both read "nothing stored yet" before either writes
        real = base.store.content_hashes

        def hashes(real=real):
            found = real()
            barrier.wait(timeout=60)
            return found

        base.store.content_hashes = hashes  # type: ignore[method-assign]
    reports: list = []
    errors: list[BaseException] = []

    def ingest(base: KnowledgeBase) -> None:
        try:
            reports.append(base.ingest([docs]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ingest, args=(b,)) for b in bases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert [r.added for r in reports] == [43, 43]  # both thought every document new
    with psycopg.connect(pg_url) as conn:
        docs_n = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
        dupes = conn.execute("SELECT count(*) FROM (SELECT doc_id, section, ord FROM chunks"
                             " GROUP BY 1, 2, 3 HAVING count(*) > 1) d").fetchone()[0]
        sections = conn.execute("SELECT count(*) FROM sections").fetchone()[0]
    assert docs_n == 43 and dupes == 0
    docs_list = bases[0].documents()
    assert sum(d.sections for d in docs_list) == sections
    assert sum(d.chunks for d in docs_list) == bases[0].store.chunk_count()
    hits = bases[1].search("Meeting 17 decided", k=3, mode="bm25")
    assert hits[0].doc_id == "notes/note17.md"
    assert len({h.chunk_id for h in hits}) == len(hits)
    for base in bases:
        base.close()
