"""The offline rules read the words of the knowledge base's language (language/lang/<code>.json):
an Italian KB's planner turns "terzo trimestre" into the code documents write and its answerer
reads "euro 12 milioni" as money; a Chinese KB's planner reads "第三季度" and "下半年"; an
English KB reads English's words as before. Real KBs, asked through the engine."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.core.config import Settings
from ragloop.core.events import PlanEvent
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.language.vocabulary import vocabulary

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

ITALIAN = {
    "relazione.md": "# Relazione trimestrale\n\n## Fatturato\n"
    "Nel Q3 2024 il fatturato di Lumetra è stato di euro 12 milioni, in crescita rispetto al"
    " Q2 2024.\n\nNel Q2 2024 il fatturato di Lumetra era stato di euro 9 milioni.\n",
    "comunicato.md": "# Comunicato stampa di Lumetra\n\n## Risultati\n"
    "Secondo il comunicato, nel Q3 2024 il fatturato di Lumetra è stato di euro 14 milioni.\n",
    "pensioni.md": "# Pensioni\n\n## Pensione di vecchiaia\nLa pensione di vecchiaia spetta a"
    " chi ha compiuto 67 anni di età e ha versato almeno 20 anni di contributi.\n",
}
CHINESE = {
    "季报.md": "# 季度报告\n\n## 营业收入\n"
    "公司Q3 2024的营业收入为1200万元，比上一季度增长百分之八。\n\n"
    "公司Q4 2024的营业收入为1500万元。\n",
    "熊猫.md": "# 大熊猫\n\n## 食物\n大熊猫主要吃竹子，每天要吃十二到三十八公斤的竹子。\n",
}


def _kb(root: Path, docs: dict[str, str]) -> Path:
    folder = root / "kb"
    with KnowledgeBase.open(folder, Settings(kb=str(folder))) as base:
        base.ingest([write_docs(root / "docs", docs)])
    return folder


@pytest.fixture(scope="module")
def italian_kb(tmp_path_factory) -> Path:
    return _kb(tmp_path_factory.mktemp("it"), ITALIAN)


@pytest.fixture(scope="module")
def chinese_kb(tmp_path_factory) -> Path:
    return _kb(tmp_path_factory.mktemp("zh"), CHINESE)


def _ask(kb: Path | KnowledgeBase, question: str, route: str = "agent") -> tuple[list[str], object]:
    plans: list[str] = []

    def seen(event: object) -> None:
        if isinstance(event, PlanEvent):
            plans.extend(event.sub_questions)

    if isinstance(kb, KnowledgeBase):
        return plans, _engine_ask(kb, question, route, seen)
    with KnowledgeBase.open(kb, Settings(kb=str(kb))) as base:
        return plans, _engine_ask(base, question, route, seen)


def _engine_ask(base: KnowledgeBase, question: str, route: str, seen) -> object:
    offline = base.settings.with_(model="offline")
    return Engine(base, offline).ask(question, route=route, driver="pipeline", on_event=seen)


def test_an_italian_kb_plans_and_answers_with_the_italian_words(italian_kb: Path) -> None:
    plans, result = _ask(italian_kb, "Qual è il fatturato del terzo trimestre 2024?")
    assert plans == ["Qual è il fatturato del Q3 2024?"]
    assert result.status == "answered"
    assert "euro 12 milioni" in result.answer
    assert "relazione.md" in {c.doc_id for c in result.citations}
    # the answerer reads "euro 12 milioni" as money (it.json's currency and scale words): the
    # two sources that disagree are told apart
    assert any("12 milioni" in c and "14 milioni" in c for c in result.conflicts)
    # a half year: one part per quarter ("secondo semestre" → Q3, Q4)
    plans, _ = _ask(italian_kb, "Qual è il fatturato di Lumetra nel secondo semestre 2024?")
    assert plans == [
        "Qual è il fatturato di Lumetra nel Q3 2024?",
        "Qual è il fatturato di Lumetra nel Q4 2024?",
    ]
    # small talk in Italian needs no search
    _, result = _ask(italian_kb, "Grazie mille!", route="auto")
    assert result.answer == vocabulary("it").get("small_talk.kinds")[0]["reply"]


def test_a_chinese_kb_plans_with_the_chinese_words(chinese_kb: Path) -> None:
    plans, result = _ask(chinese_kb, "2024年第三季度的营业收入是多少？")
    assert plans == ["Q3 2024的营业收入是多少？"]
    assert result.status == "answered" and "1200万元" in result.answer
    plans, _ = _ask(chinese_kb, "2024年下半年的营业收入是多少？")
    assert plans == ["Q3 2024的营业收入是多少？", "Q4 2024的营业收入是多少？"]
    _, result = _ask(chinese_kb, "你好！", route="auto")
    assert result.answer == vocabulary("zh").get("small_talk.kinds")[4]["reply"]


def test_an_english_kb_reads_english_words(small_kb) -> None:
    plans, _ = _ask(small_kb, "What was the revenue in the third quarter of 2024?")
    assert plans == ["What was the revenue in Q3 2024?"]
    # Italian words mean nothing to an English KB's planner
    plans, _ = _ask(small_kb, "Qual è il fatturato del terzo trimestre 2024?")
    assert plans == ["Qual è il fatturato del terzo trimestre 2024?"]


def test_the_text_helpers_read_the_language_being_read() -> None:
    sentence = "Costa euro 500, dura 3 mesi; vedi articolo 5."
    it, zh, en = reading("it"), reading("zh"), ENGLISH_READING
    assert [q.kind for q in it.quantities(sentence)] == ["money:€", "duration:mese"]
    assert it.section_refs(sentence) == ["5"]
    assert en.quantities(sentence) == [] and en.section_refs(sentence) == []  # English's words
    found = zh.quantities("营业收入为人民币1200万元，期限3个月")
    assert [(q.kind, q.value) for q in found] == [("money:¥", "1.2e+07"), ("duration:月", "3")]
    assert zh.section_refs("根据第5条的规定") == ["5"]
    assert zh.quantities("1984年6月至1985年1月任职") == []  # 6月 is June, not six months


def test_each_language_reads_its_own_stop_words() -> None:
    it, zh, en = reading("it"), reading("zh"), ENGLISH_READING
    assert {"il", "della", "che", "quale"} <= it.rules.stop  # stop and question words
    assert not {"the", "and", "which"} & it.rules.stop  # English's are no Italian stop words
    assert "the" not in zh.rules.stop
    assert {"the", "and", "which"} <= en.rules.stop and "della" not in en.rules.stop


def test_every_language_file_has_the_keys_of_english() -> None:
    folder = resources.files("ragloop.language") / "lang"

    tables = {"ordinals", "number_words", "unit_synonyms", "money_scales", "currency_codes"}

    def keys(d: object, at: str = "") -> set[str]:
        """Every key's path; a table's own words (ordinals, currencies) are the language's."""
        if not isinstance(d, dict):
            return set()
        inner = {x for k, v in d.items() if k not in tables for x in keys(v, f"{at}{k}.")}
        return {f"{at}{k}" for k in d} | inner

    # optional: a language with no month names reads English's; detection words are Latin's
    optional = {"months", "search.detect_words"}
    english = keys(json.loads((folder / "en.json").read_text(encoding="utf-8"))) - optional
    for code in ("it", "zh"):
        data = json.loads((folder / f"{code}.json").read_text(encoding="utf-8"))
        assert keys(data) - optional == english, code
        assert vocabulary(code).code == code
    # a file with its search words only: English's rule words, its own stop words
    for code in ("fr", "de", "es", "pt", "nl", "he", "ja"):
        data = json.loads((folder / f"{code}.json").read_text(encoding="utf-8"))
        assert set(data) == {"_about", "search"}, code
        assert vocabulary(code) is vocabulary("en")


