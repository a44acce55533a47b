"""Strings that cannot be stored: lone surrogates, from undecodable bytes in file names or
command-line arguments (Python's surrogateescape) or from "\\ud83d" escapes in JSON."""

from __future__ import annotations


def is_text(value: str) -> bool:
    """False when `value` holds a lone surrogate (SQLite, tantivy, JSON output reject it)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(value: object) -> str:
    """`value` as valid text: undecodable bytes and lone surrogates become U+FFFD."""
    text = str(value)
    if is_text(text):
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")  # the original bytes of a name/argument
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return raw.decode("utf-8", "replace")
