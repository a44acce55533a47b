"""`ragloop ingest` through the real CLI on paths that hold nothing: a path that does not
exist is an error that creates no knowledge base, and a folder with no files is a warning and
exit 1 when nothing at all was given to read (issue 41.5)."""

from __future__ import annotations

import os
import subprocess
import sys

from ragloop.kb import KnowledgeBase


def ragloop(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    env.update(RAGLOOP_MODEL="offline", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def test_a_missing_path_is_an_error_and_creates_no_kb(tmp_path) -> None:
    for extra in ([], ["--sync"]):
        done = ragloop(tmp_path, "ingest", str(tmp_path / "nope"), "--kb", "kb", *extra)
        assert done.returncode == 2, done.stderr
        assert "nope: no such file or folder" in done.stderr
        assert not (tmp_path / "kb").exists()
    (tmp_path / "one.md").write_text("# One\n\nA note.\n")
    done = ragloop(tmp_path, "ingest", "one.md", "--kb", "kb", "--sync")
    assert done.returncode == 2 and "--sync needs a folder" in done.stderr
    assert not (tmp_path / "kb").exists()


def test_an_empty_folder_warns_and_exits_1_creating_nothing(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden").write_text("ingest passes over hidden files")
    for extra in ([], ["--sync"]):
        done = ragloop(tmp_path, "ingest", "empty", "--kb", "kb", *extra)
        assert done.returncode == 1, done.stderr
        assert "warning: no files found under empty: nothing ingested from it" in done.stderr
        assert not (tmp_path / "kb").exists()


def test_an_empty_folder_beside_a_full_one_warns_and_the_other_is_ingested(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a.md").write_text("# A\n\nThe pump runs on 24 V.\n")
    done = ragloop(tmp_path, "ingest", "empty", "full", "--kb", "kb")
    assert done.returncode == 0, done.stderr
    assert "no files found under empty" in done.stderr
    assert "added 1" in done.stdout
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert [d.doc_id for d in kb.documents()] == ["a.md"]
    # a sync of a folder found empty removes nothing (an unmounted share looks like this)
    (tmp_path / "full" / "a.md").unlink()
    done = ragloop(tmp_path, "ingest", "full", "--kb", "kb", "--sync")
    assert done.returncode == 1 and "(and nothing removed)" in done.stderr
    with KnowledgeBase.open(tmp_path / "kb") as kb:
        assert [d.doc_id for d in kb.documents()] == ["a.md"]
