"""The offline rules' vocabulary is data per language (offline/lang/<code>.json), not regexes
in code: every word the rules read comes from the file, and a language with no file reads
English's."""

from __future__ import annotations

import json
from importlib import resources

from ragloop.offline import planner, support, text
from ragloop.offline.vocabulary import ENGLISH_WORDS, vocabulary


def _english() -> dict:
    return json.loads((resources.files("ragloop.offline") / "lang" / "en.json").read_text())


def test_the_rules_read_the_english_file() -> None:
    data = _english()
    assert ENGLISH_WORDS.data == data
    question_words = frozenset(data["question_words"])
    assert question_words == text.QUESTION_WORDS
    assert text.QUESTION_WORDS <= text.STOP
    # every ordinal of the file turns a spelled-out quarter into the code documents write
    for word, n in data["periods"]["quarter"]["ordinals"].items():
        assert (
            planner.quarter_codes(f"Revenue in the {word} quarter of 2024")
            == f"Revenue in Q{n} 2024"
        )
    for word in data["periods"]["year_phrases"]:
        assert text.is_period(f"{word}-2025") and not text.is_code(f"{word}-2025")
    assert all(text.is_period(c) for c in ("Q1", "Q4", "H2", "FY2025", "FY25"))
    assert not text.is_period("Q5") and not text.is_period("H3")
    for unit in data["duration_units"]:
        found = text.quantities(f"It takes 3 {unit}s.")
        assert found and found[0].kind.startswith("duration:")
    for kind in data["document_kinds"]:
        refs = text.section_links(f"as set out in section 4.2 of the Travel {kind}.")
        assert refs and refs[0].doc_title == f"Travel {kind}"
    for abbreviation in data["abbreviations"]:
        assert len(text.split_sentences(f"It is set {abbreviation}. Then more.")) == 1
    claim_numbers = {w: data["number_words"][w] for w in data["claim_number_words"]}
    assert claim_numbers == support._NUMBER_WORDS


def test_a_language_with_no_file_reads_english() -> None:
    assert vocabulary("it").code == "en" and vocabulary("it").data == _english()
    assert vocabulary(None) is vocabulary("en")
