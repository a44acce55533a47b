"""The MiniLM encoder in plain numpy: the query path of the local embedder, with no torch.

A command-line search embeds one short query. Importing torch and transformers and building
the model took most of a cold `ragloop search` (issue 31: 18.8 s of 20.7 s under load); the
six-layer encoder itself is a few small matrix products for a ten-token query. So queries run
here, on the packaged weights read straight from their safetensors file (memory-mapped: only the
embedding rows a query uses are read from disk), and torch loads only for batches (ingest).

The arithmetic is BERT's as transformers' ``BertModel`` does it (post-LayerNorm, eps 1e-12,
exact erf GELU, additive attention mask), float32 throughout; tests/test_embed_numpy.py checks
it against the torch path (cosine >= 0.9999).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

_LAYER_NORM_EPS = 1e-12
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file, memory-mapped, as numpy arrays.

    Format (https://huggingface.co/docs/safetensors, "Format"): an 8-byte little-endian header
    length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}} (offsets
    relative to the byte after the header), then the raw little-endian data."""
    with open(path, "rb") as f:
        (n,) = np.frombuffer(f.read(8), dtype="<u8")
        header = json.loads(f.read(int(n)))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + int(n)
    out: dict[str, np.ndarray] = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        buf = raw[base + begin : base + end]
        if meta["dtype"] == "BF16":  # bfloat16 is the top half of a float32
            wide = buf.view("<u2").astype(np.uint32) << 16
            array = wide.view(np.float32)
        elif meta["dtype"] in _DTYPES:
            array = buf.view(np.dtype(_DTYPES[meta["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"{path}: tensor {name} has dtype {meta['dtype']}, not read here")
        out[name] = array.reshape(meta["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to float32 precision (numpy has none; scipy is not a dependency): Abramowitz &
    Stegun 7.1.26 has error 1.5e-7, the float32 rounding of GELU's inputs is larger."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                        + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))).astype(np.float32, copy=False)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + _LAYER_NORM_EPS) * weight + bias


class NumpyBert:
    """A BERT encoder (the shipped MiniLM) over memory-mapped weights: mean-pooled, float32."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"{model_dir}: hidden_act {config['hidden_act']!r} is not gelu")
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        tensors = read_safetensors(model_dir / "model.safetensors")
        # a sentence-transformers export has bare names; a BertForX checkpoint prefixes "bert."
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
        self._w = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        # the per-layer matrices transposed once (x @ W.T each call would copy); small tensors
        # are read into memory, the word embeddings stay mapped
        self._t: dict[str, np.ndarray] = {}
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (self._w[f"{p}attention.self.{n}.weight"] for n in ("query", "key", "value"))
            self._t[f"{i}.qkv"] = np.ascontiguousarray(np.concatenate([q, k, v]).T, np.float32)
            self._t[f"{i}.qkv_b"] = np.concatenate([
                self._w[f"{p}attention.self.{n}.bias"] for n in ("query", "key", "value")
            ]).astype(np.float32)
            for short, name in (("ao", "attention.output.dense"), ("in", "intermediate.dense"),
                                ("out", "output.dense")):
                self._t[f"{i}.{short}"] = np.ascontiguousarray(
                    self._w[f"{p}{name}.weight"].T, np.float32)
                self._t[f"{i}.{short}_b"] = np.asarray(self._w[f"{p}{name}.bias"], np.float32)
            for short, name in (("ln1", "attention.output.LayerNorm"), ("ln2", "output.LayerNorm")):
                self._t[f"{i}.{short}_w"] = np.asarray(self._w[f"{p}{name}.weight"], np.float32)
                self._t[f"{i}.{short}_b"] = np.asarray(self._w[f"{p}{name}.bias"], np.float32)

    def pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean of the last hidden states over the mask: (batch, width) → (batch, hidden)."""
        from threadpoolctl import threadpool_limits

        # One BLAS thread: a query's products are a few small matrices, and OpenBLAS's spinning
        # worker threads made one query take 2.3 s instead of 0.02 s on 2 busy cores.
        with threadpool_limits(1, user_api="blas"):
            return self._pooled(ids, mask)

    def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, t = self._w, self._t
        batch, width = ids.shape
        x = (np.asarray(w["embeddings.word_embeddings.weight"][ids.reshape(-1)], np.float32)
             .reshape(batch, width, -1)
             + np.asarray(w["embeddings.position_embeddings.weight"][:width], np.float32)
             + np.asarray(w["embeddings.token_type_embeddings.weight"][0], np.float32))
        x = _layer_norm(x, np.asarray(w["embeddings.LayerNorm.weight"], np.float32),
                        np.asarray(w["embeddings.LayerNorm.bias"], np.float32))
        hidden = x.shape[-1]
        head = hidden // self.heads
        # additive mask as BertModel builds it: the dtype's minimum where the mask is 0
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min)
        bias = bias.astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head))
        for i in range(self.layers):
            qkv = x @ t[f"{i}.qkv"] + t[f"{i}.qkv_b"]
            q, k, v = (qkv[..., j * hidden:(j + 1) * hidden]
                       .reshape(batch, width, self.heads, head).transpose(0, 2, 1, 3)
                       for j in range(3))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, width, hidden)
            attn = context @ t[f"{i}.ao"] + t[f"{i}.ao_b"]
            x = _layer_norm(attn + x, t[f"{i}.ln1_w"], t[f"{i}.ln1_b"])
            inner = _gelu(x @ t[f"{i}.in"] + t[f"{i}.in_b"])
            x = _layer_norm(inner @ t[f"{i}.out"] + t[f"{i}.out_b"] + x,
                            t[f"{i}.ln2_w"], t[f"{i}.ln2_b"])
        weights = mask[..., None].astype(np.float32)
        return (x * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
