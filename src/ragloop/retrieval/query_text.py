"""Turn any user text into plain search terms, so no query syntax can reach the engine.

Quotes, parentheses, AND/OR/NOT/NEAR, `*`, `-`, `:` and emoji are not operators here: the
text is split into words and the words are OR-ed. Underscores split too, so each term is a
single token for the full-text engine (never an accidental phrase query).
"""

from __future__ import annotations

import re

from ragloop.core.errors import EmptyQueryError

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "s",
        "so",
        "such",
        "t",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "does",
        "do",
        "did",
        "can",
        "could",
        "should",
        "about",
        "not",
        "no",
        "near",
    ]
)


def query_terms(text: str) -> list[str]:
    """Lower-cased words of `text` minus stop words, in order, without repeats.

    Raises EmptyQueryError when the text has no words at all. A text made only of stop
    words keeps them, so "what is it" still searches for something.
    """
    words = [w.lower() for w in _WORD.findall(text or "")]
    if not words:
        raise EmptyQueryError(
            "The query is empty: give some words to search for (punctuation alone is not a query)."
        )
    kept = [w for w in words if w not in STOP_WORDS] or words
    return list(dict.fromkeys(kept))
