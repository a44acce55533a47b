"""The offline condense rule (offline/condense.py): a follow-up carries the earlier turn's
subject, a question that stands on its own is left alone, a new topic drops the history."""

from __future__ import annotations

import pytest

from ragloop.core.conversation import Turn, TurnKind
from ragloop.language.text import reading
from ragloop.language.vocabulary import vocabulary
from ragloop.offline.condense import condense

EN = vocabulary("en")


def ask(history: list[tuple[str, str]], question: str, code: str = "en"):
    turns = [Turn(q, answer=a) for q, a in history]
    return condense(turns, question, vocabulary(code), reading(code))


def test_the_first_turn_is_left_as_typed() -> None:
    r = condense([], "  How do I pair it? ", EN)
    assert (r.question, r.kind) == ("How do I pair it?", TurnKind.STANDALONE)


def test_a_pronoun_is_read_as_the_earlier_subject() -> None:
    r = ask([("What is the IP rating of the S200 sensor?", "IP67.")],
            "How long does its battery last?")
    assert r.kind == TurnKind.FOLLOW_UP and "S200" in r.question and "its" not in r.question
    assert r.refers_to == 0 and "its" in r.reason


def test_what_about_puts_the_new_name_in_place_of_the_old_one() -> None:
    r = ask([("What was Pulse revenue in Q3 FY2024?", "£4.1m.")], "What about Q1 FY2025?")
    assert r.question == "What was Pulse revenue in Q1 FY2025?"
    r = ask([("What is the hotel room rate cap in Austin?", "$210.")], "What about Rotterdam?")
    assert r.question == "What is the hotel room rate cap in Rotterdam?"


def test_an_ellipsis_gets_the_subject_added() -> None:
    r = ask([("How many sensors can one Edge G2 gateway support?", "250.")],
            "And the operating temperature range?")
    assert r.kind == TurnKind.FOLLOW_UP
    assert "Edge G2" in r.question and "operating temperature range" in r.question


def test_a_persons_pronoun_reads_the_name_the_answer_gave() -> None:
    r = ask([("Who is the Head of Procurement?", "Helen Marsh.")], "Who does she report to?")
    assert "Helen Marsh" in r.question


def test_going_back_finds_the_turn_two_back() -> None:
    r = ask([("How many sensors can one Edge G2 gateway support?", "250."),
             ("How long are support call recordings kept?", "90 days.")],
            "Going back to the gateway, how much does it cost?")
    assert r.refers_to == 0 and "Edge G2" in r.question and "recording" not in r.question


def test_a_question_that_stands_alone_is_left_alone() -> None:
    r = ask([("What is the IP rating of the S200 sensor?", "IP67.")],
            "What is the list price of the S200 sensor?")
    assert (r.question, r.kind) == ("What is the list price of the S200 sensor?",
                                    TurnKind.STANDALONE)


def test_a_new_topic_drops_the_old_one() -> None:
    r = ask([("What is the IP rating of the S200 sensor?", "IP67.")],
            "How long are support call recordings kept?")
    assert r.kind == TurnKind.NEW_TOPIC
    assert r.question == "How long are support call recordings kept?"
    assert r.subject == ""


def test_a_pronoun_after_the_questions_own_name_is_not_a_reference() -> None:
    r = ask([("What is the IP rating of the S200 sensor?", "IP67.")],
            "Can a Pulse Starter tenant change its hosting region?")
    assert r.kind != TurnKind.FOLLOW_UP and "S200" not in r.question


def test_italian_and_chinese_words() -> None:
    r = ask([("Qual è il grado di protezione del sensore S200?", "IP67.")],
            "Quanto dura la sua batteria?", "it")
    assert r.kind == TurnKind.FOLLOW_UP and "S200" in r.question
    r = ask([("S200传感器的防护等级是多少？", "IP67。")], "它的电池能用多久？", "zh")
    assert r.kind == TurnKind.FOLLOW_UP and "S200" in r.question


def test_an_empty_question_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        condense([Turn("What is E104?")], "   ", EN)


def test_an_aspect_only_follow_up_keeps_the_subject_not_the_earlier_aspect() -> None:
    r = ask([("What is the operating temperature range of the X9 pump?", "-20 to 60 °C.")],
            "And the warranty?")
    assert "X9" in r.question and "temperature" not in r.question


def test_a_later_follow_up_reads_the_last_turn_not_the_first() -> None:
    turns = [Turn("What is the operating temperature range of the X9 pump?", answer="-20 °C."),
             Turn("And the warranty?", standalone="The warranty (X9 pump)?", answer="2 years.")]
    r = condense(turns, "Can I extend it?", EN)
    assert "warranty" in r.question and "temperature" not in r.question


