"""One string field of a JSON object read while the object is still being written: the LLM
answerer's reply is `{"answer": "...", "missing": [...], ...}` (one JSON decision, constrained
by the provider), and the `answer` string is what a user watches arrive.

`FieldStream.feed(raw)` takes the reply's text pieces as the model streams them and returns the
decoded characters of the field that they complete: escapes (`\\n`, `\\"`, `\\uXXXX`, surrogate
pairs) decoded as `json.loads` would, whitespace at the start dropped and at the end held back
until more text follows, so the pieces joined equal the field's value stripped (what the
answerer keeps). Text before the key (a `<think>` preamble, a code fence) and after the closing
quote is ignored.
"""

from __future__ import annotations

import json
import re


class FieldStream:
    def __init__(self, field: str) -> None:
        self._key = re.compile(r'"' + re.escape(field) + r'"\s*:\s*"')
        self._seen = ""  # raw text before the field's value starts
        self._raw = ""  # raw characters of the value not decoded yet (a partial escape)
        self._inside = False
        self._done = False
        self._started = False  # a non-space character was given out
        self._held = ""  # trailing whitespace not given out yet

    def feed(self, piece: str) -> str:
        """The field's characters that `piece` completes ("" when none)."""
        if self._done:
            return ""
        if not self._inside:
            self._seen += piece
            match = self._key.search(self._seen)
            if match is None:
                return ""
            self._inside = True
            piece, self._seen = self._seen[match.end():], ""
        return self._trimmed(self._decode(piece))

    def _decode(self, piece: str) -> str:
        text = self._raw + piece
        cut, closed = _scan(text)
        text, self._raw, self._done = text[:cut], ("" if closed else text[cut:]), closed
        try:
            return str(json.loads(f'"{text}"', strict=False))
        except json.JSONDecodeError:  # a bad escape: the characters as written
            return text

    def _trimmed(self, text: str) -> str:
        if not self._started:
            text = text.lstrip()
            if not text:
                return ""
            self._started = True
        text = self._held + text
        body = text.rstrip()
        self._held = text[len(body):]
        return body


def _scan(text: str) -> tuple[int, bool]:
    """How much of `text` (the inside of a JSON string, from some point on) decodes now, and
    whether the string closes there: stops at the first unescaped `"`, or before an escape
    still being written (a lone backslash, `\\u` short of 4 hex digits, a high surrogate
    whose low half has not come)."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            return i, True
        if ch != "\\":
            i += 1
            continue
        if i + 1 >= n:
            return i, False
        if text[i + 1] != "u":
            i += 2
            continue
        if i + 6 > n:
            return i, False
        high = text[i + 2:i + 4].lower() in ("d8", "d9", "da", "db")
        if high and i + 12 > n and "\\u".startswith(text[i + 6:i + 8]):
            return i, False  # a high surrogate: its low half may still come
        i += 6
    return n, False
