"""One sentence splitter, one amount parser, one definition of CJK text (issue 42.5): the
readers of sentences, amounts and scripts read core/script.py and language/amounts.py, and read
English, Italian and Chinese text as the copies they replaced did (the old patterns are
written out here, as they were, to compare against)."""

from __future__ import annotations

import re

import pytest

from ragloop.core import script
from ragloop.core.answer_stream import sentence_pieces
from ragloop.core.conversation import narrowed
from ragloop.eval import metrics
from ragloop.language.amounts import amount_value, without_thousands
from ragloop.language.text import reading
from ragloop.retrieval.languages import bigram_text, detect_language

# the copies that were replaced (main before issue 42.5)
_OLD_READING_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9£$€\u05d0-\u05ea])"
                              r"|(?<=[。！？])(?![”」』）])\s*|(?<=[。！？][”」』）])\s*|(?<=\u05c3)\s*")
_OLD_STREAM_END = re.compile(r"(?:[.!?]['\")\]]*(?:\s*\[\d+\])*|\n)\s+")
_OLD_METRICS_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_OLD_INDEX_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"

SAMPLES = [
    "The CFO approves trips above £2,500 (see Sec. 4). Flights are booked 14 days ahead, e.g. "
    "by the travel desk! Is version 3.5 supported? Mr. Smith says yes.",
    "Il treno parte alle 7.30 dalla stazione. Il biglietto costa 3,50 euro. Chi lo "
    "approva? Il Dott. Rossi, cfr. art. 5! Vedi l'articolo 5.",
    "差旅需要首席财务官批准。机票需提前14天预订！“好的。”谁来审批？财务部",
    "First line\n\n- a list item. Another\n# Heading\nLast one.",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_the_sentence_end_is_the_one_it_was(text):
    from ragloop.language import text as text_module

    assert text_module._SENTENCE_END.split(text) == _OLD_READING_END.split(text)


def test_the_splitter_reads_english_italian_and_chinese_sentence_ends():
    en = reading("en").split_sentences(SAMPLES[0])
    assert en == ["The CFO approves trips above £2,500 (see Sec. 4).",
                  "Flights are booked 14 days ahead, e.g. by the travel desk!",
                  "Is version 3.5 supported?", "Mr. Smith says yes."]
    it = reading("it").split_sentences(SAMPLES[1])
    assert it[0] == "Il treno parte alle 7.30 dalla stazione."  # a decimal is no end
    assert it[1:] == ["Il biglietto costa 3,50 euro.", "Chi lo approva?",
                      "Il Dott. Rossi, cfr. art. 5!",  # its abbreviations
                      "Vedi l'articolo 5."]
    zh = reading("zh").split_sentences(SAMPLES[2])
    assert zh == ["差旅需要首席财务官批准。", "机票需提前14天预订！", "“好的。”",
                  "谁来审批？", "财务部"]


@pytest.mark.parametrize("text", [*SAMPLES, "The CFO approves [1]. Flights: 14 days [2][3]!\nOk"])
def test_streamed_pieces_join_back_and_cut_latin_text_where_they_did(text):
    pieces = sentence_pieces(text)
    assert "".join(pieces) == text
    if not script.UNSPACED.search(text):  # Latin text: the same pieces as before
        old, start = [], 0
        for m in _OLD_STREAM_END.finditer(text):
            old.append(text[start:m.end()])
            start = m.end()
        assert pieces == [*old, text[start:]] if start < len(text) else old


def test_a_chinese_answer_streams_a_sentence_at_a_time():
    # before, a Chinese answer had no cut (。 takes no space after it) and streamed whole
    pieces = sentence_pieces("批准[1]。预订！“好的。”最后")
    assert pieces == ["批准[1]。", "预订！", "“好的。”", "最后"]


def test_one_definition_of_cjk_text():
    assert script.CJK_CHARS == _OLD_INDEX_CJK
    for ch in "中の한Ａ가豈":
        assert bool(script.UNSPACED.match(ch)) == bool(_OLD_METRICS_CJK.match(ch))
    assert bigram_text("首席财务官") .split() == ["首席", "席财", "财务", "务官"]
    assert detect_language(["差旅需要首席财务官批准。"]) == "zh"
    # the eval counts a Chinese character as a word; Korean words are spaced
    assert metrics.answer_words("批准 approves") == 3
    assert metrics.answer_words("한국어 문장") == 2


def test_first_sentence_and_titles_read_the_same_sentence_ends():
    assert metrics.first_sentence("需要批准。 其他") == "需要批准。"
    assert metrics.first_sentence("需要批准[1]。其他") == "需要批准[1]"
    assert metrics.first_sentence("The CFO approves [1]. More.") == "The CFO approves [1]"
    assert narrowed("电池续航多久？", "S200。") == "电池续航多久 (S200)？"


def test_one_amount_parser():
    assert amount_value("2,500") == 2500.0 and amount_value("12.5") == 12.5
    assert without_thousands("3.350 km, 3,350 km, 3\u00a0350 km, 3.5 km") == (
        "3350 km, 3350 km, 3350 km, 3.5 km")
    money = reading("en").quantities("Trips above £2,500 and €1.5m")
    assert [(q.kind, q.value) for q in money] == [("money:£", "2500"), ("money:€", "1.5e+06")]
    # the eval matches an answer's figure however its thousands are written
    assert metrics.exact_match("3,350", "It is 3.350 km long.")
    assert metrics.normalize_answer("£2,500") == "£ 2500"


def test_stop_words_and_detection_words_are_the_language_files():
    import json
    from importlib import resources

    from ragloop.retrieval.languages import stop_words
    from ragloop.retrieval.query_text import STOP_WORDS, query_terms

    folder = resources.files("ragloop.language") / "lang"
    for code in ("en", "it", "fr", "zh", "ja", "he"):
        data = json.loads((folder / f"{code}.json").read_text(encoding="utf-8"))
        assert stop_words(code) == frozenset(data["search"]["stop_words"]), code
    assert stop_words("en") == STOP_WORDS and "the" in STOP_WORDS
    assert query_terms("Qual è la capitale della Francia?", "it") == ["qual", "capitale",
                                                                      "francia"]
    assert query_terms("What is the capital of France?", None) == ["capital", "france"]
    assert detect_language(["Il treno della mattina parte per la città e il mare"]) == "it"
    assert detect_language(["Le train du matin part pour la ville et les plages"]) == "fr"
