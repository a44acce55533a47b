"""Issue 28, data and load: short documents, unmarked UTF-16, files that are not files, an
interrupted or killed ingest, readers beside a writer, and a full disk."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from reliability_kit import DOCS, assert_consistent, open_kb, top_doc, write_files

from ragloop.ingest.pipeline import FIRST_BATCH_CHUNKS, IngestInterrupted
from ragloop.ingest.readers import read_file

TESTS = Path(__file__).parent
NOTE = "Door code for the server room is 4417"


def _pythonpath() -> str:
    return os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])


def cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, with the small test embedder (tests/cli_hash_embedder.py)."""
    return subprocess.run([sys.executable, str(TESTS / "cli_hash_embedder.py"), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": _pythonpath(), **env})


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr


# -- 3: a short document is kept and searchable ------------------------------------------------


@pytest.mark.parametrize(("name", "text", "words"), [
    ("a.txt", NOTE + "\n", NOTE),
    ("b.txt", "  " + NOTE + "  ", NOTE),
    ("h.md", "# Quarterly sprinkler inspection\n", "Quarterly sprinkler inspection"),
    ("hh.md", "# Title\n\n## Empty\n", "Title\nEmpty"),
    ("t.html", "<html><head><title>Loading dock opens at six</title></head><body></body></html>",
     "Loading dock opens at six"),
    ("fm.md", "---\ntitle: Visitor badge colour is green\n---\n", "Visitor badge colour is green"),
])
def test_a_document_of_one_line_or_only_a_heading_is_its_own_text(tmp_path, name, text,
                                                                    words) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    [doc] = read_file(path, name)
    assert [s.text for s in doc.sections] == [words]


def test_one_line_notes_are_all_ingested_and_found(tmp_path) -> None:
    notes = {f"n{i:04d}.txt": f"Locker {i} code is {7000 + i}\n" for i in range(5000)}
    notes["door.txt"] = NOTE + "\n"
    docs = write_files(tmp_path / "docs", notes)
    with open_kb(tmp_path / "kb") as kb:
        report = kb.ingest([docs])
        assert (report.added, report.failed) == (5001, [])
        assert top_doc(kb, "server room door code") == "door.txt"
        assert top_doc(kb, "locker 4321 code", mode="hybrid") == "n4321.txt"
        assert_consistent(kb)


def test_a_page_of_only_scripts_is_still_no_text(tmp_path) -> None:
    from ragloop.core.errors import ReaderError

    path = tmp_path / "s.html"
    path.write_text("<html><body><script>x()</script></body></html>", encoding="utf-8")
    with pytest.raises(ReaderError, match="no text"):
        read_file(path, "s.html")


# -- 7: UTF-16 / UTF-32 without a byte-order mark ------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_unicode_without_a_byte_order_mark_is_read(tmp_path, encoding) -> None:
    text = "Café inventory\n\nThe espresso machine is serviced every March.\n"
    path = tmp_path / "notes.txt"
    path.write_bytes(text.encode(encoding))
    [doc] = read_file(path, "notes.txt")
    assert doc.title == "Café inventory"
    assert "espresso machine is serviced every March." in doc.sections[0].text


def test_binary_with_nul_bytes_is_still_binary(tmp_path) -> None:
    from ragloop.core.errors import ReaderError

    path = tmp_path / "blob.txt"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ReaderError, match="binary"):
        read_file(path, "blob.txt")


# -- files that are not files: named with their reason --------------------------------------------


def test_links_loops_fifos_and_unsupported_files_are_named(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "dangling.md").symlink_to("nowhere.md")
    (docs / "loop1.md").symlink_to("loop2.md")
    (docs / "loop2.md").symlink_to("loop1.md")
    os.mkfifo(docs / "pipe.txt")
    (docs / "image.xyz").write_text("x")
    started = time.monotonic()
    proc = cli("ingest", str(docs), "--kb", str(tmp_path / "kb"))
    assert time.monotonic() - started < 60  # the FIFO was not opened (it would block)
    no_traceback(proc)
    reasons = {line.split(": ", 1)[0].split("/")[-1]: line.split(": ", 1)[1]
               for line in proc.stderr.splitlines() if line.startswith("skipped ")}
    assert reasons == {
        "dangling.md": "a dangling symlink (to nowhere.md, which does not exist): nothing to read",
        "loop1.md": "a symlink loop (to loop2.md): nothing to read",
        "loop2.md": "a symlink loop (to loop1.md): nothing to read",
        "pipe.txt": "a named pipe (FIFO), not a file: not read",
        "image.xyz": "unsupported file type .xyz",
    }


def test_a_long_skip_list_names_twenty_then_counts_the_rest(tmp_path) -> None:
    docs = write_files(tmp_path / "docs", {f"x{i:02d}.xyz": "x" for i in range(25)})
    (docs / "good.md").write_text("# Good\n\nA good file.\n")
    proc = cli("ingest", str(docs), "--kb", str(tmp_path / "kb"))
    assert proc.returncode == 0, proc.stderr
    skipped = [line for line in proc.stderr.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 20 and skipped[0].endswith("x00.xyz: unsupported file type .xyz")
    assert "and 5 more skipped" in proc.stderr


# -- an interrupted or killed ingest keeps what it wrote ------------------------------------------


class _KilledAtEmbedCall:
    """An embedder whose n-th call never returns (as if the process were killed there)."""

    def __init__(self, n: int) -> None:
        from reliability_kit import HashEmbedder

        self.inner, self.n, self.calls = HashEmbedder(), n, 0
        self.name, self.dim, self.symmetric = self.inner.name, self.inner.dim, True

    def embed(self, texts):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.inner.embed(texts)

    embed_query = embed


def test_an_ingest_stopped_before_512_chunks_keeps_its_first_batch(tmp_path) -> None:
    from ragloop.core.config import Settings
    from ragloop.kb import KnowledgeBase

    docs = write_files(tmp_path / "docs", {f"n{i:03d}.txt": f"Note {i} about shelf {i}\n"
                                           for i in range(100)})
    with (pytest.raises(IngestInterrupted) as stopped,
          KnowledgeBase.open(tmp_path / "kb", Settings(), embedder=_KilledAtEmbedCall(2)) as kb):
        kb.ingest([docs])
    assert stopped.value.report.added == FIRST_BATCH_CHUNKS
    assert "interrupted: 16 documents written, run again to finish" in stopped.value.message()
    with open_kb(tmp_path / "kb", create=False) as kb:
        assert len(kb.documents()) == FIRST_BATCH_CHUNKS
        assert_consistent(kb)
        again = kb.ingest([docs])
        assert (again.added, again.unchanged) == (100 - FIRST_BATCH_CHUNKS, FIRST_BATCH_CHUNKS)
        assert_consistent(kb)


def _documents(kb: Path) -> int:
    try:
        with closing(sqlite3.connect(kb / "ragloop.db", timeout=5)) as db:
            return db.execute("SELECT count(*) FROM documents").fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


def test_sigint_during_ingest_says_what_was_written(tmp_path) -> None:
    docs = write_files(tmp_path / "docs", {f"n{i:03d}.txt": f"Note {i} about shelf {i}\n"
                                           for i in range(300)})
    kb = tmp_path / "kb"
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "cli_hash_embedder.py"), "ingest", str(docs), "--kb",
         str(kb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": _pythonpath(), "RAGLOOP_TEST_EMBED_DELAY": "1"},
        # Ctrl-C at its default, as in a terminal: a suite started in the background of a
        # non-interactive shell inherits SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler (signal module docs), so the ingest would run to its end
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while _documents(kb) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    written = _documents(kb)
    assert 0 < written < 300
    assert f"interrupted: {written} documents written, run again to finish" in err
    with open_kb(kb, create=False) as base:
        assert_consistent(base)


def test_an_ingest_killed_outright_keeps_its_first_batches(tmp_path) -> None:
    """kill -9 on a slow machine (1 s per embed call) after the first write: what was written
    stays, and the rerun adds only the rest."""
    docs = write_files(tmp_path / "docs", {f"n{i:03d}.txt": f"Note {i} about shelf {i}\n"
                                           for i in range(300)})
    kb = tmp_path / "kb"
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "cli_hash_embedder.py"), "ingest", str(docs), "--kb",
         str(kb)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": _pythonpath(), "RAGLOOP_TEST_EMBED_DELAY": "1"})
    deadline = time.monotonic() + 60
    while _documents(kb) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    kept = _documents(kb)
    assert 0 < kept < 300
    with open_kb(kb, create=False) as base:  # the stale indexes are rebuilt from the record
        assert len(base.documents()) == kept
        assert_consistent(base)
        again = base.ingest([docs])
        assert (again.added, again.unchanged) == (300 - kept, kept)
        assert_consistent(base)


# -- readers do not wait for writers ---------------------------------------------------------


def _wait_until_free(path: Path, timeout: float = 30) -> None:
    """Until no process holds `path`'s flock: wait() reaps flock itself, but the killed sleep
    that holds the lock with it is reparented and exits when a busy machine schedules it."""
    deadline = time.monotonic() + timeout
    with path.open("rb") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                assert time.monotonic() < deadline, f"{path} still locked"
                time.sleep(0.05)
                continue
            fcntl.flock(f, fcntl.LOCK_UN)
            return


@pytest.mark.parametrize("saved", ["stale", "none"])
def test_a_search_does_not_wait_for_another_processes_ingest(tmp_path, monkeypatch,
                                                             saved) -> None:
    docs = write_files(tmp_path / "docs", DOCS)
    with open_kb(tmp_path / "kb") as kb:
        kb.ingest([docs])
    index = tmp_path / "kb" / "index"
    if saved == "stale":  # what a running ingest leaves: state.json claims nothing
        (index / "state.json").write_text('{"generation": null, "format": 2}')
    else:
        import shutil

        shutil.rmtree(index)
    # another process holds the write lock (an ingest at work) for longer than we may wait
    holder = subprocess.Popen(["flock", str(tmp_path / "kb" / "write.lock"), "sleep", "60"],
                              start_new_session=True)
    try:
        time.sleep(0.3)
        monkeypatch.setenv("RAGLOOP_LOCK_WAIT", "20")
        started = time.monotonic()
        with open_kb(tmp_path / "kb", create=False) as kb:
            assert top_doc(kb, "zanzibar clove harvest") == "a.md"
            assert top_doc(kb, "CR123A battery", mode="vector") == "b.md"
            assert "another ingest" in (kb.store.degraded or "")
        assert time.monotonic() - started < 10
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # flock and the sleep that holds its lock
        holder.wait()
    _wait_until_free(tmp_path / "kb" / "write.lock")
    with open_kb(tmp_path / "kb", create=False) as kb:  # lock free again: rebuilt and saved
        assert top_doc(kb, "zanzibar clove harvest") == "a.md"
        assert kb.store.degraded is None
        assert_consistent(kb)


# -- 5: a full disk ---------------------------------------------------------------------------

_UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


def _tmpfs_possible() -> bool:
    try:
        return subprocess.run([*_UNSHARE, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _tmpfs_possible(),
                    reason="needs unshare to mount a small tmpfs (user namespaces)")
def test_a_full_disk_loses_nothing_and_says_so(tmp_path) -> None:
    """The scenario runs in a private mount namespace on a real 6 MB tmpfs
    (tests/full_disk_scenario.py): for each amount of space left, from none to enough for
    part of the batch, an ingest of 400 notes into a KB of 3 documents fails with one line
    and exit 2; the record and both indexes stay consistent; `search` answers while the disk
    is full; and once space is freed the same ingest finishes."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    proc = subprocess.run(
        [*_UNSHARE, "sh", "-c", f'mount -t tmpfs -o size=6m tmpfs "{mnt}" && exec "$@"', "sh",
         sys.executable, str(TESTS / "full_disk_scenario.py"), str(mnt)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scenarios: 10" in proc.stdout, proc.stdout
