"""Token-bounded, overlapping chunks that never cross a section.

One tokenizer pass per section gives character offsets, so windows are cut by slicing the
text; a window ends at a sentence or paragraph boundary when one lies in its last 40%.
"""

from __future__ import annotations

import re

from ragloop.embed.model_files import local_tokenizer
from ragloop.types import Chunk, ParsedDocument

_BOUNDARY = re.compile(r"(?:[.!?:;][\"')\]]*\s|\n)")


def _cut_points(text: str, offsets: list[tuple[int, int]], max_tokens: int,
                overlap: int) -> list[tuple[int, int]]:
    """(start_char, end_char) of each window."""
    n = len(offsets)
    if n <= max_tokens:
        return [(0, len(text))]
    windows = []
    start = 0
    while start < n:
        end = min(start + max_tokens, n)
        if end < n:
            floor = start + int(max_tokens * 0.6)
            for i in range(end - 1, floor - 1, -1):
                gap = text[offsets[i][1]:offsets[i + 1][0] + 1]
                if _BOUNDARY.match(text, offsets[i][1] - 1) or "\n" in gap:
                    end = i + 1
                    break
        char_end = offsets[end][0] if end < n else len(text)
        windows.append((offsets[start][0], char_end))
        if end >= n:
            break
        start = max(end - overlap, start + 1)
    return windows


def chunk_document(doc: ParsedDocument, max_tokens: int = 200, overlap: int = 40) -> list[Chunk]:
    tokenizer = local_tokenizer()
    overlap = max(0, min(overlap, max_tokens // 2))
    chunks: list[Chunk] = []
    for section in doc.sections:
        text = section.text
        if not text.strip():
            continue
        offsets = tokenizer.encode(text, add_special_tokens=False).offsets
        for start, end in _cut_points(text, offsets, max_tokens, overlap):
            piece = text[start:end].strip()
            if piece:
                chunks.append(Chunk(doc_id=doc.doc_id, section=section.section,
                                    section_title=section.title, ord=len(chunks), text=piece))
    return chunks
