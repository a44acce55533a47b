"""The offline clarify rule (offline/clarify.py): sibling documents told apart by a name the
question does not give make a clarifying question; a named reading, or documents that differ
by a description only, do not."""

from __future__ import annotations

from ragloop.core.types import Hit
from ragloop.language.text import ENGLISH_READING, reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.clarify import clarify

# the knowledge base's language, passed explicitly (no reader defaults to English)
EN_RD = ENGLISH_READING

EN = vocabulary("en")
S100 = ("products/s100-datasheet.md", "S100 Wireless Vibration and Temperature Sensor Datasheet")
S200 = ("products/s200-datasheet.md", "S200 Industrial Vibration and Temperature Sensor Datasheet")
S300 = ("products/s300-datasheet.pdf",
        "S300 Hazardous-Area Vibration and Temperature Sensor Datasheet")
EDGE = ("products/edge-g2-gateway.md", "Edge G2 Gateway Product Guide")
EDGE_INSTALL = ("products/edge-g2-installation-guide.pdf", "Edge G2 Gateway Installation Guide")


def hit(doc: tuple[str, str], text: str, score: float = 0.7, n: int = 0) -> Hit:
    return Hit(chunk_id=n, doc_id=doc[0], section="3.2", section_title="Ingress protection",
               text=text, doc_title=doc[1], grade_score=score, verdict="relevant")


def ip_hits() -> list[Hit]:
    return [hit(S200, "The S200 enclosure has an ingress protection rating of IP67.", 0.8, 1),
            hit(S100, "The S100 is an entry-level wireless sensor rated IP65.", 0.7, 2),
            hit(S300, "The S300 enclosure is rated IP68 for hazardous areas.", 0.6, 3),
            hit(EDGE, "The Edge G2 enclosure has a rating of IP66.", 0.6, 4)]


def test_siblings_told_apart_by_a_name_the_question_lacks_ask_back() -> None:
    c = clarify("What is the IP rating of the sensor?", ip_hits(), EN, EN_RD)
    assert c is not None
    assert c.options == ("S200", "S100", "S300")  # best-graded first
    assert c.question == "Which one do you mean: S200, S100 or S300?"
    assert c.evidence["S100"] == ("products/s100-datasheet.md",)


def test_a_question_that_names_its_reading_is_answered() -> None:
    assert clarify("What is the IP rating of the S200 sensor?", ip_hits(), EN, EN_RD) is None
    # another kept document named by a code of its title: the gateway, not a sensor
    assert clarify("What is the IP rating of the Edge G2?", ip_hits(), EN, EN_RD) is None


def test_a_partly_named_reading_narrows_the_options() -> None:
    reports = [hit((f"reports/{y}-{q}.md", f"Quarterly Sales Report: {q.upper()} {y.upper()}"),
                   f"Total revenue in {q.upper()} {y.upper()} was £13m.", 0.7, i)
               for i, (q, y) in enumerate([("q3", "fy2024"), ("q3", "fy2025"), ("q1", "fy2024")])]
    c = clarify("What was revenue in Q3?", reports, EN, EN_RD)
    assert c is not None and c.options == ("Q3 FY2024", "Q3 FY2025")
    assert clarify("What was revenue in Q1?", reports, EN, EN_RD) is None  # one Q1 report
    assert clarify("What was revenue in Q2 FY2025?", reports, EN, EN_RD) is None  # its own quarter
    assert clarify("What was total revenue in the quarter?", reports, EN, EN_RD).options == (
        "Q3 FY2024", "Q3 FY2025", "Q1 FY2024")


def test_a_question_not_about_the_siblings_kind_or_naming_several_is_answered() -> None:
    reports = [hit((f"reports/{y}-{q}.md", f"Quarterly Sales Report: {q.upper()} {y.upper()}"),
                   f"Total revenue in {q.upper()} {y.upper()} was £13m.", 0.7, i)
               for i, (q, y) in enumerate([("q3", "fy2024"), ("q3", "fy2025"), ("q1", "fy2024")])]
    # the reports mention it differently, but it is not asked of "the quarter": answered,
    # with what the reports say
    assert clarify("What was total revenue?", reports, EN, EN_RD) is None
    assert clarify("In which quarter was revenue highest?", reports, EN, EN_RD) is None
    # sales: shared too
    assert clarify("In which quarter did sales peak?", reports, EN, EN_RD) is None
    assert clarify("What was revenue in the last quarter of 2023?", reports, EN, EN_RD) is None
    assert clarify("What was revenue in Q3 FY2024 and in Q1 FY2024?", reports, EN, EN_RD) is None
    assert clarify("What was revenue in the quarter ending 31 March 2024?", reports,
                   EN, EN_RD) is None  # a date: 2024 of FY2024
    hits = ip_hits()
    assert clarify("Compare the IP ratings of the S100 and the S300.", hits, EN, EN_RD) is None
    assert clarify("Which sensor has the highest IP rating?", hits, EN, EN_RD) is None


def test_documents_that_differ_by_a_description_are_one_reading() -> None:
    hits = [hit(EDGE, "One gateway supports 250 sensors; see the installation guide.", 0.8, 1),
            hit(EDGE_INSTALL, "Plan the product installation: up to 250 sensors.", 0.7, 2)]
    assert clarify("How many sensors can a gateway support?", hits, EN, EN_RD) is None