def test_an_answers_citation_markers_and_figures_are_no_subject() -> None:
    r = ask([("Who must approve a trip?", "Mary Jones approves trips [1]. Above £10,000: [2].")],
            "Who does she report to?")
    assert "Mary Jones" in r.question
    assert "[" not in r.question and "10,000" not in r.question and " 1 " not in r.question


def test_a_which_question_passes_on_the_name_its_answer_gave() -> None:
    r = ask([("Which pump is rated for hot water?",
              "The P100 is not rated for hot water; the P300 is rated to 90 °C. [1]")],
            "How much does it cost?")
    assert "P300" in r.question and "P100" not in r.question


def test_it_beside_a_sibling_code_is_what_was_asked() -> None:
    r = ask([("What is the warranty period of the P300?", "2 years.")],
            "Is it the same for the P100?")
    assert "warranty" in r.question and "P100" in r.question and "P300" not in r.question


def test_them_is_never_read_as_numbers() -> None:
    r = ask([("How long are support tickets kept?",
              "Tickets are kept 3 years [1]; calls 90 days.")],
            "Who can stop them being deleted?")
    assert "tickets" in r.question and not any(c.isdigit() for c in r.question)


def test_going_back_reads_the_earlier_questions_before_their_answers() -> None:
    r = ask([("What does error E7 mean?", "The pump overheated."),
             ("How do I return a pump?", "Quote the RMA number; an error E7 or E8 is noted."),
             ("How long is the RMA number valid?", "30 days.")],
            "Going back to that error, which pump has the widest range?")
    assert r.refers_to == 0 and "E7" in r.question and "E8" not in r.question


def test_a_name_keeps_the_word_that_says_what_it_names() -> None:
    r = ask([("Where is the Leeds office?", "12 Park Row.")], "Who leads it?")
    assert "Leeds office" in r.question
    r = ask([("How much does P300 cost?", "£300.")], "And the warranty?")
    assert "P300" in r.question and "cost" not in r.question


def test_a_period_later_or_earlier_asks_the_question_of_that_period() -> None:
    turns = [Turn("What was revenue in Q2 FY2024?", answer="£12m."),
             Turn("And headcount at the end of it?", answer="412.",
                  standalone="Headcount at the end of Q2 FY2024?")]
    assert condense(turns, "And a quarter later?", EN).question == \
        "Headcount at the end of Q3 FY2024?"
    assert condense(turns, "And a year after that?", EN).question == \
        "Headcount at the end of Q2 FY2025?"
    r = ask([("What was revenue in Q1 FY2025?", "£14m.")], "And a quarter earlier?")
    assert r.question == "What was revenue in Q4 FY2024?"


def test_a_code_keeps_the_words_before_it_that_say_what_it_is() -> None:
    r = ask([("What does error code E7 mean?", "The pump overheated.")], "And what should I check?")
    assert "error code E7" in r.question
    r = ask([("How do I install X9 firmware?", "From a USB drive.")], "How long does it take?")
    assert "install X9" not in r.question and "X9" in r.question


def test_a_period_is_joined_as_the_period_asked_about() -> None:
    r = ask([("What was revenue in Q2 FY2025?", "£15m.")], "And the gross margin?")
    assert r.question == "The gross margin in Q2 FY2025?"
    r = ask([("What was X9 revenue in Q2 FY2025?", "£5m.")], "And the churn?")
    assert r.question == "The churn in Q2 FY2025 (X9)?"


def _in_every_document(word: str) -> bool:
    """A knowledge base where the company's name is in every document."""
    return word == "Halden"


def test_a_name_in_nearly_every_document_is_no_subject() -> None:
    history = [Turn("How long is probation at Halden?", answer="Three months.")]
    r = condense(history, "Can it be extended?", EN, reading("en"), _in_every_document)
    assert "probation" in r.question and "Halden" not in r.question
    # without the knowledge base's counts the name is carried, as before
    assert "Halden" in condense(history, "Can it be extended?", EN, reading("en")).question


def test_what_about_x_reads_the_later_pronoun_as_x() -> None:
    r = ask([("How long is probation?", "Three months.")],
            "What about share options, do I have to wait for those too?")
    assert r.question.startswith("Do I have to wait for share options too")
    assert "probation" in r.question


