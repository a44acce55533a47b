"""The offline rules stem by the knowledge base's language (issue 42 point 3): the index's own
Snowball stemmer where tantivy has one, none for Chinese/Japanese/Korean, the light English one
for English; `benchmarks/offline_rules.py light-stem` reads every language the old way."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import ragloop.language.text as text
from ragloop.core.decisions import Evidence
from ragloop.language.text import LIGHT, light_stem, reading
from ragloop.offline.answerer import ExtractiveAnswerer
from ragloop.retrieval.languages import analyzer

TORINO = [Evidence(1, "torino.md", "1", "Torino", (
    "Torino è una città del Piemonte. La stazione ferroviaria di Porta Nuova fu costruita "
    "nel 1861. Il fiume Po attraversa la città."), 1, 0)]
QUESTION = "Quando furono costruite le stazioni ferroviarie di Porta Nuova?"


def test_each_language_reads_with_its_own_stemmer() -> None:
    assert reading("it").stemmer == "italian"
    assert reading("fr").stemmer == "french"
    assert reading("ru").stemmer == "russian"
    assert reading("zh").stemmer is None and reading("ja").stemmer is None
    assert reading("en").stemmer == LIGHT and reading(None).stemmer == LIGHT
    assert reading("he").stemmer == LIGHT and reading("mixed").stemmer == LIGHT


def test_an_italian_word_stems_as_the_index_stems_it() -> None:
    it, index = reading("it"), analyzer("it")
    for word in ("stazioni", "stazione", "ferroviarie", "costruita", "Costruite", "ferrovia"):
        assert it.stem(word) == index.analyze(word)[0], word
    assert it.stem("stazioni") == it.stem("stazione") != light_stem("stazioni")


def test_codes_numbers_and_short_words_are_only_lower_cased() -> None:
    it = reading("it")
    assert [it.stem(w) for w in ("S200", "1973", "Del", "FY2025")] == \
        ["s200", "1973", "del", "fy2025"]
    zh = reading("zh")
    assert zh.stem("APIs") == "apis" and zh.stem("知识") == "知识"
    assert reading("en").stem("running") == light_stem("running") == "run"


def test_an_italian_question_is_answered_from_another_inflection_of_its_words() -> None:
    # the sentence says "stazione ferroviaria … costruita", the question "stazioni ferroviarie
    # … costruite": the light English stemmer keeps them apart and the answerer declined
    draft = ExtractiveAnswerer(None, reading=reading("it")).answer(QUESTION, [], TORINO)
    assert draft.text.startswith("La stazione ferroviaria di Porta Nuova fu costruita nel 1861")
    light = replace(reading("it"), stemmer=LIGHT)
    declined = ExtractiveAnswerer(None, reading=light).answer(QUESTION, [], TORINO)
    assert declined.text.startswith("La base di conoscenza non dice"), declined.text


@pytest.fixture
def offline_rules(monkeypatch):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "offline_rules.py"
    spec = importlib.util.spec_from_file_location("offline_rules_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(text, "stemmer_of", text.stemmer_of)  # undone after the test
    yield module
    text.reading.cache_clear()


def test_the_light_stem_switch_reads_every_language_with_the_light_stemmer(offline_rules) -> None:
    assert reading("it").stemmer == "italian"
    offline_rules.RULES["light-stem"]()
    assert reading("it").stemmer == LIGHT and reading("fr").stemmer == LIGHT
    assert reading("it").stem("stazioni") == light_stem("stazioni")


def test_a_word_with_letters_beyond_ascii_is_one_word() -> None:
    """Accented Latin, Greek and Cyrillic letters belong to the word they are in (città was
    read as 'citt', Müller as 'M' and 'ller'; Москва as nothing), so its stem is the index's."""
    assert text.words("La città di Müller è più bella, Москва и Αθήνα; SR-332 e l'acqua") == [
        "La", "città", "di", "Müller", "è", "più", "bella", "Москва", "и", "Αθήνα", "SR-332",
        "e", "l'acqua"]
    it, ru = reading("it"), reading("ru")
    assert it.stem("città") == analyzer("it").analyze("città")[0]
    assert ru.stem("Москвы") == ru.stem("Москва") == analyzer("ru").analyze("Москва")[0]
    # the other scripts keep their own runs: CJK as character bigrams, Hebrew whole
    assert text.words("北京大学 Müller צה\"ל") == ["北京", "京大", "大学", "Müller", "צה\"ל"]
