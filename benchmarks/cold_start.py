"""Cold start of a command-line query: today's torch path, the numpy path, and an ONNX peer.

    .venv/bin/python benchmarks/cold_start.py --kb /tmp/examples-kb [--runs 5]
        [--identity examples/evals/rag_hard.jsonl] [--identity-kb /tmp/scifact-kb
         --identity-set ../shared/data/scifact-train --identity-limit 300]

One run prints, for the same knowledge base:

- whole-process cold time (farm-bench: process start to exit, medians of --runs) of one search
  with a query the embedding cache has never seen, for three query embedders:
  `torch` (transformers on torch, as ragloop embedded every query before: import torch and
  transformers, load the model, bf16 probe where the CPU has it), `numpy` (the packaged weights
  in numpy, ragloop's query path now), and `onnxruntime` (the peer: the same weights exported
  once to ONNX from the packaged files, here, with torch.onnx; nothing fetched), each opening
  the KB and searching through ragloop's KnowledgeBase;
- in-process warm time per query (the model loaded; new queries, so no cache hits);
- the real CLI: `ragloop search` and offline `ragloop ask`, cold, whole process;
- identity: for each question of the --identity sets, whether the hybrid top 10 (chunk ids) of
  the numpy path equals the torch path's, and the least query-embedding cosine between them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

T0 = time.perf_counter()  # a child's clock starts before its imports

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
QUERY = "is the S200 waterproof"
WARM_QUERIES = ["what is the battery life", "how is the gateway configured",
                "which certifications does it carry", "maximum operating temperature",
                "who leads the company"]


# -- the embedders compared -------------------------------------------------------------------

def embedder(path: str, onnx_file: Path | None = None):
    from ragloop.embed.local import LocalEmbedder

    if path == "torch":
        return LocalEmbedder(numpy_max_tokens=-1)  # every call on torch, as before
    if path == "numpy":
        return LocalEmbedder()
    if path == "onnxruntime":
        return _ort_embedder(onnx_file)
    raise SystemExit(f"unknown path {path!r}")


def _ort_embedder(onnx_file: Path | None):
    import numpy as np
    import onnxruntime as ort

    from ragloop.embed.local import LocalEmbedder

    assert onnx_file is not None

    class OrtEmbedder(LocalEmbedder):
        """ragloop's tokenization and batching, the forward pass in ONNX Runtime."""

        def __init__(self) -> None:
            super().__init__()
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1  # one short query: as the numpy path
            so.inter_op_num_threads = 1
            self.session = ort.InferenceSession(str(onnx_file), so,
                                                providers=["CPUExecutionProvider"])

        def embed(self, texts: list[str]) -> np.ndarray:
            encodings = self._load_tokenizer().encode_batch(list(texts))
            return self._embed_sorted(encodings, self._run)

        def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            feeds = {"input_ids": ids, "attention_mask": mask,
                     "token_type_ids": np.zeros_like(ids)}
            return self.session.run(None, feeds)[0]

    return OrtEmbedder()


def export_onnx(target: Path) -> None:
    """The packaged MiniLM, mean-pooled, as ONNX (benchmarks/embed.py's export)."""
    sys.path.insert(0, str(HERE))
    from embed import export_onnx as export

    export(target)


# -- the child: one cold process ----------------------------------------------------------------

def child(args: argparse.Namespace) -> int:
    """Open the KB, search a never-seen query (cold), then the warm queries; print JSON."""
    from ragloop.kb import KnowledgeBase

    tag = f" {os.getpid()}-{time.time_ns()}"  # the embedding cache has never seen it
    with KnowledgeBase.open(args.kb, embedder=embedder(args.path, args.onnx),
                            create=False) as kb:
        kb.search(QUERY + tag, 10)
        cold = time.perf_counter() - T0
        warm = []
        for q in WARM_QUERIES:
            t = time.perf_counter()
            kb.search(q + tag, 10)
            warm.append(time.perf_counter() - t)
    print(json.dumps({"path": args.path, "cold_in_process_s": cold,
                      "warm_ms": 1000 * statistics.median(warm)}))
    return 0


# -- the parent -------------------------------------------------------------------------------

def farm_bench(command: list[str], runs: int, log: Path) -> dict[str, float]:
    """Median wall and cpu seconds of `command` as a whole process; its output appends to log."""
    return _farm_bench_shell(" ".join(_quote(c) for c in command), runs, log)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def identity(kb_path: str, questions: list[str]) -> tuple[float, float, int]:
    """(share of questions whose hybrid top 10 is the same, least query cosine, n)."""
    import numpy as np

    from ragloop.kb import KnowledgeBase

    tops: dict[str, list[list[int]]] = {}
    vectors: dict[str, np.ndarray] = {}
    for path in ("torch", "numpy"):
        emb = embedder(path)
        # one question per call, as a search embeds it
        vectors[path] = np.vstack([emb.embed_query([q]) for q in questions])
        with KnowledgeBase.open(kb_path, embedder=_Fixed(emb.name, vectors[path], questions),
                                create=False) as kb:
            tops[path] = [[h.chunk_id for h in kb.search(q, 10)] for q in questions]
    same = sum(a == b for a, b in zip(tops["torch"], tops["numpy"], strict=True))
    cos = float((vectors["torch"] * vectors["numpy"]).sum(axis=1).min())
    return same / len(questions), cos, len(questions)