def test_going_back_to_x_reads_the_later_pronoun_as_x() -> None:
    r = ask([("How big is the Austin office expansion?", "1,800 square metres and 40 new hires."),
             ("What time are the company-wide meetings?", "15:00 UK time.")],
            "Going back to the new hires, what jobs are they?")
    assert r.question.startswith("What jobs are the new hires")


def test_who_is_that_is_the_person_the_answer_named() -> None:
    r = ask([("Can probation be extended?",
              "Yes, once by up to 3 months with the agreement of the Head of People.")],
            "Who is that?")
    assert r.question == "Who is Head of People?"


def test_a_names_possessive_is_the_name() -> None:
    r = ask([("Is the S200's battery replaceable?", "No.")], "Who pays the postage?")
    assert r.question == "Who pays the postage (S200 battery)?"


def test_a_pronouns_contraction_keeps_its_verb() -> None:
    r = ask([("My sensor keeps throwing E103, what does that mean?", "A clock drift.")],
            "It's every day now, should I send it back?")
    assert r.question.startswith("E103 is every day now")


def test_a_short_question_of_the_askers_own_is_a_new_topic() -> None:
    r = ask([("What if the supplier isn't on our system yet?", "Raise a supplier request.")],
            "How long do we have to keep invoices?")
    assert (r.question, r.kind) == ("How long do we have to keep invoices?", TurnKind.NEW_TOPIC)
    # with no words of its own to search, "we" does not make it a question of its own
    r = ask([("What is the API rate limit on Professional?", "600 requests a minute.")],
            "What happens if we go over?")
    assert r.kind == TurnKind.FOLLOW_UP and "Professional" in r.question


def test_all_this_is_never_read_as_a_number() -> None:
    r = ask([("Do I have to change my password every 90 days?", "No, only on compromise.")],
            "Does all this apply to contractors too?")
    assert "90" not in r.question and "password" in r.question


def test_a_pronoun_stands_for_the_head_not_every_carried_word() -> None:
    r = ask([("Who's our biggest customer (cash end year)?", "Northmoor Water.")],
            "How many sensors do they have with us now?")
    assert "biggest customer" in r.question and "cash" not in r.question


def test_a_pronoun_is_the_subject_not_what_a_yes_no_question_asked() -> None:
    r = ask([("Is the S200 waterproof?", "Yes, IP67.")], "How long does its battery last?")
    assert r.question == "How long does S200 battery last?"


def test_and_for_x_asks_the_last_question_of_x() -> None:
    r = ask([("How long do we hang on to CVs from candidates we didn't hire?", "6 months.")],
            "And for people who've left?")
    assert r.question.startswith("How long do we hang on to people who've left")
    # "what about X" with no name in X stays a new aspect of the same subject
    r = ask([("What is the IP rating of the S200 sensor?", "IP67.")], "What about the battery?")
    assert r.question.startswith("The battery (") and "S200" in r.question


def test_a_sibling_place_beside_it_replaces_the_carried_place() -> None:
    r = ask([("How much holiday do you get at the Austin office?", "25 days.")],
            "Ok and retirement?")
    assert r.question == "Retirement (Austin office)?"
    r = ask([(r.question, "A 401(k) match.")], "Is it the same in Rotterdam?")
    assert r.question.startswith("Is Retirement") and "Austin" not in r.question


def test_a_plain_name_is_a_sibling_only_where_sameness_is_asked() -> None:
    r = ask([("By how much did Kestrel Microsystems raise its prices?", "By 6%.")],
            "Why does that supplier matter so much to Halden?")
    assert "Kestrel Microsystems" in r.question
    r = ask([("Can I put my pension in the UK scheme?", "Yes.")], "And for the US people?")
    assert "the the" not in r.question and "US people" in r.question


def test_that_quarter_is_the_period_a_turn_before_the_last_named() -> None:
    turns = [Turn("What was pump revenue in Q3 FY2024?", answer="£2m."),
             Turn("How many days of leave do staff get?", answer="25 days.")]
    r = condense(turns, "And the margin for that quarter?", EN)
    assert r.question == "The margin for Q3 FY2024?" and r.refers_to == 0
    assert "leave" not in r.question


def test_this_year_is_the_year_we_are_in_not_one_talked_about() -> None:
    r = ask([("How much leave do UK staff get in FY2024?", "25 days.")],
            "And if I don't use them all this year?")
    assert "this year" in r.question and "FY2024 year" not in r.question


