"""`ragloop` as a subprocess with the reliability tests' small embedder in place of MiniLM:
the CLI, signals and the disk are real, the model is not what these tests are about.

RAGLOOP_TEST_EMBED_DELAY: seconds each embed call sleeps (a slow machine)."""

from __future__ import annotations

import os
import sys
import time

from reliability_kit import HashEmbedder

import ragloop.embed


class _SlowHashEmbedder(HashEmbedder):
    def embed(self, texts):
        time.sleep(float(os.environ.get("RAGLOOP_TEST_EMBED_DELAY", "0")))
        return super().embed(texts)


ragloop.embed.make_embedder = lambda *_a, **_k: _SlowHashEmbedder()
# recorded as the KB's embedder, so the tests open the KB with HashEmbedder in-process too
os.environ["RAGLOOP_EMBEDDER"] = HashEmbedder.name

if __name__ == "__main__":
    from ragloop.apps.cli import main

    sys.argv = ["ragloop", *sys.argv[1:]]
    main()
