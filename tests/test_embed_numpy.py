"""The numpy query path of the local embedder: the same vectors as torch and as
sentence-transformers, chosen by size, and a search that never imports torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ragloop.embed.local import NUMPY_MAX_TOKENS, LocalEmbedder
from ragloop.embed.model_files import local_model_dir

QUERIES = [
    "is the S200 waterproof",
    "What causes the seasons on Earth?",
    "ok",
    "Vitamin D supplementation reduces the risk of fractures in elderly women.",
    " ".join(f"word{i} measurement of protein expression" for i in range(80)),  # > 256 tokens
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(local_model_dir()), device="cpu")
    return st.encode(QUERIES, normalize_embeddings=True)


def test_numpy_path_matches_sentence_transformers_and_torch_fp32(reference) -> None:
    numpy_path = LocalEmbedder()
    vecs = np.vstack([numpy_path.embed([q]) for q in QUERIES])
    assert numpy_path._model is None  # torch never loaded
    assert (vecs * reference).sum(axis=1).min() >= 0.9999
    torch_fp32 = LocalEmbedder(precision="fp32", numpy_max_tokens=-1).embed(QUERIES)
    assert (vecs * torch_fp32).sum(axis=1).min() >= 0.9999


def test_batched_numpy_call_keeps_order(reference) -> None:
    vecs = LocalEmbedder(batch_size=2).embed(QUERIES)
    assert list(np.argmax(vecs @ reference.T, axis=1)) == list(range(len(QUERIES)))


def test_large_call_goes_to_torch() -> None:
    emb = LocalEmbedder(precision="fp32")
    big = [f"passage {i}: " + "the pump seals are rated for high temperature " * 10
           for i in range(NUMPY_MAX_TOKENS // 60)]
    emb.embed(big[:2])
    assert emb._model is None
    emb.embed(big)
    assert emb._model is not None and emb.precision == "fp32"


def test_search_never_imports_torch(small_kb_template, tmp_path) -> None:
    import shutil

    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    code = (
        "import sys\n"
        "from ragloop.kb import KnowledgeBase\n"
        f"with KnowledgeBase.open({str(folder)!r}, create=False) as kb:\n"
        "    assert kb.search('a question nobody asked before 7f3a', 5)\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
