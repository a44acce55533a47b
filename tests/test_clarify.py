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


def test_variants_below_an_unrelated_best_document_still_ask_back() -> None:
    # the error reference scores best, but the three datasheets are a family of comparable score
    docs = [hit("e.md", "Error Code Reference", 0.9, 9), *sensors()]
    c = clarify("What is the temperature range of the sensor?", docs, EN)
    assert c is not None and set(c.options) == {"S100", "S200", "S300"}
    assert "e.md" not in {d for ids in c.evidence.values() for d in ids}


def test_a_question_naming_a_stronger_document_outside_the_family_chose_it() -> None:
    docs = [hit("g.md", "Edge Gateway Guide", 0.9, 9),
            hit("a.md", "S200 Sensor Datasheet", 0.7, 1),
            hit("b.md", "S100 Sensor Datasheet", 0.7, 2)]
    assert clarify("What is the IP rating of the gateway?", docs, EN) is None
    assert clarify("What is the IP rating?", docs, EN) is not None


def test_a_general_page_beside_its_subtopics_is_no_reading() -> None:
    # "Rate limits" is only the kind the other two refine: the general page answers
    docs = [hit("a.md", "Rate limits", 0.8, 1), hit("b.md", "Rate limit headers", 0.8, 2),
            hit("c.md", "Rate limit errors", 0.78, 3)]
    assert clarify("What is the rate limit?", docs, EN) is None
    assert clarify("What is the rate limit?", docs[1:], EN) is not None


def test_titles_told_apart_by_more_than_a_name_are_separate_topics() -> None:
    # what is left of each title once the shared words go is no name a user would choose
    docs = [hit("a.md", "Fate mapping reveals origins and dynamics of monocytes and tissue"
                        " macrophages under homeostasis.", 0.8, 1),
            hit("b.md", "Tissue macrophages: functions", 0.8, 2)]
    assert clarify("Where do tissue macrophages come from?", docs, EN) is None


def test_sections_of_one_page_that_are_variants_ask_back() -> None:
    def section(n: int, title: str, score: float) -> Hit:
        return Hit(chunk_id=n, doc_id="p.md", section=f"2.{n}", section_title=title,
                   text=f"{title}: …", doc_title="Pricing", grade_score=score,
                   verdict="relevant")
    docs = [section(1, "Starter plan limits", 0.8), section(2, "Enterprise plan limits", 0.78),
            section(3, "Trials", 0.5)]
    c = clarify("What are the plan limits?", docs, EN)
    assert c is not None and c.options == ("Starter", "Enterprise")
    assert c.evidence == {"Starter": ("p.md",), "Enterprise": ("p.md",)}
    assert "sections" in c.reason
    assert clarify("What are the Starter plan limits?", docs, EN) is None
