import pytest

from ragloop.core.errors import EmptyQueryError, UserError
from ragloop.retrieval.query_text import query_terms


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"exact phrase" (grouped)', ["exact", "phrase", "grouped"]),
        ("sensor AND gateway OR pulse NOT edge", ["sensor", "gateway", "pulse", "edge"]),
        ("NEAR(battery life, 3)", ["battery", "life", "3"]),
        ("senso* -waterproof title:policy", ["senso", "waterproof", "title", "policy"]),
        ("checkpointer_thread_id", ["checkpointer", "thread", "id"]),
        ("is it waterproof? 🌧️💧", ["waterproof"]),
        ("Café £ Übergröße", ["café", "übergröße"]),
    ],
)
def test_any_user_text_becomes_plain_terms(text: str, expected: list[str]) -> None:
    assert query_terms(text, "en") == expected


def test_stop_words_alone_are_still_a_query() -> None:
    assert query_terms("what is it", "en") == ["what", "is", "it"]


@pytest.mark.parametrize("text", ["", "   ", "?!*()", "🌧️💧", '""'])
def test_empty_query_is_a_user_error(text: str) -> None:
    with pytest.raises(EmptyQueryError) as info:
        query_terms(text, "en")
    assert isinstance(info.value, UserError)
    assert "empty" in str(info.value)
