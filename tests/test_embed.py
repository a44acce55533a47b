"""Embedders: the local MiniLM against sentence-transformers, the cache, the OpenAI-compatible
client against a real local HTTP server, and make_embedder."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ragloop.core.config import LOCAL_EMBEDDER
from ragloop.core.errors import ConfigError, ProviderError
from ragloop.embed import CachedEmbedder, make_embedder, text_hash
from ragloop.embed.model_files import count_tokens, local_model_dir

LONG = " ".join(
    f"In trial {i} the treated group showed a {i % 9}.{i % 7} fold change in serum markers."
    for i in range(60)
)
TEXTS = [
    "What causes the seasons on Earth?",
    LONG,
    "Vitamin D supplementation reduces the risk of fractures in elderly women.",
    "ok",
    "The S200 sensor is rated IP67: waterproof to one metre for thirty minutes.",
    "Alterations of the architecture of cerebral white matter in the developing human brain "
    "can affect cortical development and result in functional disabilities.",
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(local_model_dir()), device="cpu")
    assert st.max_seq_length == 256
    return st.encode(TEXTS, normalize_embeddings=True)


@pytest.fixture(scope="module")
def local():
    from ragloop.embed.local import LocalEmbedder

    # small batches: several length-sorted batches; every call on torch (the numpy query path
    # is tested in test_embed_numpy.py)
    return LocalEmbedder(batch_size=2, numpy_max_tokens=-1)


# -- local ---------------------------------------------------------------------------------


def test_import_does_not_load_torch():
    code = "import sys, ragloop, ragloop.embed, ragloop.embed.local; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_local_matches_sentence_transformers(local, reference):
    assert count_tokens(LONG) > 256
    vecs = local.embed(TEXTS)
    assert vecs.shape == (len(TEXTS), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    cos = (vecs * reference).sum(axis=1)
    assert cos.min() >= 0.999, (local.precision, cos)
    assert local.name == LOCAL_EMBEDDER == "local:all-MiniLM-L6-v2"
    assert local.dim == 384
    assert local.precision in ("fp32", "bf16")


def test_local_fp32_path_matches_reference(reference):
    from ragloop.embed.local import LocalEmbedder

    vecs = LocalEmbedder(batch_size=4, precision="fp32", numpy_max_tokens=-1).embed(TEXTS)
    assert (vecs * reference).sum(axis=1).min() >= 0.9999


def test_local_order_preserved_under_length_sorting(local, reference):
    order = [3, 1, 5, 0, 4, 2]
    shuffled = [TEXTS[i] for i in order]
    vecs = local.embed(shuffled)
    cos = (vecs * reference[order]).sum(axis=1)
    assert cos.min() >= 0.999
    # each row is its own text, not merely close to it: best match is the diagonal
    assert list(np.argmax(vecs @ reference.T, axis=1)) == order


def test_local_query_and_passage_same_and_deterministic(local):
    one = local.embed([TEXTS[2]])
    batched = local.embed(TEXTS)
    assert float(one[0] @ batched[2]) >= 0.9999
    assert local.embed([]).shape == (0, 384)


def test_local_rejects_bad_precision(monkeypatch):
    from ragloop.embed.local import LocalEmbedder

    monkeypatch.setenv("RAGLOOP_EMBED_PRECISION", "int4")
    with pytest.raises(ConfigError, match="fp32"):
        LocalEmbedder()


# -- cache ---------------------------------------------------------------------------------


class DictCache:
    def __init__(self) -> None:
        self.data: dict[tuple[str, str], np.ndarray] = {}

    def get_embeddings(self, model: str, hashes: list[str]) -> dict[str, np.ndarray]:
        return {h: self.data[(model, h)] for h in hashes if (model, h) in self.data}

    def put_embeddings(self, model: str, items: dict[str, np.ndarray]) -> None:
        for h, v in items.items():
            self.data[(model, h)] = v


class CountingEmbedder:
    name = "fake:count"
    dim = 4

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    symmetric = True

    def embed_query(self, texts):
        return self.embed(texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, len(t) % self.dim] = 1.0
            out[i, (len(t) + 1) % self.dim] = float(len(t))
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_text_hash_is_sha256():
    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_cache_second_call_embeds_nothing():
    inner, cache = CountingEmbedder(), DictCache()
    emb = CachedEmbedder(inner, cache)
    assert (emb.name, emb.dim) == ("fake:count", 4)
    first = emb.embed(["a", "bb", "ccc"])
    assert inner.calls == [["a", "bb", "ccc"]]
    second = emb.embed(["ccc", "a", "bb"])
    assert len(inner.calls) == 1
    np.testing.assert_array_equal(second, first[[2, 0, 1]])
    assert all(model == "fake:count" for model, _ in cache.data)
    emb.embed(["a", "dddd"])
    assert inner.calls[-1] == ["dddd"]


def test_cache_dedups_within_batch():
    inner = CountingEmbedder()
    emb = CachedEmbedder(inner, DictCache())
    out = emb.embed(["x", "yy", "x", "yy", "x"])
    assert inner.calls == [["x", "yy"]]
    assert out.shape == (5, 4)
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[1], out[3])
    assert emb.embed([]).shape == (0, 4)


def test_cache_is_per_model():
    cache = DictCache()
    a, b = CountingEmbedder(), CountingEmbedder()
    b.name = "fake:other"
    CachedEmbedder(a, cache).embed(["same"])
    CachedEmbedder(b, cache).embed(["same"])
    assert len(a.calls) == len(b.calls) == 1


# -- OpenAI-compatible, against a real HTTP server -----------------------------------------


class FakeEmbeddingsServer:
    """Speaks POST /v1/embeddings like OpenAI; can fail the next N requests with a 500."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.requests: list[dict] = []
        self.fail_next = 0
        self.auth: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.auth.append(self.headers.get("Authorization"))
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": {"message": "not found"}})
                outer.requests.append(body)
                if outer.fail_next > 0:
                    outer.fail_next -= 1
                    return self._send(
                        500,
                        {"error": {"message": "boom", "type": "server_error"}},
                        {"retry-after-ms": "10"},
                    )
                inputs = body["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": outer.vector(t)}
                    for i, t in enumerate(inputs)
                ]
                data.reverse()  # out of order on purpose: the client must sort by index
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body["model"],
                        "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
                    },
                )

            def _send(self, code: int, payload: dict, headers: dict | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(int(text_hash(text)[:8], 16))
        return (rng.standard_normal(self.dim) * 3.0).tolist()  # not unit length

    def __enter__(self) -> FakeEmbeddingsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with FakeEmbeddingsServer() as s:
        yield s


def test_openai_compat_batches_normalizes_and_orders(server):
    from ragloop.embed.openai_compat import OpenAICompatEmbedder

    emb = OpenAICompatEmbedder("nomic-embed", server.url, api_key="sk-test", batch_size=2)
    assert emb.name == "openai:nomic-embed"
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    vecs = emb.embed(texts)
    assert vecs.shape == (5, 8) and vecs.dtype == np.float32
    assert emb.dim == 8  # discovered from the first response, no extra request
    assert [r["input"] for r in server.requests] == [
        ["alpha", "beta"],
        ["gamma", "delta"],
        ["epsilon"],
    ]
    assert all(r["model"] == "nomic-embed" for r in server.requests)
    assert all(r["encoding_format"] == "float" for r in server.requests)
    assert server.auth[0] == "Bearer sk-test"
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    for t, v in zip(texts, vecs, strict=True):
        want = np.asarray(server.vector(t), dtype=np.float32)
        np.testing.assert_allclose(v, want / np.linalg.norm(want), atol=1e-6)


def test_openai_compat_dim_probe(server):
    from ragloop.embed.openai_compat import OpenAICompatEmbedder

    emb = OpenAICompatEmbedder("m", server.url)
    assert emb.dim == 8
    assert len(server.requests) == 1
    assert OpenAICompatEmbedder("m", server.url, dim=8).dim == 8
    assert len(server.requests) == 1


def test_openai_compat_retries_a_500(server):
    from ragloop.embed.openai_compat import OpenAICompatEmbedder

    server.fail_next = 1
    emb = OpenAICompatEmbedder("m", server.url, max_retries=2)
    vecs = emb.embed(["one", "two"])
    assert vecs.shape == (2, 8)
    assert len(server.requests) == 2  # the 500, then the success


def test_openai_compat_gives_up_with_provider_error(server):
    from ragloop.embed.openai_compat import OpenAICompatEmbedder

    server.fail_next = 10
    emb = OpenAICompatEmbedder("m", server.url, max_retries=1)
    with pytest.raises(ProviderError, match="failed"):
        emb.embed(["one"])
    assert len(server.requests) == 2


def test_openai_compat_dim_mismatch(server):
    from ragloop.embed.openai_compat import OpenAICompatEmbedder

    with pytest.raises(ProviderError, match="dimensions"):
        OpenAICompatEmbedder("m", server.url, dim=384).embed(["x"])


def test_make_embedder_openai_from_env(server, monkeypatch):
    monkeypatch.setenv("RAGLOOP_EMBED_BASE_URL", server.url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    emb = make_embedder("openai:text-embedding-3-small")
    assert emb.name == "openai:text-embedding-3-small"
    assert emb.embed(["hello"]).shape == (1, 8)
    assert server.auth[-1] == "Bearer not-needed"
    assert make_embedder("openai:x", base_url="http://elsewhere/v1").base_url == (
        "http://elsewhere/v1"
    )


# -- make_embedder -------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["local", "local:default", "local:all-MiniLM-L6-v2"])
def test_make_embedder_local(spec):
    from ragloop.embed.local import LocalEmbedder

    emb = make_embedder(spec)
    assert isinstance(emb, LocalEmbedder)
    assert emb.name == LOCAL_EMBEDDER and emb.dim == 384


@pytest.mark.parametrize("spec", ["", "bert", "local:bge-small", "openai:", "cohere:embed-v3"])
def test_make_embedder_unknown(spec):
    with pytest.raises(ConfigError, match="openai:<model>") as info:
        make_embedder(spec)
    assert "local:all-MiniLM-L6-v2" in str(info.value)
