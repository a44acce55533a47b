"""Reader speed per format on the sample files of tests/format_samples.py, with a peer beside
each where one is installed: PDF text by pypdf alone (the reader before tables) against pypdf
plus pdfplumber's table pass; an HTML page by the selectolax HTML reader against trafilatura's
main-text extraction (the web reader); the scanned page's OCR at the two ways of getting its
image (the reader takes a one-image page's embedded image at its own resolution; the peer
renders the page at 200 dpi, as the reader does for any other page).

    python benchmarks/readers.py [--repeat 5]

Prints the median milliseconds per file and the ratio to the peer. Quality (does the section
that answers each sample's question hold the answer) is checked by tests/test_formats.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from format_samples import PAGE, make_files

from ragloop.ingest.readers import read_file
from ragloop.ingest.readers.html import parse_html
from ragloop.ingest.readers.ocr import ocr_available, ocr_image
from ragloop.ingest.readers.web import page_document


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def pypdf_only(path: Path) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(str(path)).pages]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ragloop-readers-"))
    samples = make_files(folder)
    print(f"{'file':<18} {'reader ms':>10}  peer")
    for s in samples:
        if "scan" in s.name and not ocr_available():
            print(f"{s.name:<18} {'-':>10}  (no OCR: pip install 'ragloop[ocr]')")
            continue
        repeat = 1 if "scan" in s.name else args.repeat
        ms = median_ms(lambda s=s: read_file(folder / s.name, s.name), repeat)
        peer = ""
        if s.name == "lab.pdf":
            base = median_ms(lambda: pypdf_only(folder / "lab.pdf"), args.repeat)
            peer = f"pypdf alone {base:.1f} ms (x{ms / base:.1f} for the tables)"
        if "scan" in s.name:
            import pdfplumber

            with pdfplumber.open(str(folder / s.name)) as pdf:
                image = pdf.pages[0].to_image(resolution=200).original
            rendered = median_ms(lambda image=image: ocr_image(image), 1)
            peer = f"OCR of the page rendered at 200 dpi {rendered:.0f} ms (x{rendered / ms:.2f})"
        print(f"{s.name:<18} {ms:>10.1f}  {peer}")
    web = median_ms(lambda: page_document("http://example.org/news.html", PAGE), args.repeat)
    plain = median_ms(lambda: parse_html(PAGE, "news.html", "news.html"), args.repeat)
    print(f"{'news.html':<18} {web:>10.1f}  selectolax HTML reader {plain:.1f} ms"
          f" (trafilatura x{web / plain:.1f}, and it drops the navigation and footer)")


if __name__ == "__main__":
    main()
