"""The offline rules' vocabulary is data per language (language/lang/<code>.json), not regexes
in code: every word the rules read comes from the file (the planner's small talk and splits
and the router's cues too), and a language with no file reads English's."""

from __future__ import annotations

import copy
import json
from importlib import resources

from ragloop.language import support, text
from ragloop.language.text import ENGLISH_READING
from ragloop.language.vocabulary import ENGLISH_WORDS, Vocabulary, vocabulary
from ragloop.offline import planner
from ragloop.offline.planner import LocalPlanner
from ragloop.offline.router import ENGLISH_CUES, RuleRouter

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING
EN_WORDS = ENGLISH_WORDS


def _english() -> dict:
    return json.loads((resources.files("ragloop.language") / "lang" / "en.json").read_text())


EN = text.ENGLISH_READING


def test_the_rules_read_the_english_file() -> None:
    data = _english()
    assert ENGLISH_WORDS.data == data
    question_words = frozenset(data["question_words"])
    assert question_words <= EN.rules.stop
    # every ordinal of the file turns a spelled-out quarter into the code documents write
    for word, n in data["periods"]["quarter"]["ordinals"].items():
        assert (
            planner.ENGLISH.quarter_codes(f"Revenue in the {word} quarter of 2024")
            == f"Revenue in Q{n} 2024"
        )
    for word in data["periods"]["year_phrases"]:
        assert EN.is_period(f"{word}-2025") and not EN.is_code(f"{word}-2025")
    assert all(EN.is_period(c) for c in ("Q1", "Q4", "H2", "FY2025", "FY25"))
    assert not EN.is_period("Q5") and not EN.is_period("H3")
    for unit in data["duration_units"]:
        found = EN.quantities(f"It takes 3 {unit}s.")
        assert found and found[0].kind.startswith("duration:")
    for kind in data["document_kinds"]:
        refs = EN.section_links(f"as set out in section 4.2 of the Travel {kind}.")
        assert refs and refs[0].doc_title == f"Travel {kind}"
    for abbreviation in data["abbreviations"]:
        assert len(EN.split_sentences(f"It is set {abbreviation}. Then more.")) == 1
    claim_numbers = {w: data["number_words"][w] for w in data["claim_number_words"]}
    assert claim_numbers == support._claim_numbers(None)[0]


def test_a_language_with_no_file_reads_english() -> None:
    assert vocabulary("fr").code == "en" and vocabulary("fr").data == _english()
    assert vocabulary(None) is vocabulary("en")


def _with(change) -> Vocabulary:
    """English's words with one change: what a second language file would do."""
    data = copy.deepcopy(_english())
    change(data)
    return Vocabulary("en", data)


def test_every_small_talk_phrase_and_router_cue_of_the_file_is_read() -> None:
    data = _english()
    talk = data["small_talk"]
    for kind in talk["kinds"]:
        for phrase in kind["phrases"]:
            plan = LocalPlanner(words=EN_WORDS, reading=EN_RD).plan(f"{phrase.capitalize()} there!")
            assert not plan.need_search and plan.reply == kind["reply"], phrase
    for phrase in talk["about_me"]:
        planner = LocalPlanner(scope="Two documents.", words=EN_WORDS, reading=EN_RD)
        plan = planner.plan(f"{phrase}?")
        assert plan.reply == f"{talk['about_me_reply']} Two documents.", phrase
    for phrase in talk["greeting_prefixes"]:
        plan = LocalPlanner(words=EN_WORDS, reading=EN_RD).plan(
            f"{phrase}, what is the S200 price?")
        assert plan.sub_questions == ["What is the S200 price?"], phrase
    assert LocalPlanner(words=EN_WORDS, reading=EN_RD).plan("  ").reply == talk["empty_reply"]
    for word in data["router_cues"]["comparison"]:
        assert ENGLISH_CUES.compare.search(f"the S100 {word} the S200"), word
    for phrase in data["router_cues"]["chain"]:
        assert ENGLISH_CUES.chain.search(f"and {phrase} travel?"), phrase


def test_the_planner_takes_its_words_from_the_language_file() -> None:
    """A word added to the file is read: no greeting, opener or connector is left in code."""

    def add(data: dict) -> None:
        data["small_talk"]["kinds"].append(
            {"kind": "nautical", "phrases": ["ahoy"], "reply": "Ahoy! Ask away."}
        )
        data["small_talk"]["about_me"].append("who made you")
        data["grammar"]["comparison"]["openers"].append("weigh up")
        data["grammar"]["clauses"]["openers"].append("outline")
        data["grammar"]["dates"]["connectors"].append("through")

    english = LocalPlanner(words=EN_WORDS, reading=EN_RD)
    more = LocalPlanner(words=_with(add), reading=EN_RD)
    ahoy = more.plan("Ahoy there!")
    assert not ahoy.need_search and ahoy.reply == "Ahoy! Ask away."
    assert english.plan("Ahoy there!").need_search
    assert not more.plan("Who made you?").need_search and english.plan("Who made you?").need_search
    weigh = "Weigh up the S100 and the S200 battery life"
    assert more.plan(weigh).sub_questions == ["S100 battery life", "S200 battery life"]
    assert english.plan(weigh).reason != "a comparison"
    clauses = "What is the S200 price and outline the S300 warranty"
    assert more.plan(clauses).sub_questions == [
        "What is the S200 price?",
        "Outline the S300 warranty",
    ]
    assert english.plan(clauses).sub_questions == [clauses]
    dates = "What was revenue in 2023 through 2025?"
    assert more.plan(dates).sub_questions == [
        "What was revenue in 2023?",
        "What was revenue in 2025?",
    ]
    assert english.plan(dates).sub_questions == [dates]

    # a file without English's greetings: "hello" is a question to search for, "hallo" is not
    def german_greetings(data: dict) -> None:
        data["small_talk"]["kinds"] = [{"kind": "hello", "phrases": ["hallo"], "reply": "Hallo!"}]
        data["small_talk"]["addressees"] = ["zusammen"]

    german = LocalPlanner(words=_with(german_greetings), reading=EN_RD)
    assert german.plan("Hallo zusammen!").reply == "Hallo!"
    assert german.plan("Hello there!").need_search


def test_the_router_takes_its_cue_words_from_the_language_file(small_kb) -> None:
    question = "Who audits the T9 sensor?"
    assert RuleRouter(small_kb, words=EN_WORDS, reading=EN_RD).route(question).route == "single"

    def add(data: dict) -> None:
        data["router_cues"]["chain"].append("who audits")
        data["router_cues"]["comparison"].append("outlast")

    router = RuleRouter(small_kb, words=_with(add), reading=EN_RD)
    decision = router.route(question)
    assert decision.route == "agent" and "a chained entity" in decision.reason
    decision = router.route("Does the T9 battery outlast 5 years?")
    assert decision.route == "agent" and "a comparison" in decision.reason
    router = RuleRouter(small_kb, words=EN_WORDS, reading=EN_RD)
    assert router.route("Does the T9 battery outlast 5 years?").route == "single"
