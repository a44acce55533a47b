"""Invisible text in a PDF: text drawn in render mode 3 (neither filled nor stroked) or 7
(only a clipping path) is on the page for search or copy but nobody sees it, so with
RAGLOOP_HIDDEN_TEXT=drop the PDF reader does not read it (issue 39).

Except on a scan: OCR software lays the words it recognized, invisible, over the page's
image, and that text is what the reader sees in the image. A page whose images cover at least
SCAN_COVER of it keeps its invisible text.

The page's content stream is walked once (pypdf's ContentStream: (operands, operator) pairs),
tracking the render mode (`Tr`, kept across BT/ET, saved by q/Q as part of the graphics state,
ISO 32000-1 §9.3.6 and §8.4.2) and the transformation matrix (`cm`, for how much of the page
an image (`Do`, inline `BI`) covers); the text-showing operators drawn while the mode is
invisible are removed before pypdf extracts the text. Text inside form XObjects is not walked.
"""

from __future__ import annotations

import re
from contextlib import suppress
from typing import Any

INVISIBLE_MODES = (3, 7)
SCAN_COVER = 0.5
_MAYBE = re.compile(rb"[37]\s+Tr\b")
_SHOW = (b"Tj", b"TJ", b"'", b'"')
_Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: _Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


def _times(m: _Matrix, n: _Matrix) -> _Matrix:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + b * c2, a * b2 + b * d2, c * a2 + d * c2, c * b2 + d * d2,
            e * a2 + f * c2 + e2, e * b2 + f * d2 + f2)


def _image_names(page: Any) -> set[str]:
    try:
        xobjects = page["/Resources"]["/XObject"].get_object()
        return {str(name) for name, ref in xobjects.items()
                if ref.get_object().get("/Subtype") == "/Image"}
    except Exception:  # no resources, or a broken dictionary: no images known
        return set()


def visible_operations(operations: list, images: set[str], page_area: float
                       ) -> list | None:
    """The operations without the text shown in an invisible mode; None when there is none,
    or when the page is a scan (its images cover SCAN_COVER of `page_area`)."""
    mode, ctm = 0, _IDENTITY
    saved: list[tuple[int, _Matrix]] = []
    out, dropped, covered = [], 0, 0.0
    for operands, op in operations:
        if op == b"q":
            saved.append((mode, ctm))
        elif op == b"Q" and saved:
            mode, ctm = saved.pop()
        elif op == b"Tr" and operands:
            with suppress(TypeError, ValueError):  # a malformed operand: the mode stays
                mode = int(operands[0])
        elif op == b"cm" and len(operands) == 6:
            with suppress(TypeError, ValueError):
                ctm = _times(tuple(float(x) for x in operands), ctm)  # type: ignore[arg-type]
        elif (op == b"Do" and operands and str(operands[0]) in images) or op == b"INLINE IMAGE":
            a, b, c, d = ctm[:4]
            covered += abs(a * d - b * c)  # the unit square an image fills, on the page
        if op in _SHOW and mode in INVISIBLE_MODES:
            dropped += 1
            if op == b"'":  # "move to the next line and show": keep the move
                out.append(([], b"T*"))
            elif op == b'"' and len(operands) == 3:
                out += [([operands[0]], b"Tw"), ([operands[1]], b"Tc"), ([], b"T*")]
            continue
        out.append((operands, op))
    if not dropped or (page_area > 0 and covered >= SCAN_COVER * page_area):
        return None
    return out


def drop_invisible_text(page: Any, reader: Any) -> bool:
    """Remove the invisible text from a pypdf page (in memory, before extract_text); whether
    any was removed."""
    from pypdf.generic import ContentStream, NameObject

    contents = page.get_contents()
    if contents is None or not _MAYBE.search(contents.get_data()):
        return False  # no invisible mode is ever set: the common case costs one search
    stream = ContentStream(contents, reader)
    box = page.mediabox
    kept = visible_operations(stream.operations, _image_names(page),
                              abs(float(box.width) * float(box.height)))
    if kept is None:
        return False
    # pypdf 7.1 (generic/_data_structures.py): the `operations` setter drops the parsed bytes,
    # and the stream is serialized from the operations when extract_text reads /Contents again
    stream.operations = kept
    page[NameObject("/Contents")] = stream
    return True
