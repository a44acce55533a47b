"""The offline follow-up method (offline/follow_up.py) over real SQLite knowledge bases: a
follow-up finds the previous turn's document, a topic switch does not carry the old subject,
and an Italian and a Chinese conversation go the same way, with no word of either language;
a chat client's history is read as the stored runs that wrote its answers."""

from __future__ import annotations

import pytest
from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.apps.server.openai_compat import SOURCES_HEADING, ChatMessage, conversation
from ragloop.core.config import Settings
from ragloop.core.conversation import Turn, TurnKind
from ragloop.core.events import CondenseEvent
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING
from ragloop.offline.follow_up import RetrievalCondenser, ranked_documents

EN = {
    "products/t9.md": "# T9 Sensor Datasheet\n\n## Battery\nThe T9 sensor's battery lasts five"
                      " years at one reading a minute.\n\n## Reset\nTo reset the T9 sensor,"
                      " hold its button for ten seconds until the light blinks.\n",
    "products/k4.md": "# K4 Camera Datasheet\n\n## Battery\nThe K4 camera's battery lasts two"
                      " years.\n\n## Reset\nTo reset the K4 camera, open the app and choose"
                      " factory settings.\n",
    "org/leadership.md": "# Leadership\n\nThe Chief Financial Officer of Northwind Labs is"
                         " Dana Reyes; she approves budgets.\n",
}
# more documents of other subjects: a question's second-best match is no longer, as in a KB of
# three documents, whichever document is left
EN.update({f"notes/{k}.md": f"# {k.title()}\n\n{v}\n" for k, v in {
    "holidays": "Employees get 25 days of annual leave and the public holidays.",
    "offices": "The Rotterdam office opens at eight; the Austin office at nine.",
    "returns": "A faulty product is returned within 30 days with an RMA number.",
    "security": "Passwords are rotated every 90 days and laptops are encrypted."}.items()})
IT = {
    "etna.md": "# Etna\n\nL'Etna è il vulcano attivo più alto d'Europa e si trova in Sicilia,"
               " vicino a Catania. La sua ultima grande eruzione risale al 2021.\n",
    "vesuvio.md": "# Vesuvio\n\nIl Vesuvio si trova vicino a Napoli. La sua ultima eruzione"
                  " risale al 1944; nel 79 distrusse Pompei.\n",
    "carbonara.md": "# Carbonara\n\nLa carbonara si prepara con guanciale, uova, pecorino"
                    " romano e pepe nero.\n",
}
IT.update({f"{k}.md": f"# {k.title()}\n\n{v}\n" for k, v in {
    "dante": "Dante Alighieri scrisse la Divina Commedia all'inizio del Trecento.",
    "po": "Il Po è il fiume più lungo d'Italia e attraversa la Pianura Padana.",
    "ferrari": "La Ferrari fu fondata a Maranello da Enzo Ferrari nel 1939.",
    "colosseo": "Il Colosseo di Roma fu inaugurato nell'anno 80 sotto l'imperatore Tito."}.items()})
ZH = {
    "熊猫.md": "# 大熊猫\n\n大熊猫生活在中国四川的山区。大熊猫主要吃竹子，每天吃十几个小时。\n",
    "老虎.md": "# 东北虎\n\n东北虎生活在中国东北和俄罗斯远东。东北虎主要吃鹿和野猪。\n",
    "龙井.md": "# 龙井茶\n\n龙井茶产于杭州西湖一带，是中国的绿茶名品，用八十度的热水冲泡。\n",
}

ZH.update({f"{k}.md": f"# {k}\n\n{v}\n" for k, v in {
    "长城": "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关。",
    "长江": "长江是中国最长的河流，全长约六千三百公里，流入东海。",
    "春节": "春节是农历新年，人们贴春联、放鞭炮、吃饺子。",
    "故宫": "故宫位于北京中心，是明清两代的皇家宫殿。"}.items()})