def test_that_noun_only_an_answer_or_cited_title_gave_is_the_name_holding_it() -> None:
    turns = [Turn("How fast must we delete a customer's data when asked?", answer="30 days.",
                  cited=("Data Retention Policy › Deletion requests",)),
             Turn("What time does reception open?", answer="At 08:30.")]
    r = condense(turns, "Who owns that policy?", EN)
    assert r.question == "Who owns Data Retention Policy?" and r.refers_to == 0
    r = ask([("Which firmware fixed the leak?", "Version 2.5.0 fixed it.")],
            "Is anything broken in that version?")
    assert "2.5.0" in r.question


def test_the_one_above_and_below_step_through_the_kbs_family_of_codes() -> None:
    def family(code: str) -> list[str]:
        return ["P100", "P200", "P300"] if code.upper().startswith("P") else []

    def asked(turns: list[Turn], q: str) -> str:
        return condense(turns, q, EN, reading("en"), siblings=family).question

    turns = [Turn("What is the flow rate of the P200?", answer="40 l/min.")]
    above = asked(turns, "And the one above it?")
    assert above == "What is the flow rate of the P300?"
    turns.append(Turn("And the one above it?", standalone=above, answer="60 l/min."))
    # a parallel reference steps from the same code, not from the one the last step reached
    assert asked(turns, "And the one below?") == "What is the flow rate of the P100?"
    assert "P100" in asked(turns[:1], "and the cheap one?")
    # the other one: of the two talked about, the one the last turn was not about
    other = condense(turns, "How heavy is the other one?", EN, reading("en"), siblings=family)
    assert "P200" in other.question and other.kind == TurnKind.FOLLOW_UP
    # no family known: the phrase is left to the other readings
    r = ask([("What is the flow rate of the P200?", "40 l/min.")], "And the one above it?")
    assert "P300" not in r.question


def test_one_persons_pronoun_is_the_first_new_name_not_the_whole_title() -> None:
    r = ask([("Who's our CTO?", "Jane Doe is the Chief Technology Officer (CTO) and Chair of"
              " the Risk Committee. [1]")], "What does she look after?")
    assert r.question == "What does Jane Doe look after?"


def test_that_with_a_noun_after_it_is_no_person() -> None:
    r = ask([("Who's our CTO?", "Jane Doe is the Chief Technology Officer (CTO).")],
            "Who's that lab certified by?")
    # the person the answer named is who "who's that?" asks of, not what "that lab" is
    assert "lab" in r.question and "Jane Doe" not in r.question


def test_that_one_is_one_pronoun() -> None:
    r = ask([("Which pump is rated for hot water?", "The P300 is.")], "How much is that one?")
    assert r.question.startswith("How much is P300") and " one" not in r.question


def test_that_after_anything_opens_a_clause_and_points_back_at_nothing() -> None:
    r = ask([("When was firmware 2.5.0 released?", "In March.")],
            "Is there anything that doesn't work on it?")
    assert r.question.startswith("Is there anything that doesn't work on 2.5.0")


def test_what_about_the_quarter_after_that_moves_the_period() -> None:
    r = ask([("How many pumps did we ship in Q1 FY2025?", "1,200.")],
            "What about the quarter after that?")
    assert r.question == "How many pumps did we ship in Q2 FY2025?"


def test_an_italian_relative_reference() -> None:
    def family(code: str) -> list[str]:
        return ["P100", "P200", "P300"]

    r = condense([Turn("Qual è la portata della P200?", answer="40 l/min.")],
                 "E quello sopra?", vocabulary("it"), reading("it"), siblings=family)
    assert "P300" in r.question


def test_a_pronoun_after_someone_points_at_the_someone() -> None:
    r = ask([("What is the health insurance provider in the Netherlands?", "Zilveren Kruis.")],
            "When someone starts working from home, how long do they have to do the checks?")
    assert r.kind != TurnKind.FOLLOW_UP and "Netherlands" not in r.question


def test_a_which_question_with_a_name_passes_on_the_version_its_answer_gave() -> None:
    r = ask([("Which firmware fixed the Modbus leak?", "Version 2.5.0 fixed the leak. [1]")],
            "Is there anything that doesn't work on it?")
    assert "2.5.0" in r.question and "Modbus" in r.question


def test_the_one_before_that_steps_by_the_kind_the_last_turn_stepped_by() -> None:
    turns = [Turn("How many pumps did we ship in Q2 FY2025?", answer="1,200."),
             Turn("And the quarter before?", standalone="How many pumps did we ship in Q1 FY2025?",
                  answer="1,000.")]
    r = condense(turns, "And the one before that?", EN)
    assert r.question == "How many pumps did we ship in Q4 FY2024?"