def test_names_that_are_not_codes() -> None:
    hits = [hit(("support/release-notes-pulse.md", "Pulse Release Notes"),
                "Release 2025.06 adds the Asset Health Score to Pulse.", 0.7, 1),
            hit(("support/release-notes-edge-g2-firmware.html", "Edge G2 Firmware Release Notes"),
                "Version 2.5.0 adds support for WPA3 firmware updates.", 0.7, 2)]
    c = clarify("What changed in the latest release?", hits, EN, EN_RD)
    assert c is not None and set(c.options) == {"Pulse", "Edge G2"}
    assert clarify("What changed in the latest Pulse release?", hits, EN, EN_RD) is None


def test_one_document_or_none_is_no_ambiguity() -> None:
    assert clarify("What is the IP rating?", [], EN, EN_RD) is None
    assert clarify("What is the IP rating?", ip_hits()[:1], EN, EN_RD) is None


def test_the_question_is_asked_in_the_kbs_language() -> None:
    c = clarify("Qual è il grado di protezione del sensore?", ip_hits()[:2], vocabulary("it"),
                reading("it"))
    assert c is not None and c.question == "Quale intendi: S200 o S100?"


def test_a_code_of_another_kind_does_not_choose_a_reading() -> None:
    reports = [hit((f"reports/{q}.md", f"Quarterly Sales Report: {q.upper()} FY2024"),
                   f"Halden shipped 1,300 Edge G2 gateways in {q.upper()} FY2024.", 0.8, i)
               for i, q in enumerate(["q1", "q2"])]
    c = clarify("How many Edge G2 gateways were shipped in the quarter?", reports, EN, EN_RD)
    assert c is not None and c.options == ("Q1", "Q2")  # the year they share is no option


def test_guides_of_one_named_product_are_one_reading() -> None:
    hits = [hit(EDGE, "The Edge G2 enclosure is rated IP66.", 0.8, 1),
            hit(EDGE_INSTALL, "Use the supplied cable glands to keep the IP66 rating.", 0.7, 2)]
    assert clarify("What is the IP rating of the Edge G2 gateway?", hits, EN, EN_RD) is None


def _doc_hits(docs: list[tuple[str, str]], text: str) -> list[Hit]:
    return [hit(d, text, 0.8 - i / 10, i) for i, d in enumerate(docs)]


def test_titles_that_read_as_sentences_or_headlines_are_no_siblings() -> None:
    """Study findings and news headlines are about one thing each: the place they differ by
    is no reading the question left open."""
    text = "In this cohort antiretroviral therapy was followed by fewer cases of tuberculosis."
    sentences = [("a", "Antiretroviral therapy reduces tuberculosis in Uganda."),
                 ("b", "Antiretroviral therapy reduces tuberculosis in Kenya.")]
    headlines = [("c", "Antiretroviral therapy cut tuberculosis cases among adults in Uganda"
                       " last year"),
                 ("d", "Antiretroviral therapy cut tuberculosis cases among adults in Kenya"
                       " last year")]
    question = "Does antiretroviral therapy lower the rate of tuberculosis?"
    assert clarify(question, _doc_hits(sentences, text), EN, EN_RD) is None
    assert clarify(question, _doc_hits(headlines, text), EN, EN_RD) is None
    # the same titles as labels (no full stop, a few words) are two readings
    labels = [("a", "Tuberculosis Therapy Uganda"), ("b", "Tuberculosis Therapy Kenya")]
    c = clarify(question, _doc_hits(labels, text), EN, EN_RD)
    assert c is not None and c.options == ("Uganda", "Kenya")


def test_options_are_names_not_what_is_left_of_a_title() -> None:
    """What two labels do not share must be a few adjacent words to be an option: scattered
    words ("Prevention HIV" of "Therapy for Prevention of Tuberculosis in HIV") or a long run
    name nothing a user could choose."""
    text = "Therapy for tuberculosis in people with the virus, as a review of trials."
    scattered = [("a", "Therapy for Prevention of Tuberculosis in HIV"),
                 ("b", "Integration of Therapy for Tuberculosis in Care")]
    assert clarify("Does therapy prevent tuberculosis?", _doc_hits(scattered, text), EN,
                   EN_RD) is None
    notes = [("p", "Pulse Release Notes"), ("e", "Edge Gateway Cloud Connector Release Notes")]
    assert clarify("What changed in the latest release?",
                   _doc_hits(notes, "Version 2.5 adds support for WPA3."), EN, EN_RD) is None


def test_a_name_the_siblings_share_is_no_kind_of_thing() -> None:
    """Titles that differ by a suffix of one name (a person and a namesake) share a name, not
    a description: a question that names it capitalised asks about one of them, by what it
    says of him, and is answered."""
    astors = [("iv", "John Jacob Astor IV"), ("iii", "John Jacob Astor III")]
    text = "John Jacob Astor was a businessman, a member of the Astor family of New York."
    assert clarify("How did the Astor who served as an army officer die?",
                   _doc_hits(astors, text), EN, EN_RD) is None


def test_a_kind_asked_for_with_an_indefinite_article_is_answered() -> None:
    """"A sensor that …" asks to find one by what the question says of it, as "which sensor"
    does; "the sensor" takes one as known and leaves the reading open."""
    hits = ip_hits()
    assert clarify("Is there a sensor rated for hazardous areas?", hits, EN, EN_RD) is None
    assert clarify("C'è un sensore adatto alle aree pericolose?", hits[:2],
                   vocabulary("it"), reading("it")) is None
    assert clarify("Is the sensor rated for hazardous areas?", hits, EN, EN_RD) is not None