def _kb(tmp_path, docs, language):
    path = tmp_path / "kb"
    kb = KnowledgeBase.open(path, Settings(kb=str(path)), language=language)
    kb.ingest([write_docs(tmp_path / "docs", docs)])
    return kb


@pytest.fixture
def en_kb(tmp_path):
    with _kb(tmp_path, EN, "en") as kb:
        yield kb


def test_a_follow_up_finds_the_previous_turns_document_and_says_what_it_searched(en_kb):
    engine = Engine(en_kb)
    chat = engine.conversation()
    first = chat.ask("How long does the T9 sensor's battery last?")
    assert {c.doc_id for c in first.citations} == {"products/t9.md"}
    assert chat.turns[0].cited_docs == ("products/t9.md",)  # a fact of the stored run
    # the sections and evidence numbers it cited too, as the run recorded them
    assert chat.turns[0].cited_sections == tuple((c.doc_id, c.section) for c in first.citations)
    assert chat.turns[0].cited_evidence == tuple(dict.fromkeys(c.n for c in first.citations))

    seen: list = []
    second = chat.ask("And how do I reset it?", on_event=seen.append)
    condensed = next(e for e in seen if isinstance(e, CondenseEvent))
    assert condensed.turn_kind == TurnKind.FOLLOW_UP
    # what was searched is shown as it is: the follow-up and the previous turn's query
    assert second.standalone == "And how do I reset it? How long does the T9 sensor's battery" \
                                " last?"
    assert condensed.reason.startswith("searched: the follow-up + turn 1's query")
    assert [c.doc_id for c in second.citations][:1] == ["products/t9.md"]
    # what was typed is answered, not what was searched (the previous question again)
    assert second.question == "And how do I reset it?"
    assert "ten seconds" in second.answer and "five years" not in second.answer


def test_the_offline_answerer_reads_a_follow_up_with_what_it_searched(small_kb):
    """The typed words pick the sentence, the carried query says which passages are the
    conversation's: "Is it waterproof?" alone shares no word with any sentence."""
    from ragloop.core.decisions import Evidence
    from ragloop.offline.answerer import ExtractiveAnswerer

    searched = "Is it waterproof? What battery does the T9 sensor use?"
    evidence = [Evidence(n, h.doc_id, h.section, h.section_title, h.text, 1)
                for n, h in enumerate(small_kb.search(searched, k=6), 1)]
    answerer = ExtractiveAnswerer(small_kb.embedder, reading=ENGLISH_READING)
    alone = answerer.answer("Is it waterproof?", [], evidence)
    assert alone.unanswerable  # without its subject the follow-up is no question of the KB's
    draft = answerer.answer("Is it waterproof?", [], evidence, context=searched)
    assert not draft.unanswerable and "IP67" in draft.text and "CR123A" not in draft.text
    # the subject carried does not make a question the sources do not answer answered
    other = answerer.answer("Is it certified for hazardous areas?", [], evidence,
                            context=f"Is it certified for hazardous areas? {searched}")
    assert other.unanswerable


def test_a_topic_switch_finds_and_answers_from_its_own_documents(en_kb):
    """No switch rule: the question as typed is one of the fused searches, so a switch's own
    document leads, and the answer cites only it."""
    history = [Turn("How long does the T9 sensor's battery last?",
                    cited_docs=("products/t9.md",))]
    switch = "Who is the Chief Financial Officer of Northwind Labs?"
    c = RetrievalCondenser(en_kb, ENGLISH_READING).condense(history, switch)
    assert c.queries == (f"{switch} How long does the T9 sensor's battery last?", switch)
    assert c.prior == ("products/t9.md",) and "fused" in c.reason
    r = Engine(en_kb).ask(switch, history=history)
    assert r.question == switch and "Dana Reyes" in r.answer
    assert [d.doc_id for d in r.citations] == ["org/leadership.md"]


