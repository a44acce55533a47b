"""Shared helpers for the retrieval and quality benchmarks: data paths, timing, percentiles,
and the cached real MiniLM base set (passages + queries) that synthetic corpora are built from.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# RAGLOOP_BENCH_DATA: the shared data folder when the checkout is not beside it (a worktree)
DATA = Path(os.environ.get("RAGLOOP_BENCH_DATA") or ROOT / ".." / "shared" / "data").resolve()
OUT = ROOT / "benchmarks" / "out"
DATASETS = ("scifact-train", "hotpotqa-dev")
EMBEDDER_SPEC = "local:all-MiniLM-L6-v2"

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def machine_note() -> str:
    load = os.getloadavg()
    return (f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores,"
            f" load avg {load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f},"
            f" Python {platform.python_version()}")


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def percentiles(ms: list[float]) -> tuple[float, float]:
    a = np.asarray(ms, dtype=np.float64)
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


class Timer:
    """Wall seconds, and CPU seconds of this process (all threads): on a shared machine the
    CPU figure is the one other jobs disturb least."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu_start


def dir_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tantivy_index(folder: Path, docs: Iterable[tuple[int, str]]):
    """A tantivy index (en_stem, term frequencies) of (chunk_id, text) pairs in `folder`: the
    exact-BM25 peer of the retrieval benchmarks."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_unsigned_field("chunk_id", stored=False, indexed=True, fast=True)
    sb.add_text_field("text", stored=False, tokenizer_name="en_stem", index_option="freq")
    index = tantivy.Index(sb.build(), path=str(folder))
    w = index.writer(heap_size=256_000_000, num_threads=2)
    for chunk_id, text in docs:
        doc = tantivy.Document()
        doc.add_unsigned("chunk_id", chunk_id)
        doc.add_text("text", text)
        w.add_document(doc)
    w.commit()
    w.wait_merging_threads()
    index.reload()
    return index


def tantivy_top(index, k: int) -> Callable[[list[str]], list[int]]:
    """(query terms) -> the chunk_ids of the top k BM25 hits."""
    searcher = index.searcher()

    def top(terms: list[str]) -> list[int]:
        hits = searcher.search(index.parse_query(" ".join(terms), ["text"]), k, count=False).hits
        return searcher.fast_field_values("chunk_id", [a for _, a in hits]) if hits else []

    return top


def mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.0f}"


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A GitHub markdown table."""
    cells = [[str(c) for c in r] for r in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(lines)


def base_set(max_passages: int = 12_000) -> dict:
    """Real passages and queries from both datasets with their real MiniLM embeddings.

    Embedded once and cached under benchmarks/out/ (base_*.npy + base_meta.json).
    Returns {"passages": [str], "sentences": [[str]] (per passage), "pvecs": (P, 384),
    "queries": [str], "qvecs": (Q, 384)}.
    """
    OUT.mkdir(parents=True, exist_ok=True)
    meta_path = OUT / "base_meta.json"
    pv_path, qv_path = OUT / "base_pvecs.npy", OUT / "base_qvecs.npy"
    if meta_path.exists() and pv_path.exists() and qv_path.exists():
        meta = json.loads(meta_path.read_text())
        meta["pvecs"], meta["qvecs"] = np.load(pv_path), np.load(qv_path)
    else:
        passages, queries = [], []
        for name in DATASETS:
            for row in read_jsonl(DATA / name / "corpus.jsonl"):
                text = (row.get("text") or "").strip()
                if text:
                    title = (row.get("title") or "").strip()
                    passages.append(f"{title}\n{text}" if title else text)
            queries += [r["text"] for r in read_jsonl(DATA / name / "queries.jsonl")]
        passages = passages[:max_passages]
        from ragloop.embed import make_embedder

        emb = make_embedder(EMBEDDER_SPEC, batch_size=64)
        t = time.perf_counter()
        pvecs = emb.embed(passages)
        print(f"embedded {len(passages)} base passages in {time.perf_counter() - t:.1f} s",
              flush=True)
        qvecs = emb.embed(queries)
        np.save(pv_path, pvecs.astype(np.float32))
        np.save(qv_path, qvecs.astype(np.float32))
        meta = {"passages": passages, "queries": queries}
        meta_path.write_text(json.dumps(meta))
        meta["pvecs"], meta["qvecs"] = pvecs, qvecs
    meta["sentences"] = [[s for s in _SENTENCE.split(p.replace("\n", " ")) if s]
                         for p in meta["passages"]]
    return meta


if __name__ == "__main__":
    b = base_set()
    print(len(b["passages"]), b["pvecs"].shape, len(b["queries"]), b["qvecs"].shape)
