"""Turn any user text into plain search terms, so no query syntax can reach the engine.

Quotes, parentheses, AND/OR/NOT/NEAR, `*`, `-`, `:` and emoji are not operators here: the
text is split into words and the words are OR-ed. Underscores split too, so each term is a
single token for the full-text engine (never an accidental phrase query).
"""

from __future__ import annotations

import re

from ragloop.core.errors import EmptyQueryError
from ragloop.retrieval import languages

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# English's query stop words (`search.stop_words` of language/lang/en.json).
STOP_WORDS = languages.stop_words(languages.ENGLISH)


def query_terms(text: str, language: str | None) -> list[str]:
    """Lower-cased words of `text` minus stop words, in order, without repeats.

    `language` is the knowledge base's (None: English): its stop words apply, and in a
    Chinese/Japanese/Korean (or mixed) KB each CJK run becomes the character bigrams the index
    holds. Raises EmptyQueryError when the text has no words at all. A text made only of stop
    words keeps them, so "what is it" still searches for something.
    """
    words = [w.lower() for w in _WORD.findall(text or "")]
    if not words:
        raise EmptyQueryError(
            "The query is empty: give some words to search for (punctuation alone is not a query)."
        )
    lang = languages.get_language(language)
    if lang.bigrams:
        words = languages.bigram_text(" ".join(words)).split()
    stops = languages.stop_words(lang.code)
    kept = [w for w in words if w not in stops] or words
    return list(dict.fromkeys(kept))
