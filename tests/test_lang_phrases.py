"""The fixed sentences an offline run writes (a part the knowledge base does not say, the
sources that disagree, what the KB covers) are the KB language's (language/lang/<code>.json
`decline`, `answer_text`), and the run and the eval still read them as declines. Real KBs,
asked through the engine."""

from __future__ import annotations

import pytest
from conftest import write_docs

from ragloop.agent.engine import Engine
from ragloop.core.config import Settings
from ragloop.kb import KnowledgeBase
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline import factory
from ragloop.offline.answer_choice import polarity
from ragloop.offline.router import describe_scope

DOCS = {
    "it": {"pensioni.md": "# Pensioni\n\n## Pensione di vecchiaia\nLa pensione di vecchiaia"
                          " spetta a chi ha compiuto 67 anni di età.\n",
           "ferie.md": "# Ferie\n\n## Giorni di ferie\nOgni dipendente ha 26 giorni di ferie"
                       " all'anno.\n"},
    "zh": {"熊猫.md": "# 大熊猫\n\n## 食物\n大熊猫主要吃竹子，每天要吃十二到三十八公斤的竹子。\n",
           "长城.md": "# 长城\n\n## 长度\n长城全长两万一千多公里，横跨中国北方。\n"},
}
# a question none of whose words any document holds
UNKNOWN = {"it": "Chi ha scritto la Divina Commedia?", "zh": "谁写了红楼梦？"}


@pytest.fixture(scope="module", params=["it", "zh"])
def kb(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    folder = root / "kb"
    with KnowledgeBase.open(folder, Settings(kb=str(folder))) as base:
        base.ingest([write_docs(root / "docs", DOCS[request.param])])
    base = KnowledgeBase.open(folder, Settings(kb=str(folder)))
    yield request.param, base
    base.close()


def test_a_missing_part_is_declined_in_the_kbs_language(kb) -> None:
    code, base = kb
    assert base.language == code
    result = Engine(base, base.settings.with_(model="offline")).ask(UNKNOWN[code],
                                                                   route="single")
    said = vocabulary(code).text("decline.part_missing").format(part=UNKNOWN[code])
    assert said in result.answer
    assert "The knowledge base" not in result.answer  # not English's sentence
    # the run and the eval read it as a decline: the language's says_missing holds its words
    assert result.status == "unanswerable"
    assert any(w in said.lower() for w in vocabulary(code).declined)


def test_what_the_kb_covers_is_said_in_its_language(kb) -> None:
    code, base = kb
    words = vocabulary(code).table("answer_text")
    titles = "; ".join(d.title for d in base.documents()[:1])
    assert describe_scope(base, limit=1) == words["more_documents"].format(titles=titles, n=1)
    assert factory.scope(base) == words["scope"].format(
        titles="; ".join(d.title for d in base.documents()))
    out = vocabulary(code).text("decline.out_of_scope").format(reason="r", scope="s")
    assert any(w in out.lower() for w in vocabulary(code).declined)


def test_negation_endings_are_data() -> None:
    """English's "n't" is a word ending in en.json (`negation_endings`), not a rule in code;
    a language without such endings reads its whole negation words."""
    assert polarity("It doesn't work.", "Does it work?", ENGLISH_READING) == "No"
    assert polarity("It does work.", "Does it work?", ENGLISH_READING) == "Yes"
    assert vocabulary("it").get("answer_kinds.negation_endings") == []
    assert polarity("Il sensore non è impermeabile.", "Il sensore è impermeabile?",
                    reading("it")) == "No"
    assert polarity("Il sensore è impermeabile.", "Il sensore è impermeabile?",
                    reading("it")) == "Sì"


def test_no_english_sentence_is_left_in_the_italian_and_chinese_texts() -> None:
    english = vocabulary("en")
    for code in ("it", "zh"):
        words = vocabulary(code)
        for key in ("decline.part_missing", "decline.no_evidence", "decline.out_of_scope",
                    "answer_text.sources_disagree", "answer_text.more_documents",
                    "answer_text.empty_scope"):
            assert words.text(key) != english.text(key), (code, key)
