"""An answer written as a stream: what an Answerer's `write` is, and how a text is cut into the
pieces an answer is streamed in when no model writes it token by token.

A `Writing` yields AnswerDeltaEvents (pieces of the answer as they come, or a reset when what
came so far is not the answer) and returns the Draft; the pieces since the last reset, joined,
are the draft's text (the run template makes sure of it, agent/template.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from ragloop.core import script
from ragloop.core.decisions import Draft
from ragloop.core.events import AnswerDeltaEvent

Writing = Generator[AnswerDeltaEvent, None, Draft]
R = TypeVar("R")

# A sentence ends at a sentence-end mark (core/script.py; with the quotes and the citations
# right after it) or a line break, before the space that follows; the space goes with the
# sentence it ends, so the pieces join back. A full-width mark (。！？) needs no space after it.
# This cuts a stream and never drops a character; reading sentences (abbreviations, lists) is
# language/text.py `Reading.split_sentences`.
_CITES = r"(?:\s*\[\d+\])*"
_SENTENCE_END = re.compile(
    rf"(?:[{script.LATIN_ENDS}]['\")\]]*{_CITES}|\n)\s+"
    rf"|[{script.FULL_WIDTH_ENDS}][{script.FULL_WIDTH_CLOSERS}'\")\]]*{_CITES}\s*(?=\S)")


def sentence_pieces(text: str) -> list[str]:
    """The text cut after each sentence: the pieces joined are the text, exactly."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        pieces.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def in_pieces(draft: Draft) -> Writing:
    """A draft written whole (offline, a fixed reply) streamed sentence by sentence."""
    for piece in sentence_pieces(draft.text):
        yield AnswerDeltaEvent(text=piece)
    return draft


def deltas_of(pieces: Generator[str, None, R],
              read: Callable[[str], str] = str) -> Generator[AnswerDeltaEvent, None, R]:
    """A model's streamed reply (`ChatModel.stream`) as the answer's pieces, each passed
    through `read` (the JSON answerer reads one field), empty ones dropped; returns what the
    stream returns (the whole reply)."""
    while True:
        try:
            piece = next(pieces)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        text = read(piece)
        if text:
            yield AnswerDeltaEvent(text=text)


def written(writing: Generator[Any, None, R]) -> R:
    """What a writing returns at its end, its pieces dropped (a caller that wants no
    stream)."""
    while True:
        try:
            next(writing)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
