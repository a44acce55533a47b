"""A passage's candidate sentences with its tables read as records.

A spreadsheet or CSV row is ingested as one line naming its columns ("Version: 22.04;
Codename: Jammy Jellyfish.", ingest/readers/tabular.py), and a PDF, Word or PowerPoint table
as a Markdown table (ingest/readers/office.py `markdown_table`). Sentence splitting joins the
lines of a block, so a table came back as one "sentence" of six rows. Here every row is a
candidate of its own, a Markdown row spelled with its header's column names, so an answer
quotes the row that matches and says what each value is. A row (or a sentence) that is
mostly not words, such as a binary layout of offsets and bit numbers, is no answer: it is
left out (`is_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ragloop.core import script
from ragloop.language.text import Reading

# "Header: value; Header: value." — one record line as the tabular readers write it: a
# header of a few words, a value that holds no sentence end
_ENDS = script.LATIN_ENDS
_PAIR = re.compile(rf"^[^:;{_ENDS}\n]{{1,40}}: (?:(?![{_ENDS}]\s)[^;\n])*$")
MAX_HEADER_WORDS = 5
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_RULE_LINE = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# a word: two letters or more, or a run of Chinese/Japanese characters (one is a word)
_WORDLIKE = re.compile(rf"^[^\W\d_]{{2,}}$|^[{script.UNSPACED_CHARS}]+$", re.UNICODE)
# A candidate needs this share of word tokens (letters, not numbers or hex) to be text.
MIN_WORD_SHARE = 0.4
MIN_TOKENS_CHECKED = 6


def is_record(line: str) -> bool:
    """A tabular reader's row: "Header: value" pairs joined by "; "."""
    pairs = line.strip().rstrip(".").split("; ")
    return all(_PAIR.match(p) and len(p.split(": ", 1)[0].split()) <= MAX_HEADER_WORDS
               for p in pairs)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_records(lines: list[str]) -> list[str]:
    """A Markdown table's body rows as records named by its header row."""
    header: list[str] | None = None
    out: list[str] = []
    for line in lines:
        if _RULE_LINE.match(line):
            continue
        cells = _cells(line)
        if header is None:
            header = cells
            continue
        pairs = [(header[i] if i < len(header) and header[i] else f"column {i + 1}", v)
                 for i, v in enumerate(cells) if v]
        if pairs:
            out.append("; ".join(f"{h}: {v}" for h, v in pairs) + ".")
    return out


def is_text(sentence: str) -> bool:
    """Mostly words: not a run of numbers, codes and symbols."""
    tokens = _TOKEN.findall(sentence)
    if len(tokens) < MIN_TOKENS_CHECKED:
        return True
    return sum(bool(_WORDLIKE.match(t)) for t in tokens) / len(tokens) >= MIN_WORD_SHARE


def candidate_sentences(text: str, rd: Reading) -> Iterator[str]:
    """The passage's sentences; each table row (record line or Markdown row) on its own."""
    prose: list[str] = []
    table: list[str] = []

    def flush_prose() -> Iterator[str]:
        if prose:
            yield from rd.split_sentences("\n".join(prose))
            prose.clear()

    def flush_table() -> Iterator[str]:
        if table:
            yield from table_records(table)
            table.clear()

    for line in (text or "").split("\n"):
        if _TABLE_LINE.match(line):
            yield from flush_prose()
            table.append(line)
            continue
        yield from flush_table()
        if is_record(line):
            yield from flush_prose()
            yield line.strip()
        else:
            prose.append(line)
    yield from flush_table()
    yield from flush_prose()
