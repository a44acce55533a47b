"""The offline clarifier (offline/clarify.py): kept evidence that splits into documents of
comparable score, variants of one kind or documents none of which dominates the evidence,
the question naming none of them, makes a clarifying question whose options are the
variants' codes or the pages' titles as written; a named variant, one dominant document
or nested sections do not."""

from __future__ import annotations

from ragloop.core.types import Hit
from ragloop.language.text import ENGLISH_READING, reading
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
    c = clarify("What is the IP rating of the sensor?", sensors(), EN, ENGLISH_READING)
    assert c is not None
    assert c.options == ("S200", "S100", "S300")
    assert c.evidence["S100"] == ("b.md",)


def test_a_question_naming_a_variant_is_answered() -> None:
    assert clarify("What is the IP rating of the S200?", sensors(), EN, ENGLISH_READING) is None
    assert clarify("Is the wireless sensor rated IP65?", sensors(), EN, ENGLISH_READING) is None


def test_one_dominant_or_unrelated_documents_are_answered() -> None:
    dominant = [hit("a.md", "S200 Industrial Sensor Datasheet", 0.9, 1),
                hit("b.md", "S100 Wireless Sensor Datasheet", 0.3, 2)]
    assert clarify("What is the IP rating of the sensor?", dominant, EN, ENGLISH_READING) is None
    # unrelated titles of comparable score: the one holding most of the evidence answers
    # (before the evidence split, unrelated titles never asked; now their evidence decides)
    unrelated = [hit("a.md", "Travel Policy", 0.8, 1), hit("a.md", "Travel Policy", 0.78, 4),
                 hit("a.md", "Travel Policy", 0.7, 5), hit("b.md", "Gateway Guide", 0.8, 2)]
    assert clarify("What is the rating?", unrelated, EN, ENGLISH_READING) is None
    assert clarify("What is the rating?", sensors()[:1], EN, ENGLISH_READING) is None


def test_italian_works_the_same_way() -> None:
    it = vocabulary("it")
    docs = [hit("a.md", "Scheda tecnica sensore S200", 0.8, 1),
            hit("b.md", "Scheda tecnica sensore S100", 0.78, 2)]
    c = clarify("Qual è la protezione del sensore?", docs, it, reading("it"))
    assert c is not None and c.options == ("S200", "S100")
    assert clarify("Qual è la protezione del S100?", docs, it, reading("it")) is None


def test_variants_below_an_unrelated_best_document_still_ask_back() -> None:
    # the error reference scores best, but the three datasheets are a family of comparable score
    docs = [hit("e.md", "Error Code Reference", 0.9, 9), *sensors()]
    c = clarify("What is the temperature range of the sensor?", docs, EN, ENGLISH_READING)
    assert c is not None and set(c.options) == {"S100", "S200", "S300"}
    assert "e.md" not in {d for ids in c.evidence.values() for d in ids}


def test_a_question_naming_a_stronger_document_outside_the_family_chose_it() -> None:
    docs = [hit("g.md", "Edge Gateway Guide", 0.9, 9),
            hit("a.md", "S200 Sensor Datasheet", 0.7, 1),
            hit("b.md", "S100 Sensor Datasheet", 0.7, 2)]
    assert clarify("What is the IP rating of the gateway?", docs, EN, ENGLISH_READING) is None
    assert clarify("What is the IP rating?", docs, EN, ENGLISH_READING) is not None


def test_a_general_page_beside_its_subtopics_is_no_reading() -> None:
    # "Rate limits" is only the kind the other two refine: no family of variants; the
    # general page answers when it holds the evidence (before the evidence split, the
    # title alone decided; three pages of one hit each now split it and ask)
    docs = [hit("a.md", "Rate limits", 0.8, 1), hit("a.md", "Rate limits", 0.78, 4),
            hit("a.md", "Rate limits", 0.76, 5), hit("b.md", "Rate limit headers", 0.8, 2),
            hit("c.md", "Rate limit errors", 0.78, 3)]
    assert clarify("What is the rate limit?", docs, EN, ENGLISH_READING) is None
    assert clarify("What is the rate limit?", docs[3:], EN, ENGLISH_READING) is not None


def test_titles_told_apart_by_more_than_a_name_are_separate_topics() -> None:
    # what is left of each title once the shared words go is no name a user would choose:
    # no family of variants; the evidence split alone decides (one page holds most of it)
    docs = [hit("a.md", "Fate mapping reveals origins and dynamics of monocytes and tissue"
                        " macrophages under homeostasis.", 0.8, 1),
            hit("a.md", "Fate mapping reveals origins and dynamics of monocytes and tissue"
                        " macrophages under homeostasis.", 0.78, 3),
            hit("a.md", "Fate mapping reveals origins and dynamics of monocytes and tissue"
                        " macrophages under homeostasis.", 0.75, 4),
            hit("b.md", "Tissue macrophages: functions", 0.8, 2)]
    assert clarify("Where do tissue macrophages come from?", docs, EN, ENGLISH_READING) is None


