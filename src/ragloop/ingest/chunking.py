"""Token-bounded, overlapping chunks that never cross a section.

All sections of a document go through the MiniLM tokenizer in one batch call (long ones in
whitespace-cut pieces); each section's
token character offsets let windows be cut by slicing its text. A window of `max_tokens`
ends, by preference, at a paragraph break in its second half, else at a sentence end or line
break in its last two thirds, else between words. The next window starts `overlap` tokens
back, moved forward to a sentence start inside the overlap when there is one.
"""

from __future__ import annotations

import re

import numpy as np

from ragloop.core import script
from ragloop.core.types import Chunk, ParsedDocument
from ragloop.embed.model_files import local_tokenizer

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
# a Latin sentence end (core/script.py) or an ellipsis, with its closing quotes; a line break
_SENTENCE = re.compile(rf"(?<=[{script.LATIN_ENDS}…])[\"'”’)\]]*\s+|\n\s*")


def _token_index(starts: np.ndarray, chars: list[int]) -> np.ndarray:
    """Token indexes at which the given character positions begin (sorted, unique)."""
    return np.unique(np.searchsorted(starts, np.asarray(chars, dtype=np.int64), side="left"))


def _last_in(points: np.ndarray, lo: int, hi: int) -> int | None:
    """The largest point p with lo < p <= hi, or None."""
    k = int(np.searchsorted(points, hi, side="right")) - 1
    return int(points[k]) if k >= 0 and points[k] > lo else None


def _first_in(points: np.ndarray, lo: int, hi: int) -> int | None:
    """The smallest point p with lo <= p < hi, or None."""
    k = int(np.searchsorted(points, lo, side="left"))
    return int(points[k]) if k < len(points) and points[k] < hi else None


def split_windows(text: str, offsets: np.ndarray, max_tokens: int,
                  overlap: int) -> list[tuple[int, int]]:
    """(start_char, end_char) of each window over `text`, given its token offsets (an (n, 2)
    array: a 50 MB section has ten million tokens, too many for Python tuples)."""
    n = len(offsets)
    if n <= max_tokens:
        return [(0, len(text))]
    starts = np.ascontiguousarray(offsets[:, 0])
    paragraphs = _token_index(starts, [m.end() for m in _PARAGRAPH.finditer(text)])
    sentences = _token_index(starts, [m.end() for m in _SENTENCE.finditer(text)])
    words = np.flatnonzero(offsets[1:, 0] > offsets[:-1, 1]) + 1
    windows: list[tuple[int, int]] = []
    start = 0
    while start < n:
        limit = start + max_tokens
        if limit >= n:
            end = n
        else:
            end = (_last_in(paragraphs, start + max_tokens // 2, limit)
                   or _last_in(sentences, start + max_tokens // 3, limit)
                   or _last_in(words, start, limit)
                   or limit)
        char_end = int(offsets[end, 0]) if end < n else len(text)
        windows.append((int(offsets[start, 0]), char_end))
        if end >= n:
            break
        back = max(end - overlap, start + 1)
        nxt = (_first_in(sentences, back, end) or _first_in(words, back, end) or back) \
            if overlap else end
        start = max(nxt, start + 1)
    return windows


# Long sections are tokenized in pieces cut at whitespace (where the BERT pre-tokenizer
# splits anyway), so one batch call spreads the work over the cores.
PIECE_CHARS = 4000


def _pieces(text: str) -> list[int]:
    """Start offsets of whitespace-bounded pieces of about PIECE_CHARS characters."""
    cuts = [0]
    n = len(text)
    while n - cuts[-1] > PIECE_CHARS:
        lo, hi = cuts[-1] + PIECE_CHARS // 2, cuts[-1] + PIECE_CHARS
        cut = max(text.rfind("\n", lo, hi), text.rfind(" ", lo, hi))
        if cut <= lo:
            break
        cuts.append(cut)
    return cuts


# Pieces per tokenizer call: enough to keep the cores busy, few enough that the encodings
# of a 50 MB file are not all alive at once.
PIECES_PER_CALL = 256


def section_offsets(texts: list[str]) -> list[np.ndarray]:
    """Token character offsets of each text, an (n, 2) int64 array (MiniLM tokenizer, no
    special tokens)."""
    jobs: list[tuple[int, int, int]] = []  # (text index, start, end)
    for k, text in enumerate(texts):
        cuts = _pieces(text)
        jobs.extend((k, a, b) for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True))
    parts: list[list[np.ndarray]] = [[] for _ in texts]
    tokenizer = local_tokenizer()
    for lo in range(0, len(jobs), PIECES_PER_CALL):
        group = jobs[lo:lo + PIECES_PER_CALL]
        encodings = tokenizer.encode_batch([texts[k][a:b] for k, a, b in group],
                                           add_special_tokens=False)
        for (k, a, _), enc in zip(group, encodings, strict=True):
            parts[k].append(np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2) + a)
    return [np.concatenate(p) if p else np.zeros((0, 2), dtype=np.int64) for p in parts]


def chunk_document(doc: ParsedDocument, max_tokens: int = 200, overlap: int = 40) -> list[Chunk]:
    """The document's chunks, in order; `ord` is the index within the document."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    overlap = max(0, min(overlap, max_tokens // 2))
    sections = [s for s in doc.sections if s.text.strip()]
    if not sections:
        return []
    offsets = section_offsets([s.text for s in sections])
    chunks: list[Chunk] = []
    for section, offs in zip(sections, offsets, strict=True):
        text = section.text
        for start, end in split_windows(text, offs, max_tokens, overlap):
            piece = text[start:end].strip()
            if piece:
                chunks.append(Chunk(doc_id=doc.doc_id, section=section.section,
                                    section_title=section.title, ord=len(chunks), text=piece))
    return chunks
