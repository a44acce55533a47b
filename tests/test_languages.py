"""A language per knowledge base: detection, the analyzer on both sides, the KB record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL_DOCS, write_docs

from ragloop.core.config import LOCAL_EMBEDDER, MULTILINGUAL_EMBEDDER, Settings
from ragloop.core.errors import LanguageMismatchError
from ragloop.kb import KnowledgeBase
from ragloop.retrieval.languages import detect_language
from ragloop.retrieval.query_text import query_terms

FIXTURES = Path(__file__).parent / "fixtures" / "lang"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (
            "La pensione di vecchiaia spetta a chi ha compiuto 67 anni e ha versato i contributi",
            "it",
        ),
        ("大熊猫主要吃竹子，每天要吃十二到三十八公斤的竹子。", "zh"),
        ("ים המלח הוא המקום הנמוך ביותר על פני כדור הארץ", "he"),
        ("The sensor is waterproof to a depth of one metre for thirty minutes.", "en"),
        ("長城は中国の古代の防御施設です。", "ja"),
        (
            "The Great Wall 长城是中国古代的军事防御工程 was built over centuries 秦始皇统一中国",
            "mixed",
        ),
        ("", "en"),
    ],
)
def test_language_is_detected_from_text(text: str, code: str) -> None:
    assert detect_language([text]) == code


def test_chinese_queries_become_the_bigrams_the_index_holds() -> None:
    assert query_terms("大熊猫吃竹子", "zh") == ["大熊", "熊猫", "猫吃", "吃竹", "竹子"]
    # the English path is unchanged: one token, English stop words
    assert query_terms("大熊猫吃竹子", "en") == ["大熊猫吃竹子"]


def test_italian_stop_words_come_from_its_own_list() -> None:
    assert query_terms("Dove si trova il vulcano più alto?", "it") == [
        "trova",
        "vulcano",
        "più",
        "alto",
    ]


def _kb(path: Path | str, lang: str, **kw: object) -> KnowledgeBase:
    base = KnowledgeBase.open(path, Settings(kb=str(path)), **kw)
    base.ingest(FIXTURES / lang)
    return base


@pytest.mark.parametrize(
    ("lang", "query", "doc_id"),
    [
        # Italian stemming: the plural "attivi" finds "il vulcano attivo" (English: no match)
        ("it", "attivi", "vulcani.md"),
        # Chinese bigrams: the English analyzer made each sentence a single token
        ("zh", "熊猫吃什么", "熊猫.md"),
        # Hebrew: lower-casing only, words as written
        ("he", "הסולטן סולימאן", "ירושלים.md"),
    ],
)
def test_kb_detects_its_language_and_searches_with_its_analyzer(
    tmp_path: Path, lang: str, query: str, doc_id: str
) -> None:
    with _kb(tmp_path / "kb", lang) as base:
        assert base.store.get_meta("language") == lang
        assert base.store.get_meta("embedder") == MULTILINGUAL_EMBEDDER
        hits = base.search(query, k=1, mode="bm25")
        assert hits and hits[0].doc_id == doc_id
    # reopened (a new process would do the same): the index and the queries keep the language
    with KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb"))) as base:
        assert base.search(query, k=1, mode="bm25")[0].doc_id == doc_id
        assert base.search(query, k=1, mode="hybrid")[0].doc_id == doc_id


def test_another_language_later_is_a_clear_error(tmp_path: Path) -> None:
    _kb(tmp_path / "kb", "it").close()
    with pytest.raises(LanguageMismatchError, match=r"Italian.*'fr'"):
        KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb")), language="fr")


def test_language_asked_for_wins_over_detection(tmp_path: Path) -> None:
    with _kb(tmp_path / "kb", "it", language="mixed") as base:
        assert base.store.get_meta("language") == "mixed"
        # mixed: no stemmer, so the plural does not find the singular; the word itself does
        assert base.search("Vesuvio", k=1, mode="bm25")[0].doc_id == "vulcani.md"


def test_english_kb_keeps_minilm_and_a_kb_without_language_is_english(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", SMALL_DOCS)
    with KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb"))) as base:
        base.ingest(docs)
        assert base.store.get_meta("language") == "en"
        assert base.store.get_meta("embedder") == LOCAL_EMBEDDER
        base.store.db.execute("DELETE FROM meta WHERE key='language'")  # a KB from before
    with KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb"))) as base:
        assert base.language == "en"
        assert base.search("approved by the line manager", k=1, mode="bm25")
    with pytest.raises(LanguageMismatchError):
        KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb")), language="it")


def test_e5_embeds_a_sentence_and_its_translation_close() -> None:
    from ragloop.embed import make_embedder

    e5 = make_embedder(MULTILINGUAL_EMBEDDER)
    en = e5.embed(
        [
            "The cat sleeps on the sofa.",
            "Paris is the capital of France.",
            "Photosynthesis converts light into chemical energy.",
        ]
    )
    for other in (
        [
            "Il gatto dorme sul divano.",
            "Parigi è la capitale della Francia.",
            "La fotosintesi converte la luce in energia chimica.",
        ],
        ["猫在沙发上睡觉。", "巴黎是法国的首都。", "光合作用将光转化为化学能。"],
    ):
        sims = en @ e5.embed(other).T
        for i in range(3):  # each translation beats every unrelated pair in its row and column
            assert sims[i, i] > np.delete(sims[i], i).max() + 0.05
            assert sims[i, i] > np.delete(sims[:, i], i).max() + 0.05
    # queries carry e5's "query: " prefix: another vector than the same text as a passage
    q = e5.embed_query(["capital of France"])[0]
    assert float(q @ e5.embed(["capital of France"])[0]) < 0.999
    assert int(np.argmax(en @ q)) == 1


def test_a_word_the_analyzer_drops_finds_nothing_instead_of_crashing(small_kb) -> None:
    # en_stem drops tokens over 40 bytes: a Chinese sentence is one such token in English
    question = "在燕豪芬举行的2008年欧锦赛中，费尔德海斯打破了什么世界纪录"
    assert small_kb.search(question, mode="bm25") == []


# (language, question, a phrase the answer quotes, the cited doc, an unanswerable question)
ASK = [
    (
        "it",
        "Quanti anni di contributi servono per la pensione di vecchiaia?",
        "20 anni di contributi",
        "pensioni.md",
        "Chi ha vinto i mondiali di calcio del 2006?",
    ),
    ("zh", "大熊猫每天吃多少竹子？", "三十八公斤", "熊猫.md", "谁发明了电话？"),
    ("he", "כמה תושבים גרים בירושלים?", "כמיליון תושבים", "ירושלים.md", 'מי כתב את התנ"ך?'),
]


@pytest.fixture(scope="module")
def lang_kbs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("langkbs")
    for lang, *_ in ASK:
        _kb(root / lang, lang).close()
    return {lang: root / lang for lang, *_ in ASK}


def _ask(kb: Path, question: str) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragloop",
            "ask",
            question,
            "--kb",
            str(kb),
            "--route",
            "agent",
            "--driver",
            "pipeline",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "RAGLOOP_MODEL": "offline"},
    )
    return json.loads(out.stdout)


# the opening of the "not in the knowledge base" answer: the KB language's where lang/*.json
# writes one, else English
NOT_SAID = {"en": "The knowledge base does not say", "it": "La base di conoscenza non dice",
            "zh": "知识库没有说"}


@pytest.mark.parametrize(("lang", "question", "quote", "doc_id", "unanswerable"), ASK)
def test_offline_ask_answers_in_the_kb_language_with_a_citation(
    lang_kbs, lang, question, quote, doc_id, unanswerable
) -> None:
    result = _ask(lang_kbs[lang], question)
    assert result["status"] == "answered"
    assert quote in result["answer"]
    assert doc_id in {c["doc_id"] for c in result["citations"]}
    # a question the KB cannot answer: the KB language's fixed phrase, nothing cited
    result = _ask(lang_kbs[lang], unanswerable)
    assert result["status"] == "unanswerable"
    assert result["answer"].startswith(NOT_SAID.get(lang, NOT_SAID["en"]))
    assert not result["citations"]


def test_sentences_end_at_chinese_and_hebrew_punctuation() -> None:
    from ragloop.language.text import ENGLISH_READING

    split_sentences = ENGLISH_READING.split_sentences

    assert split_sentences("长城很长。它在中国！你去过吗？“好。”他说") == [
        "长城很长。",
        "它在中国！",
        "你去过吗？",
        "“好。”",
        "他说",
    ]
    assert split_sentences("ירושלים היא עיר עתיקה. בה גרים כמיליון תושבים.") == [
        "ירושלים היא עיר עתיקה.",
        "בה גרים כמיליון תושבים.",
    ]
    # English as before: no split before a lower-case word or after an abbreviation
    assert split_sentences("See e.g. the list. it goes on. Then stop.") == [
        "See e.g. the list. it goes on.",
        "Then stop.",
    ]


@pytest.mark.parametrize(
    ("lang", "query", "doc_id"),
    [("it", "attivi", "vulcani.md"), ("zh", "熊猫吃什么", "熊猫.md"),
     ("he", "הסולטן סולימאן", "ירושלים.md")],
)
def test_postgres_kb_language_picks_the_sqlite_stores_analyzer(
        pg_url: str, tmp_path: Path, lang: str, query: str, doc_id: str) -> None:
    """Italian stemming, Chinese bigrams and Hebrew words in Postgres as in SQLite (a
    Chinese sentence is no longer one lexeme of `simple`): the same chunks, the same scores."""
    with _kb(pg_url, lang) as pg, _kb(tmp_path / "kb", lang) as sqlite:  # language detected
        assert pg.store.language() == pg.store.get_meta("language") == lang
        hits = pg.search(query, k=3, mode="bm25")
        assert hits[0].doc_id == doc_id
        expected = sqlite.search(query, k=3, mode="bm25")
        assert [(h.doc_id, h.text) for h in hits] == [(h.doc_id, h.text) for h in expected]
        assert [h.score for h in hits] == pytest.approx([h.score for h in expected], rel=1e-4)
    with pytest.raises(LanguageMismatchError):
        KnowledgeBase.open(pg_url, Settings(kb=pg_url), language="en" if lang != "en" else "it")


def test_a_beir_corpus_sets_the_language_of_a_new_kb(tmp_path: Path) -> None:
    from ragloop.eval.datasets import ingest_corpus

    corpus = tmp_path / "corpus.jsonl"
    rows = [
        {"_id": "etna", "title": "Etna", "text": "L'Etna è il vulcano attivo più alto d'Europa."},
        {
            "_id": "inps",
            "title": "Pensioni",
            "text": "La domanda di pensione si presenta all'INPS.",
        },
    ]
    corpus.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    with KnowledgeBase.open(tmp_path / "kb", Settings(kb=str(tmp_path / "kb"))) as base:
        assert ingest_corpus(base, corpus) == 2
        assert base.store.get_meta("language") == "it"
        assert base.store.get_meta("embedder") == MULTILINGUAL_EMBEDDER
        assert base.search("attivi", k=1, mode="bm25")[0].doc_id == "etna"


def test_month_names_come_from_one_table_for_every_date_rule() -> None:
    """The quantities reader, the planner's date split and the router's date cue all read the
    months of language/lang/en.json (through retrieval/languages.py); "Sept", which the
    planner read and quantities did not, is now a month for both."""
    from ragloop.language import text
    from ragloop.offline import planner, router
    from ragloop.retrieval.languages import month_names, month_pattern

    en = text.ENGLISH_READING.rules
    assert month_names("en") == en.months and len(month_names("en")) == 12
    assert month_pattern("en") in en.date.pattern and month_pattern("en") in planner.ENGLISH.date
    assert month_pattern("en", short=False) in router.ENGLISH_CUES.date.pattern
    # a language whose data file has no month names reads English's (as before it had a file)
    assert month_names("it") == month_names("en") == month_names(None)
    found = text.ENGLISH_READING.quantities("Due 5 Sept 2024, paid Sep 9, 2024 and 2024-10-01")
    dates = [q.value for q in found if q.kind == "date"]
    assert dates == ["2024-09-05", "2024-09-09", "2024-10-01"]
    assert planner.ENGLISH.date_parts("Revenue in Sept 2024 vs March 2025") == [
        "Revenue in Sept 2024", "Revenue in March 2025"]
    cue = router.ENGLISH_CUES.date
    assert cue.search("what changed in december?")
    assert not cue.search("the dec unit")  # the router's cue stays full names only
