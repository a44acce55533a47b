"""Text from images by OCR: RapidOCR (Apache-2.0) on onnxruntime, with the PP-OCRv4 detection
and recognition weights that ship inside the `rapidocr-onnxruntime` wheel, so nothing is
fetched at run time. It is the extra `ragloop[ocr]` (it brings OpenCV and Shapely); without
it an image or a scanned PDF is skipped with that reason.

Used for image files and for the pages of a PDF that have no text layer (readers/pdf.py).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragloop.core.errors import ReaderError
from ragloop.core.types import ParsedDocument, SectionText
from ragloop.ingest.readers.base import reader
from ragloop.ingest.sections import clean_text

INSTALL_HINT = "OCR needs the extra ragloop[ocr] (pip install 'ragloop[ocr]')"
# Recognised lines below this confidence are noise (specks, ruled lines read as text).
MIN_SCORE = 0.5


def ocr_available() -> bool:
    return importlib.util.find_spec("rapidocr_onnxruntime") is not None


@lru_cache(maxsize=1)
def _engine() -> Any:
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR()


def ocr_image(image: Any) -> str:
    """The text of a PIL image, line by line in reading order (top to bottom, then left to
    right within a line); ReaderError when OCR is not installed."""
    if not ocr_available():
        raise ReaderError(INSTALL_HINT)
    result, _ = _engine()(np.asarray(image.convert("RGB")))
    boxes = []
    for box, text, score in result or []:
        if float(score) < MIN_SCORE or not str(text).strip():
            continue
        ys = [p[1] for p in box]
        boxes.append((min(ys), max(ys), min(p[0] for p in box), str(text).strip()))
    boxes.sort()
    lines: list[list[tuple[float, str]]] = []
    bottom = -1.0
    for top, low, left, text in boxes:
        # a box whose top is above the middle of the current line's last box: same line
        if lines and top < bottom:
            lines[-1].append((left, text))
        else:
            lines.append([(left, text)])
        bottom = top + (low - top) / 2
    return clean_text("\n".join(" ".join(t for _, t in sorted(line)) for line in lines))


@reader
class ImageReader:
    suffixes: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp")
    mime = "image/*"

    def read(self, path: Path, doc_id: str) -> list[ParsedDocument]:
        from PIL import Image, UnidentifiedImageError

        if not ocr_available():
            raise ReaderError(f"an image: {INSTALL_HINT}")
        try:
            with Image.open(path) as image:
                text = ocr_image(image)
        except (UnidentifiedImageError, OSError) as exc:
            raise ReaderError(f"unreadable image ({exc})") from exc
        if not text:
            raise ReaderError("no text found in the image by OCR")
        title = Path(path).stem
        return [ParsedDocument(doc_id=doc_id, title=title, source=str(path),
                               sections=[SectionText("1", (title,), text)],
                               mime=f"image/{Path(path).suffix.lower().lstrip('.')}",
                               metadata={"ocr": "rapidocr"})]
