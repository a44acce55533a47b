"""Encoding detection: ragloop's decode_bytes (BOM, strict UTF-8, cp1252, latin-1) vs
charset-normalizer's from_bytes(...).best(), on the reader tests' samples and the example
knowledge base: time per file (ratio) and whether the decoded text is the same.

    python benchmarks/encoding.py
"""

from __future__ import annotations

import time
from pathlib import Path

from charset_normalizer import from_bytes

from ragloop.ingest.readers.text import decode_bytes

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = {
    "cp1252": "Prices\n\nA café costs £3 – “cheap”.\n".encode("cp1252"),
    "latin-1 (0x81)": b"caf\xe9 \x81 ok",
    "utf-16 BOM": "# Café\n\nNaïve £5 text.\n".encode("utf-16"),
    "utf-8-sig": "# Café\n\nNaïve £5 text.\n".encode("utf-8-sig"),
    "cp1252 menu": "Café menu: crème brûlée costs £4.\n".encode("cp1252"),
}
SAMPLES.update(
    {
        p.name: p.read_bytes()
        for p in sorted((ROOT / "examples" / "kb").rglob("*"))
        if p.suffix in (".md", ".txt", ".html")
    }
)


def library(data: bytes) -> str:
    best = from_bytes(data).best()
    return str(best) if best is not None else ""


def timed(fn, data: bytes, repeat: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn(data)
    return (time.perf_counter() - start) / repeat


def main() -> None:
    ours = theirs = 0.0
    differ = []
    for name, data in SAMPLES.items():
        ours += timed(decode_bytes, data)
        theirs += timed(library, data)
        if decode_bytes(data) != library(data):
            differ.append(name)
    print(
        f"{len(SAMPLES)} files: decode_bytes {ours * 1e3:.2f} ms, charset-normalizer"
        f" {theirs * 1e3:.2f} ms (x{theirs / ours:.0f} slower)"
    )
    print(f"decoded text differs on {len(differ)}: {', '.join(differ) or '-'}")


if __name__ == "__main__":
    main()