def test_sections_of_one_page_that_are_variants_ask_back() -> None:
    def section(n: int, title: str, score: float) -> Hit:
        return Hit(chunk_id=n, doc_id="p.md", section=f"2.{n}", section_title=title,
                   text=f"{title}: …", doc_title="Pricing", grade_score=score,
                   verdict="relevant")
    docs = [section(1, "Starter plan limits", 0.8), section(2, "Enterprise plan limits", 0.78),
            section(3, "Trials", 0.5)]
    c = clarify("What are the plan limits?", docs, EN, ENGLISH_READING)
    # the options are the headings as written (they were the words left once the shared
    # ones went, "Starter", which read badly for headings such as "Response - Change …")
    assert c is not None and c.options == ("Starter plan limits", "Enterprise plan limits")
    assert c.evidence == {"Starter plan limits": ("p.md",), "Enterprise plan limits": ("p.md",)}
    assert "sections" in c.reason
    assert clarify("What are the Starter plan limits?", docs, EN, ENGLISH_READING) is None


def passage(doc_id: str, title: str, score: float, n: int, heading: str = "Intro",
            section: str = "1") -> Hit:
    return Hit(chunk_id=n, doc_id=doc_id, section=section, section_title=heading,
               text=f"{heading}: …", doc_title=title, grade_score=score, verdict="relevant")


def validations() -> list[Hit]:
    return [passage("q.md", "Query Parameters and String Validations", 0.73, 1, "Recap"),
            passage("q.md", "Query Parameters and String Validations", 0.72, 2, "Required"),
            passage("p.md", "Path Parameters and Numeric Validations", 0.71, 3, "Order"),
            passage("p.md", "Path Parameters and Numeric Validations", 0.70, 4,
                    "Number validations")]


def test_evidence_split_evenly_between_documents_asks_with_their_titles() -> None:
    c = clarify("How do I validate a parameter's value?", validations(), EN, ENGLISH_READING)
    assert c is not None
    assert c.options == ("Query Parameters and String Validations",
                         "Path Parameters and Numeric Validations")
    assert c.evidence["Path Parameters and Numeric Validations"] == ("p.md",)
    assert "splits into 2 documents" in c.reason


def test_a_document_holding_most_of_the_evidence_dominates() -> None:
    # comparable best scores, but the first page holds twice the evidence of the second
    docs = [*validations()[:2], passage("q.md", "Query Parameters and String Validations",
                                        0.7, 5, "Custom"), validations()[2]]
    assert clarify("How do I validate a parameter's value?", docs, EN, ENGLISH_READING) is None
    # and a document below SPLIT of the best is no reading
    weak = [validations()[0], passage("p.md", "Path Parameters and Numeric Validations",
                                      0.5, 3)]
    assert clarify("How do I validate a parameter's value?", weak, EN, ENGLISH_READING) is None


def test_a_word_only_the_strongest_document_has_chooses_it() -> None:
    assert clarify("How do I validate a query string?", validations(), EN, ENGLISH_READING) is None



def test_comparable_documents_that_are_no_family_answer_together() -> None:
    # three pages of comparable score on different topics: sources that answer together (or
    # disagree, a conflict the answer states), not readings to choose between
    docs = [passage("h.md", "Response Headers", 0.76, 1, "Custom Headers"),
            passage("m.md", "Middleware", 0.72, 2, "Create a middleware"),
            passage("e.md", "Handling Errors", 0.70, 3, "Add custom headers")]
    assert clarify("How do I add a custom header?", docs, EN, ENGLISH_READING) is None


def test_a_word_some_variants_share_narrows_the_family() -> None:
    docs = [passage("q.md", "Query Parameter Models", 0.81, 1),
            passage("h.md", "Header Parameter Models", 0.80, 2),
            passage("f.md", "Form Models", 0.78, 3)]
    c = clarify("How do I declare my parameters with a model?", docs, EN, ENGLISH_READING)
    assert c is not None and c.options == ("Query Parameter Models", "Header Parameter Models")
    assert clarify("How do I declare header parameters with a model?", docs, EN,
                   ENGLISH_READING) is None


def test_a_section_and_the_section_inside_it_are_one_reading() -> None:
    docs = [passage("s.md", "Sub Applications", 0.73, 1, "Sub-application mounts", "0"),
            passage("s.md", "Sub Applications", 0.63, 2, "Mounting a FastAPI application",
                    "1"),
            passage("s.md", "Sub Applications", 0.62, 3, "Mounting a WSGI application",
                    "1.2")]
    assert clarify("How do I mount another application?", docs, EN, ENGLISH_READING) is None


def test_a_question_holding_a_whole_title_or_a_weaker_pages_own_word_chose() -> None:
    docs = [passage("s.md", "The Ed Sullivan Show (radio program)", 0.8, 1),
            passage("e.md", "Ed Sullivan", 0.78, 2)]
    assert clarify("Did Ed Sullivan work anywhere else?", docs, EN, ENGLISH_READING) is None
    assert clarify("Where did he work?", docs, EN, ENGLISH_READING) is None  # no family
    # "path" is only the second page's: the question chose it, though it is not the best
    assert clarify("How do I validate a path value?", validations(), EN, ENGLISH_READING) is None