def test_an_italian_kb_is_graded_alike_through_mcp_and_ask(italian_kb: Path) -> None:
    """The MCP server's graded search reads the KB's language as a run does: the same
    verdicts as `ask`'s first search, and not the ones English's words would give."""
    from ragloop.agent.search_grade import search_and_grade
    from ragloop.apps.mcp_server import KnowledgeBaseTools
    from ragloop.core.events import GradeEvent
    from ragloop.offline.grader import LocalGrader

    question = "Quanti anni di contributi servono per la pensione di vecchiaia?"
    # the MCP search reads as deep as single-shot: the same hits on both sides
    settings = Settings(kb=str(italian_kb), model="offline", search_k=15, single_k=5)
    with KnowledgeBase.open(italian_kb, settings) as base:
        grades: list[GradeEvent] = []
        Engine(base, settings).ask(question, route="single", on_event=lambda e: grades.append(
            e) if isinstance(e, GradeEvent) else None)
        tools = KnowledgeBaseTools(base, settings)
        found = tools.engine().graded_search(tools.toolbox, question)
        text = tools.search(question)
        english = search_and_grade(tools.toolbox, LocalGrader(base.embedder, reading=EN_RD),
                                   question, question)

    def verdicts(grade) -> list[tuple[int, str, float | None]]:
        return [(h.chunk_id, h.verdict, h.grade_score) for h in [*grade.kept, *grade.discarded]]

    asked = [(v["chunk_id"], v["verdict"], v["score"]) for v in grades[0].verdicts]
    assert verdicts(found.grade) == asked
    assert found.grade.missing == (grades[0].missing or "")
    assert all(h.text.strip()[:40] in text for h in found.grade.kept)
    # read with English's stop words the Italian question's words weigh otherwise
    assert verdicts(english.grade) != asked
