"""Citations that support their sentence: the offline checker on real passages of the example
knowledge base, its removal of unsupported citations from a real run, and the model judge's
batched call (scripted here; the real server in test_real_model.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from graders import KeepsAll

import ragloop.agent.engine as engine_mod
from ragloop.agent.citations import uncited_claims
from ragloop.core.answer_stream import in_pieces
from ragloop.core.decisions import Draft, Route
from ragloop.core.errors import ProviderError
from ragloop.core.events import AnswerEvent, event_from
from ragloop.core.types import EventKind, Usage
from ragloop.language.support import Passage, SupportChecker, claims
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.language.vocabulary import ENGLISH_WORDS
from ragloop.llm.base import ChatResponse
from ragloop.llm.scripted import ScriptedChat

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING
EN_WORDS = ENGLISH_WORDS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "kb"
LANG = Path(__file__).parent / "fixtures" / "lang"
# three documents of the example knowledge base: a datasheet, a policy, a reference
DOCS = ("products/s200-datasheet.md", "policies/travel-expense-policy.md",
        "support/error-codes.md")


@pytest.fixture(scope="module")
def example_kb_folder(tmp_path_factory):
    from ragloop.kb import KnowledgeBase

    root = tmp_path_factory.mktemp("examples")
    for rel in DOCS:
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EXAMPLES / rel, root / "docs" / rel)
    with KnowledgeBase.open(root / "kb") as kb:
        kb.ingest([root / "docs"])
    return root / "kb"


@pytest.fixture
def example_kb(example_kb_folder, tmp_path):
    from ragloop.kb import KnowledgeBase

    shutil.copytree(example_kb_folder, tmp_path / "kb")
    kb = KnowledgeBase.open(tmp_path / "kb")
    yield kb
    kb.close()


def passage_of(kb, doc_id: str, title: str) -> Passage:
    section = next(s for s in kb.sections(doc_id) if s.title == title)
    return Passage(section.text, f"{doc_id} {section.title}")


def verdict(checker: SupportChecker, sentence: str, passage: Passage):
    return checker.check([(sentence, passage)])[0]


def test_the_checker_on_real_passages_of_the_example_kb(example_kb) -> None:
    checker = SupportChecker(example_kb.embedder, reading=EN_RD)
    battery = passage_of(example_kb, "products/s200-datasheet.md", "Battery")
    thresholds = passage_of(example_kb, "policies/travel-expense-policy.md",
                            "4.2 Approval thresholds")
    meals = passage_of(example_kb, "policies/travel-expense-policy.md", "3.1 Meal allowances")
    uplink = passage_of(example_kb, "support/error-codes.md", "E201 Uplink lost")
    # restated and paraphrased: supported (thousands separators, "four" = 4, CFO = Chief
    # Financial Officer, the section title's "Uplink")
    assert verdict(checker, "The S200 battery is expected to last 5 years at the default"
                            " reporting interval.", battery).supported
    assert verdict(checker, "Every extra daily FFT spectrum shortens battery life by about"
                            " four months.", battery).supported
    assert verdict(checker, "Trips above £2500 need the CFO's approval.", thresholds).supported
    assert verdict(checker, "After an uplink loss the gateway buffers readings for up to 30"
                            " days.", uplink).supported
    # same topic, wrong figure / currency / code / name: unsupported, saying what is missing
    wrong = verdict(checker, "The S200 battery is expected to last 7 years.", battery)
    assert not wrong.supported and "7" in wrong.reason
    assert not verdict(checker, "The S200 uses a 3.6 V cell rated at 5 Ah.", battery).supported
    assert not verdict(checker, "The daily meal allowance in the United States is $45.",
                       meals).supported
    assert not verdict(checker, "E202 means the gateway has had no connection to Pulse for more"
                                " than 15 minutes.", uplink).supported
    assert not verdict(checker, "Trips above £2,500 must also be approved by Helen Marsh.",
                       thresholds).supported
    # another document's passage altogether
    assert not verdict(checker, "The S200 enclosure is rated IP67.", meals).supported


def test_the_checker_reads_other_languages() -> None:
    # lexical: the figures, names and CJK runs must be there
    checker = SupportChecker(reading=EN_RD)
    etna = (LANG / "it" / "vulcani.md").read_text(encoding="utf-8").split("## Vesuvio")[0]
    vesuvio = (LANG / "it" / "vulcani.md").read_text(encoding="utf-8").split("## Vesuvio")[1]
    panda = (LANG / "zh" / "熊猫.md").read_text(encoding="utf-8")
    assert verdict(checker, "L'Etna, vicino a Catania, è alto circa 3350 metri.",
                   Passage(etna)).supported  # "3.350" is 3350
    assert not verdict(checker, "Nel 79 d.C. l'Etna distrusse Pompei ed Ercolano.",
                       Passage(vesuvio)).supported  # "l'Etna": a name the passage lacks
    assert verdict(checker, "大熊猫每天要吃十二到三十八公斤的竹子。", Passage(panda)).supported
    assert not verdict(checker, "大熊猫每天要吃五十公斤的竹子。", Passage(panda)).supported


def test_claims_pair_each_citation_with_the_words_it_follows() -> None:
    found = claims("The S200 is rated IP67. [1] It weighs 180 g [2] and costs £289 [3][4].\n"
                   "Who approves: Trips above £2,500 need the CFO [5].", ENGLISH_READING,
                   labels=["Who approves?"])
    assert [(c.text, c.cited) for c in found] == [
        ("The S200 is rated IP67.", (1,)),
        ("It weighs 180 g", (2,)),
        ("and costs £289.", (3, 4)),
        ("Trips above £2,500 need the CFO.", (5,)),
    ]
    assert uncited_claims("The S200 is rated IP67 [1]. It is blue. The knowledge base does not"
                          " say: its colour.", EN_WORDS, EN_RD) == 1
    assert uncited_claims("The S200 is rated IP67. [1] It weighs 180 g. [2]", EN_WORDS, EN_RD) == 0
    assert uncited_claims("The knowledge base does not say clearly: Is it blue? Will it fit?"
                          " The closest passages: It weighs 180 g. [1]", EN_WORDS, EN_RD) == 0


def test_the_answerers_conflict_note_is_no_claim_in_any_language() -> None:
    # offline/answerer.py heads the note with the language's `sources_disagree`
    for code, note, said in [
        (None, "Note: the sources disagree — 5 years [1] versus 7 years [2].", "5 years"),
        ("it", "Nota: le fonti non concordano — 5 anni [1] contro 7 anni [2].", "5 anni"),
        ("zh", "注意：来源之间有分歧——5年 [1] 与 7年 [2]。", "5年"),
    ]:
        first = claims(note, reading(code))[0]
        assert first.text == said and first.cited == (1,)


class FixedAnswer:
    """An answerer that cites evidence [1] for its own first sentence, and for a claim that
    passage does not make."""

    usage = Usage()

    def __init__(self, tail: str) -> None:
        self.tail = tail

    def answer(self, question, sub_questions, evidence, context="") -> Draft:
        first = evidence[0].text.split(". ")[0].rstrip(".")
        return Draft(text=f"{first} [1]. {self.tail} [1].")

    def write(self, question, sub_questions, evidence, context=""):
        return (yield from in_pieces(self.answer(question, sub_questions, evidence)))


def engine_with(kb, tail: str, **kw):
    class Fixed(engine_mod.Engine):
        def _answerer(self, comps):
            return FixedAnswer(tail)

    return Fixed(kb, grader=KeepsAll(), **kw)  # the scripted chat is the citation judge's


def test_a_run_drops_and_reports_a_citation_its_passage_does_not_support(example_kb,
                                                                         capsys) -> None:
    from ragloop.apps.cli import print_run

    engine = engine_with(example_kb, "The S200 carries a 12-year warranty")
    events = []
    result = engine.ask("What battery does the S200 use?", route="single", on_event=events.append)
    assert result.answer.endswith("The S200 carries a 12-year warranty.")
    assert result.answer.count("[1]") == 1  # the first sentence keeps its citation
    assert result.unsupported == [{"n": 1, "sentence": "The S200 carries a 12-year warranty."}]
    assert [c.n for c in result.citations] == [1]
    assert result.citation_support == {"checked": 2, "supported": 1, "claims": 2,
                                       "uncited_claims": 0, "all_supported": False}
    # on the answer event, as streamed and as stored
    answer = next(e for e in events if e.kind == EventKind.ANSWER)
    assert answer.unsupported == result.unsupported
    stored = next(e for e in engine.runs.events(result.run_id) if e.kind == EventKind.ANSWER)
    assert stored.unsupported == result.unsupported
    # the CLI says what it took out
    print_run(result.to_dict())
    assert "removed unsupported citation [1]" in capsys.readouterr().out


def test_the_offline_agent_checks_its_extractive_answer(example_kb) -> None:
    """The pipeline renumbers its evidence into a new ledger before answering: the check goes
    with it, and its quoted sentences are supported by the passages they come from."""
    result = engine_mod.Engine(example_kb).ask(
        "Is the S200 waterproof, and how long does its battery last?", route="agent")
    assert result.citations and result.citation_support is not None
    assert result.citation_support["checked"] >= len(result.citations)
    assert result.citation_support["supported"] == result.citation_support["checked"]
    assert result.unsupported == []


def test_old_answer_events_still_load() -> None:
    old = event_from("answer", 3, {"text": "CFO [1].", "citations": [], "invalid_citations": []})
    assert isinstance(old, AnswerEvent) and old.unsupported is None
    new = AnswerEvent(text="x", unsupported=[{"n": 2, "sentence": "x"}])
    assert event_from("answer", 1, new.data).unsupported == [{"n": 2, "sentence": "x"}]


def test_the_model_judges_every_pair_in_one_call(example_kb) -> None:
    reply = {"verdicts": [{"id": 1, "supported": True}, {"id": 2, "supported": False}]}
    chat = ScriptedChat([ChatResponse(text=json.dumps(reply))])
    # a figure the offline checker finds in the passage, which the model judges unsupported
    engine = engine_with(example_kb, "The S200 battery lasts 5 years", chat=chat)
    result = engine.ask("What battery does the S200 use?", route="single")
    assert len(chat.calls) == 1 and chat.calls[0].json_schema is not None
    assert "id=2" in chat.calls[0].messages[0].content
    assert result.unsupported == [{"n": 1, "sentence": "The S200 battery lasts 5 years."}]
    assert result.usage.calls == 1


def test_an_unreadable_judge_keeps_the_citations_unchecked(example_kb) -> None:
    chat = ScriptedChat([ChatResponse(text="I think so"), ChatResponse(text="yes")])
    engine = engine_with(example_kb, "The S200 carries a 12-year warranty", chat=chat)
    events = []
    result = engine.ask("What battery does the S200 use?", route="single", on_event=events.append)
    assert result.status == "answered" and result.answer.count("[1]") == 2
    assert result.unsupported == [] and result.citations_unchecked
    assert next(e for e in events if e.kind == EventKind.ANSWER).citations_unchecked
    # nor does a provider failure at that point fail a run whose answer is written

    def overloaded(messages, tools, tool_choice):
        raise ProviderError("openai: HTTP 529: overloaded")

    engine = engine_with(example_kb, "The S200 carries a 12-year warranty",
                         chat=ScriptedChat([overloaded]))
    result = engine.ask("What battery does the S200 use?", route="single")
    assert result.status == "answered" and result.citations_unchecked


def test_the_check_can_be_offline_or_off(example_kb) -> None:
    chat = ScriptedChat([])  # never called
    settings = example_kb.settings.with_(citation_check="offline")
    result = engine_with(example_kb, "The S200 carries a 12-year warranty", chat=chat,
                         settings=settings).ask("S200 battery?", route="single")
    assert len(result.unsupported) == 1 and not chat.calls
    off = example_kb.settings.with_(citation_check="off")
    result = engine_with(example_kb, "The S200 carries a 12-year warranty",
                         settings=off).ask("S200 battery?", route="single")
    assert result.unsupported == [] and result.answer.count("[1]") == 2


@pytest.fixture(autouse=True)
def _single_route(monkeypatch):
    monkeypatch.setattr(engine_mod, "_route", lambda q, kb, how: Route(
        "agent" if how == "agent" else "single", f"forced by --route {how}"))


def test_a_removed_marker_tidies_its_own_place_only() -> None:
    from ragloop.agent.evidence import GONE, tidy_removed

    assert tidy_removed(f"The CFO approves {GONE}. It is Tom {GONE} Becker.") == \
        "The CFO approves. It is Tom Becker."
    # spacing the text has of its own stays: inline code whose backticks the reader dropped
    assert tidy_removed(f"Call the .invoke() method ; then  indent {GONE}.") == \
        "Call the .invoke() method ; then  indent."
