"""The exact vector path (small KBs, filtered searches) runs its product on one BLAS thread:
OpenBLAS's spinning workers made its p95 50 ms instead of 0.4 ms at 3,000 chunks on 2 busy
cores."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from threadpoolctl import threadpool_info

from ragloop.storage.sqlite import indexes
from ragloop.storage.sqlite.indexes import VectorIndex


def blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_limits_numpys_blas_and_restores_it() -> None:
    before = blas_threads()
    assert before  # numpy's BLAS is loaded
    with indexes.one_blas_thread():
        assert blas_threads() == [1] * len(before)
    assert blas_threads() == before


def test_the_exact_search_multiplies_inside_the_limit(monkeypatch) -> None:
    entered = []

    @contextmanager
    def spy():
        entered.append(True)
        yield

    monkeypatch.setattr(indexes, "one_blas_thread", spy)
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    index = VectorIndex(None, 16)
    index.add(np.arange(1, 301, dtype=np.uint64), vecs)
    hits = index.search(vecs[41], 3)
    assert hits[0][0] == 42 and entered == [True]
    assert index.search(vecs[41], 3, within={42, 7})[0][0] == 42 and len(entered) == 2