def test_without_a_prior_a_turn_follows_up_and_a_choice_narrows_the_question_back(en_kb):
    condenser = RetrievalCondenser(en_kb, ENGLISH_READING)
    # an earlier turn that cited nothing gives no documents to switch away from
    c = condenser.condense([Turn("Tell me about the T9")], "how do I reset it?")
    assert (c.kind, c.question) == (TurnKind.FOLLOW_UP, "how do I reset it? Tell me about the T9")
    asked = Turn("How long does the battery last?", status="needs_input")
    chose = condenser.condense([asked], "K4")
    assert chose.question == "How long does the battery last (K4)?"
    assert condenser.condense([asked], "Who is the CFO?").question != chose.question
    with pytest.raises(ValueError):
        condenser.condense([asked], "  ")


@pytest.mark.parametrize(("docs", "language", "first", "cited", "follow_up", "switch", "own"), [
    (IT, "it", "Dove si trova l'Etna?", "etna.md", "E quando è stata la sua ultima eruzione?",
     "Con quali ingredienti si prepara la carbonara?", "carbonara.md"),
    (ZH, "zh", "大熊猫生活在哪里？", "熊猫.md", "它主要吃什么？", "龙井茶产于哪里？", "龙井.md"),
])
def test_italian_and_chinese_follow_ups_work_the_same_way(tmp_path, docs, language, first,
                                                          cited, follow_up, switch, own):
    with _kb(tmp_path, docs, language) as kb:
        history = [Turn(first, cited_docs=(cited,))]
        condenser = RetrievalCondenser(kb, ENGLISH_READING)
        c = condenser.condense(history, follow_up)
        assert c.kind is TurnKind.FOLLOW_UP and first in c.question
        assert ranked_documents(kb, c.question)[0] == cited
        s = condenser.condense(history, switch)
        # the switch's own document is found whether or not it was called a new topic (the
        # Chinese one is not: the previous query's exact match leads the joined search)
        assert own in ranked_documents(kb, s.question)[:2] and switch in s.searches


def test_a_chat_clients_history_is_read_as_the_runs_that_wrote_its_answers(en_kb):
    engine = Engine(en_kb)
    run = engine.ask("How long does the T9 sensor's battery last?")
    written = (f"<think>Route: single</think>{run.answer}\n\n{SOURCES_HEADING}\n"
               "[1] T9 Sensor Datasheet › Battery — products/t9.md §1")
    messages = [ChatMessage(role="user", content=run.question),
                ChatMessage(role="assistant", content=written),
                ChatMessage(role="user", content="Who wrote this?"),
                ChatMessage(role="assistant", content="Some text no run wrote."),
                ChatMessage(role="user", content="And how do I reset it?")]
    question, turns = conversation(messages, engine.runs.answered)
    assert question == "And how do I reset it?"
    assert turns[0].run_id == run.run_id and turns[0].cited_docs == ("products/t9.md",)
    assert turns[0].cited_sections == tuple((c.doc_id, c.section) for c in run.citations)
    assert turns[1] == Turn(question="Who wrote this?", answer="Some text no run wrote.")


def test_fused_pages_keep_each_chunk_once_and_the_prior_lifts_its_documents():
    from ragloop.core.types import Hit
    from ragloop.retrieval.fusion import fused_pages

    def hit(cid, doc):
        return Hit(cid, doc, "1", "", "")

    typed = [hit(1, "a.md"), hit(2, "b.md")]
    joined = [hit(3, "c.md"), hit(1, "a.md")]
    assert [h.chunk_id for h in fused_pages([typed, joined])] == [1, 3]  # in both: first
    assert [h.chunk_id for h in fused_pages([typed, joined], prior=("b.md",))][:1] == [1]
    pages = [[hit(3, "c.md"), hit(2, "b.md")], [hit(4, "d.md"), hit(2, "b.md")]]
    assert [h.chunk_id for h in fused_pages(pages)] == [2, 3]  # found twice leads
    assert [h.chunk_id for h in fused_pages(pages, prior=("d.md",))] == [4, 2]
