"""The full-disk scenario of tests/test_reliability_data.py, run inside a private mount
namespace with a small tmpfs at argv[1] (the caller mounts it). Exits non-zero on a failure.

For each amount of free space left (none, then more and more, so each write stage meets the
full disk: the SQLite record, the embedding cache, tantivy's commit, the HNSW file, state.json):
1. a KB of 3 documents is ingested while there is room;
2. the disk is filled to leave that much, and an ingest of 400 notes must fail with one line
   naming the KB folder, exit 2, no traceback (or succeed, when it fit);
3. while the disk is still full, `search` (bm25 and vector) and `docs` answer;
4. with the space freed: the record passes SQLite's integrity check, holds the 3 documents,
   and tantivy and HNSW hold exactly its chunks; the same ingest then finishes.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

from reliability_kit import DOCS, assert_consistent, open_kb, top_doc, write_files

TESTS = Path(__file__).parent
# SQLite's WAL takes most of what an ingest writes, so with the index on the same disk the
# record meets the full disk first; the index folder on its own small disk reaches the index
# writes (tantivy's commit, the HNSW file, state.json) and a search's rebuild.
FREE_BYTES = (0, 16 << 10, 192 << 10)
INDEX_FREE_BYTES = (0, 8 << 10, 24 << 10, 48 << 10, 72 << 10, 120 << 10, 200 << 10)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TESTS / "cli_hash_embedder.py"), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(TESTS), os.environ.get("PYTHONPATH", "")])})


def fill(mnt: Path, free: int) -> Path:
    """Fill the tmpfs, then give back `free` bytes."""
    filler = mnt / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    with filler.open("r+b") as f:
        f.truncate(max(0, filler.stat().st_size - free))
    return filler


def check(ok: bool, what: str, proc: subprocess.CompletedProcess[str] | None = None) -> None:
    if not ok:
        detail = "" if proc is None else f"\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        sys.exit(f"FAILED: {what}{detail}")


def main(mnt: Path) -> None:
    outside = Path(tempfile.mkdtemp())
    docs = write_files(outside / "docs", DOCS)
    notes = write_files(outside / "notes", {f"n{i:03d}.txt": f"Shelf {i} holds box {9000 + i}\n"
                                            for i in range(400)})
    runs = [(free, False) for free in FREE_BYTES] + [(free, True) for free in INDEX_FREE_BYTES]
    failed_with_one_line = 0
    for n, (free, index_apart) in enumerate(runs):
        kb = mnt / f"kb{n}"
        check(cli("ingest", str(docs), "--kb", str(kb)).returncode == 0, "first ingest")
        full = mnt
        if index_apart:  # the record has room, the index folder is on a disk of its own
            full = kb / "index"
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(full)],
                           check=True)
        what = f"free={free}{' in index/' if index_apart else ''}"
        filler = fill(full, free)
        proc = cli("ingest", str(notes), "--kb", str(kb))
        check("Traceback" not in proc.stderr, f"{what}: no traceback on ingest", proc)
        if proc.returncode == 2:
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            check(len(lines) == 1 and lines[0].startswith("error: No space left on the disk of")
                  and str(kb) in lines[0], f"{what}: one line naming {kb}", proc)
            failed_with_one_line += 1
        else:
            check(proc.returncode == 0, f"{what}: exit 2 or 0", proc)
        # the disk is still full: a read answers from the record
        for mode, query, doc in (("bm25", "zanzibar clove harvest", "a.md"),
                                 ("vector", "CR123A battery sensor", "b.md")):
            found = cli("search", query, "--kb", str(kb), "--mode", mode, "-k", "1")
            check(found.returncode == 0 and doc in found.stdout
                  and "Traceback" not in found.stderr, f"{what}: {mode} search", found)
        listed = cli("docs", "--kb", str(kb))
        check(listed.returncode == 0 and "c.md" in listed.stdout, f"{what}: docs", listed)
        filler.unlink()
        with closing(sqlite3.connect(kb / "ragloop.db")) as db:
            check(db.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity")
        with open_kb(kb, create=False) as base:
            check({"a.md", "b.md", "c.md"} <= {d.doc_id for d in base.documents()}, "3 docs")
            assert_consistent(base)
            check(top_doc(base, "Priya Raman") == "c.md", f"{what}: c.md found")
        again = cli("ingest", str(notes), "--kb", str(kb))
        check(again.returncode == 0, f"{what}: ingest after freeing space", again)
        with open_kb(kb, create=False) as base:
            check(len(base.documents()) == 403, f"{what}: all 403 documents")
            assert_consistent(base)
            check(top_doc(base, "box 9123") == "n123.txt", f"{what}: a note found")
        if index_apart:
            subprocess.run(["umount", "--lazy", str(full)], check=True)
        shutil.rmtree(kb)
        print(f"{what}: ingest exit {proc.returncode}; consistent; resumed", flush=True)
    check(failed_with_one_line >= len(runs) - 3, "most amounts of space made it fail")
    print(f"scenarios: {len(runs)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
