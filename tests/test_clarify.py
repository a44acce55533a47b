"""The offline clarifier (offline/clarify.py): kept evidence that splits into documents of
comparable score, variants of one kind the question does not name, makes a clarifying
question whose options are the variants' names; a named variant, one dominant document or
unrelated documents do not."""

from __future__ import annotations

from ragloop.core.types import Hit
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.clarify import clarify

EN = vocabulary("en")


def hit(doc_id: str, title: str, score: float, n: int) -> Hit:
    return Hit(chunk_id=n, doc_id=doc_id, section="1", section_title="Rating",
               text=f"{title}: rated IP6{n}.", doc_title=title, grade_score=score,
               verdict="relevant")


def sensors() -> list[Hit]:
    return [hit("a.md", "S200 Industrial Sensor Datasheet", 0.8, 1),
            hit("b.md", "S100 Wireless Sensor Datasheet", 0.75, 2),
            hit("c.md", "S300 Hazardous Sensor Datasheet", 0.7, 3)]


def test_comparable_variants_the_question_does_not_name_ask_back() -> None:
    c = clarify("What is the IP rating of the sensor?", sensors(), EN)
    assert c is not None
    assert c.options == ("S200", "S100", "S300")
    assert c.evidence["S100"] == ("b.md",)


def test_a_question_naming_a_variant_is_answered() -> None:
    assert clarify("What is the IP rating of the S200?", sensors(), EN) is None
    assert clarify("Is the wireless sensor rated IP65?", sensors(), EN) is None


def test_one_dominant_or_unrelated_documents_are_answered() -> None:
    dominant = [hit("a.md", "S200 Industrial Sensor Datasheet", 0.9, 1),
                hit("b.md", "S100 Wireless Sensor Datasheet", 0.3, 2)]
    assert clarify("What is the IP rating of the sensor?", dominant, EN) is None
    unrelated = [hit("a.md", "Travel Policy", 0.8, 1),
                 hit("b.md", "Gateway Guide", 0.8, 2)]
    assert clarify("What is the rating?", unrelated, EN) is None
    assert clarify("What is the rating?", sensors()[:1], EN) is None


def test_italian_works_the_same_way() -> None:
    it = vocabulary("it")
    docs = [hit("a.md", "Scheda tecnica sensore S200", 0.8, 1),
            hit("b.md", "Scheda tecnica sensore S100", 0.78, 2)]
    c = clarify("Qual è la protezione del sensore?", docs, it)
    assert c is not None and c.options == ("S200", "S100")
    assert clarify("Qual è la protezione del S100?", docs, it) is None