def test_asked_again_after_why_is_the_question_the_why_was_of() -> None:
    turns = [Turn("How many pumps did we ship in Q2 FY2025?", answer="1,200."),
             Turn("Why?", standalone="Why how many pumps did we ship in Q2 FY2025?",
                  answer="A new customer.")]
    r = condense(turns, "And the quarter before?", EN)
    assert r.question == "How many pumps did we ship in Q1 FY2025?"


def test_a_follow_up_with_no_word_of_its_own_carries_what_was_asked() -> None:
    r = ask([("What refund do Gold members get if a pump fails twice?", "10%.")],
            "Up to how much?")
    assert "refund" in r.question and "Gold" in r.question


def test_the_year_is_the_year_of_the_period_talked_about() -> None:
    turns = [Turn("How many Edge G2 gateways did we ship in Q3 FY2024?", answer="1,480."),
             Turn("and the quarter before?",
                  "How many Edge G2 gateways did we ship in Q2 FY2024?", answer="1,360.")]
    r = condense(turns, "What was the total for the year?", EN)
    # the year of Q2 FY2024, with what was counted, not the quarter's own figure again
    assert "FY2024" in r.question and "Q2" not in r.question and "Edge G2" in r.question
    assert r.kind == TurnKind.FOLLOW_UP and r.refers_to == 1
    # a step from it is the quarter moved, as before; a period of its own stands alone
    assert "Q3 FY2024" in condense(turns, "And the quarter after?", EN).question
    own = condense(turns, "What was the total for the year to March 2025?", EN)
    assert own.question == "What was the total for the year to March 2025?"


def test_the_enterprise_one_is_what_an_answer_named_with_the_word() -> None:
    turns = [Turn("Our Edge G2 won't join the guest Wi-Fi with a captive portal. Supported?",
                  answer="The Edge G2 supports WPA2-Personal, WPA3-Personal and "
                         "WPA2-Enterprise (PEAP). [1] Captive portals are not supported. [1]"),
             Turn("what security does it work with then?",
                  "What security does Edge G2 work with then?",
                  answer="The Edge G2 is Halden's second-generation gateway. [1]")]
    r = condense(turns, "anything open on the enterprise one?", EN)
    assert r.question == "Anything open on WPA2-Enterprise?" and r.refers_to == 0
    # a word no turn named with is left as typed, read as any follow-up
    assert "enterprise" not in condense(turns, "anything open on the blue one?", EN).question


def test_what_the_answer_introduced_is_carried_when_the_kb_heads_a_part_with_it() -> None:
    turns = [Turn("How many years of warranty does the Edge G2 come with?",
                  answer="The Edge G2 gateway has a warranty period of 3 years. [1]"),
             Turn("can we get more?", "Can we get more (Edge G2 years warranty)?",
                  answer="Extended warranty Customers may buy an extended warranty that adds "
                         "2 years to the warranty period of Edge G2 hardware. [1]")]

    def heads(phrase: str) -> bool:  # the KB has a line "Extended warranty"
        return phrase.lower() == "extended warranty"

    r = condense(turns, "What's the price?", EN, reading("en"), headings=heads)
    assert "extended warranty" in r.question and "Edge G2" in r.question
    # "by when must we order it?" after the price: "it" is still the extended warranty
    turns.append(Turn("What's the price?", r.question,
                      answer="The extended warranty costs 12% of the list price. [1]"))
    r = condense(turns, "By when must we order it?", EN, reading("en"), headings=heads)
    assert "extended warranty" in r.question and " it" not in r.question
    # a phrase the KB heads nothing with is an answer's word in passing: not carried
    plain = condense(turns[:2], "What's the price?", EN)
    assert plain.question == "What's the price (Edge G2)?"


def test_the_first_one_is_what_the_first_turn_was_about() -> None:
    turns = [Turn("Which Edge G2 firmware fixed the CVE in the diagnostics page?",
                  answer="Version 2.4.1 is a security release that fixes the CVE. [1]"),
             Turn("and the version after?", "The version after (2.4.1 Edge G2 firmware)?",
                  answer="Version 2.5.0 adds Modbus TCP. [1]")]
    r = condense(turns, "can we still use the first one?", EN)
    assert "2.4.1" in r.question and "Edge G2" in r.question and "2.5.0" not in r.question
    assert r.refers_to == 0
    # "the first one this year" is the year's first, not the first talked about
    assert "first one this year" in condense(turns, "and the first one this year?", EN).question
