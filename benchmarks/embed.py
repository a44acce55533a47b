"""Local embedding paths side by side: speed and faithfulness against sentence-transformers.

    .venv/bin/python benchmarks/embed.py [corpus.jsonl] [-n 400] [--repeat 1]

Reads the first N passages (the ``text`` field of a BEIR ``corpus.jsonl``), embeds them with
sentence-transformers (the reference) and with each candidate path, and prints passages/s, the
ratio to the reference, and min / mean cosine to the reference. Every timing includes
tokenization and runs after a short warm-up. ONNX Runtime rows need the ``onnx`` package for
the export (not a ragloop dependency); without it they are skipped. The export is made locally
from the shipped weights into a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "../shared/data/scifact-train/corpus.jsonl"
FAITHFUL = 0.999


def load_texts(path: Path, n: int) -> list[str]:
    texts: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if len(texts) >= n:
                break
            text = json.loads(line).get("text") or ""
            if text.strip():
                texts.append(text)
    return texts


def timed(fn: Callable[[list[str]], np.ndarray], texts: list[str], repeat: int):
    fn(texts[:8])  # warm-up: load, first-call allocations
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(texts)
        best = min(best, time.perf_counter() - t)
    vecs = np.asarray(out, dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return len(texts) / best, vecs


def hf_autocast_bf16(batch_size: int) -> Callable[[list[str]], np.ndarray]:
    """Plain transformers, fp32 weights, matmuls under torch.autocast(bfloat16)."""
    import torch

    from ragloop.embed.local import LocalEmbedder

    emb = LocalEmbedder(batch_size=batch_size, precision="fp32")

    def run(texts: list[str]) -> np.ndarray:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return emb.embed(texts)

    return run


def export_onnx(target: Path) -> None:
    """The shipped MiniLM, mean-pooled, as ONNX (torch.onnx's TorchScript exporter; needs
    ``onnx``): written from the packaged weights, nothing fetched."""
    import torch
    from transformers import AutoModel

    from ragloop.embed.model_files import local_model_dir

    model = AutoModel.from_pretrained(str(local_model_dir()), attn_implementation="eager").eval()

    class Pooled(torch.nn.Module):
        def __init__(self, m: torch.nn.Module) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.m(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            w = attention_mask.unsqueeze(-1).to(h.dtype)
            return (h * w).sum(1) / w.sum(1).clamp(min=1e-9)

    names = ["input_ids", "attention_mask", "token_type_ids"]
    sample = tuple(torch.ones(2, 16, dtype=torch.long) for _ in names)
    with torch.inference_mode():
        torch.onnx.export(
            Pooled(model),
            sample,
            str(target),
            dynamo=False,
            input_names=names,
            output_names=["embedding"],
            dynamic_axes={**{k: {0: "b", 1: "s"} for k in names}, "embedding": {0: "b"}},
            opset_version=17,
        )


def onnx_paths(batch_size: int, workdir: Path) -> dict[str, Callable[[list[str]], np.ndarray]]:
    """ONNX Runtime fp32 and dynamic int8, exported from the shipped weights (needs ``onnx``)."""
    import onnxruntime as ort
    import torch

    from ragloop.embed.local import LocalEmbedder

    fp32 = workdir / "minilm.onnx"
    export_onnx(fp32)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8 = workdir / "minilm-int8.onnx"
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)

    class OrtEmbedder(LocalEmbedder):
        """The same tokenization and length-sorted batching, the forward pass in ONNX Runtime."""

        def __init__(self, path: Path) -> None:
            super().__init__(batch_size=batch_size, precision="fp32")
            so = ort.SessionOptions()
            so.intra_op_num_threads = torch.get_num_threads()
            so.inter_op_num_threads = 1
            self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])

        def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            return self.session.run(None, feeds)[0]

    return {
        "onnxruntime fp32 (torch.onnx export)": OrtEmbedder(fp32).embed,
        "onnxruntime int8 dynamic quant": OrtEmbedder(int8).embed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("-n", type=int, default=400, help="number of passages (default 400)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per path; best is kept")
    ap.add_argument("--no-onnx", action="store_true", help="skip the ONNX Runtime rows")
    args = ap.parse_args(argv)

    import torch
    from sentence_transformers import SentenceTransformer

    from ragloop.embed.local import LocalEmbedder
    from ragloop.embed.model_files import local_model_dir, local_tokenizer

    texts = load_texts(args.corpus.resolve(), args.n)
    tok = local_tokenizer()
    lengths = [min(256, len(tok.encode(t).ids)) for t in texts]
    print(
        f"{len(texts)} passages from {args.corpus.resolve()}; tokens (truncated at 256): "
        f"mean {np.mean(lengths):.0f}, {np.mean(np.array(lengths) == 256):.0%} at 256; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs, batch {args.batch_size}",
        flush=True,
    )

    st = SentenceTransformer(str(local_model_dir()), device="cpu")

    def reference(batch: list[str]) -> np.ndarray:
        return st.encode(batch, batch_size=args.batch_size, normalize_embeddings=True)

    rows: list[tuple[str, float, float, float]] = []
    ref_rate, ref = timed(reference, texts, args.repeat)
    rows.append(("sentence-transformers fp32 (reference)", ref_rate, 1.0, 1.0))
    print(f"  reference: {ref_rate:.1f} passages/s", flush=True)

    candidates: dict[str, Callable[[list[str]], np.ndarray]] = {}
    candidates["transformers fp32, sdpa, length-sorted"] = LocalEmbedder(
        batch_size=args.batch_size, precision="fp32"
    ).embed
    candidates["transformers fp32 + autocast bf16"] = hf_autocast_bf16(args.batch_size)
    chosen = LocalEmbedder(batch_size=args.batch_size)  # what ragloop uses ("auto")
    candidates["LocalEmbedder (auto)"] = chosen.embed
    if not args.no_onnx:
        try:
            import onnx  # noqa: F401
        except ImportError:
            print("  onnx not installed: ONNX Runtime rows skipped", flush=True)
        else:
            tmp = tempfile.TemporaryDirectory()
            candidates.update(onnx_paths(args.batch_size, Path(tmp.name)))

    for name, fn in candidates.items():
        rate, vecs = timed(fn, texts, args.repeat)
        cos = (vecs * ref).sum(axis=1)
        if name.startswith("LocalEmbedder"):
            name = f"LocalEmbedder (auto → {chosen.precision})"
        rows.append((name, rate, float(cos.min()), float(cos.mean())))
        print(f"  {name}: {rate:.1f} passages/s, min cos {cos.min():.6f}", flush=True)

    width = max(len(r[0]) for r in rows)
    print()
    print(f"| {'path':{width}} | passages/s | vs ref | min cos | mean cos | faithful |")
    print(f"| {'-' * width} | ---------: | -----: | ------: | -------: | :------: |")
    for name, rate, mn, me in rows:
        ok = "yes" if mn >= FAITHFUL else "NO"
        print(
            f"| {name:{width}} | {rate:10.1f} | {rate / ref_rate:5.2f}x | {mn:.5f} | {me:.6f} "
            f"| {ok:^8} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