class _Fixed:
    """An embedder that answers each question with a vector computed beforehand."""

    symmetric = True
    dim = 384

    def __init__(self, name: str, vectors, questions: list[str]) -> None:
        self.name = name
        self._by_text = {q: vectors[i] for i, q in enumerate(questions)}

    def embed(self, texts: list[str]):
        import numpy as np

        return np.vstack([self._by_text[t] for t in texts])

    embed_query = embed


def load_questions(source: Path, limit: int | None) -> list[str]:
    from ragloop.eval.datasets import load_dataset

    data = load_dataset(source).limit(limit)
    return [q.q for q in data.questions]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    c = sub.add_parser("child")
    c.add_argument("path")
    c.add_argument("kb")
    c.add_argument("--onnx", type=Path)
    ap.add_argument("--kb", help="a knowledge base built with the local embedder")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--identity", type=Path, action="append", default=[],
                    help="question sets searched in --kb for the top-10 identity")
    ap.add_argument("--identity-kb", help="another KB for --identity-set")
    ap.add_argument("--identity-set", type=Path)
    ap.add_argument("--identity-limit", type=int)
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "child":
        return child(args)
    if not args.kb:
        ap.error("--kb is required")
    work = Path(tempfile.mkdtemp(prefix="cold-start-"))
    rows = []
    if not args.skip_timing:
        onnx_file = work / "minilm.onnx"
        export_onnx(onnx_file)
        me = [sys.executable, str(Path(__file__).resolve()), "child"]
        for path in ("torch", "numpy", "onnxruntime"):
            log = work / f"{path}.log"
            extra = ["--onnx", str(onnx_file)] if path == "onnxruntime" else []
            figures = farm_bench([*me, path, args.kb, *extra], args.runs, log)
            runs = [json.loads(line) for line in log.read_text().splitlines()
                    if line.startswith("{")]
            warm = statistics.median(r["warm_ms"] for r in runs)
            rows.append((f"search, {path} query embedder", figures, warm))
        ragloop = str(BIN / "ragloop")
        env_free = ["env", "RAGLOOP_MODEL=offline"]
        for name, cmd in (("ragloop search (CLI)", ["search", f"{QUERY} $$"]),
                          ("ragloop ask, offline (CLI)", ["ask", f"{QUERY} $$"])):
            # "$$" (the shell's pid) makes each run's query new to the embedding cache
            log = work / f"cli-{cmd[0]}.log"
            inner = " ".join([*env_free, ragloop, cmd[0], f'"{cmd[1]}"', "--kb",
                              _quote(args.kb)])
            figures = _farm_bench_shell(inner, args.runs, log)
            rows.append((name, figures, None))
        print(f"\nCold start on {args.kb} ({os.cpu_count()} CPUs; whole process, median of"
              f" {args.runs} runs after 1 warm-up; load average {os.getloadavg()[0]:.1f})\n")
        print(f"{'what':38} {'cold wall s':>11} {'(max)':>7} {'cold cpu s':>10}"
              f" {'warm ms/query':>14} {'vs torch':>9}")
        base = rows[0][1]["wall"]
        for name, fig, warm in rows:
            warm_txt = f"{warm:.1f}" if warm is not None else "-"
            print(f"{name:38} {fig['wall']:11.2f} {fig['wall_max']:7.2f} {fig['cpu']:10.2f}"
                  f" {warm_txt:>14} {fig['wall'] / base:8.2f}x")
    sets = [(args.kb, s, None) for s in args.identity]
    if args.identity_set:
        sets.append((args.identity_kb or args.kb, args.identity_set, args.identity_limit))
    for kb_path, source, limit in sets:
        share, cos, n = identity(kb_path, load_questions(source, limit))
        print(f"identity {source} ({n} questions, KB {kb_path}): same hybrid top 10 for"
              f" {100 * share:.1f}%, least query cosine numpy vs torch {cos:.5f}")
    return 0


def _farm_bench_shell(inner: str, runs: int, log: Path) -> dict[str, float]:
    """farm-bench of the shell command `inner` (exec'd; output appended to log)."""
    cmd = ["farm-bench", "-n", str(runs), "--warmup", "1", "--timeout", "1200", "--",
           "sh", "-c", f"exec {inner} >>{_quote(str(log))} 2>&1"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    figures: dict[str, float] = {}
    for line in out.splitlines():
        m = re.match(r"A (wall|cpu) s\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            figures[m.group(1)] = float(m.group(3))
            figures[m.group(1) + "_max"] = float(m.group(4))
    if "wall" not in figures:
        raise SystemExit(f"farm-bench printed no figures:\n{out}")
    return figures


if __name__ == "__main__":
    sys.exit(main())
