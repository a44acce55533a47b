"""ragloop.toml: the environment variables' names in a file (working directory, then the
knowledge base folder); the environment wins over both. Also the CLI's help and `docs` table."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragloop.core.errors import ConfigError


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """A working directory of its own, no RAGLOOP_* variables, and the environment put back
    afterwards (the file's values are written into os.environ)."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith("RAGLOOP_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


def settings(kb: str | None = None):
    from ragloop.apps.cli import settings_for

    return settings_for(kb)


def test_working_directory_file_is_read(clean_env) -> None:
    (clean_env / "ragloop.toml").write_text('RAGLOOP_MAX_STEPS = 3\nRAGLOOP_MODEL = "offline"\n'
                                            'RAGLOOP_KB = "mykb"\n')
    s = settings()
    assert (s.max_steps, s.model, s.kb) == (3, "offline", "mykb")


def test_kb_folder_file_wins_over_working_directory(clean_env) -> None:
    (clean_env / "ragloop.toml").write_text('RAGLOOP_KB = "mykb"\nRAGLOOP_MAX_STEPS = 3\n'
                                            "RAGLOOP_SEARCH_K = 5\n")
    (clean_env / "mykb").mkdir()
    (clean_env / "mykb" / "ragloop.toml").write_text("RAGLOOP_MAX_STEPS = 4\n")
    s = settings()
    assert (s.max_steps, s.search_k) == (4, 5)
    # --kb names another folder: that folder's file applies, not mykb's
    (clean_env / "other").mkdir()
    (clean_env / "other" / "ragloop.toml").write_text("RAGLOOP_MAX_STEPS = 2\n")
    os.environ.pop("RAGLOOP_MAX_STEPS")
    assert settings("other").max_steps == 2


def test_environment_wins_over_files(clean_env, monkeypatch) -> None:
    (clean_env / "ragloop.toml").write_text("RAGLOOP_MAX_STEPS = 3\n")
    monkeypatch.setenv("RAGLOOP_MAX_STEPS", "7")
    assert settings().max_steps == 7


@pytest.mark.parametrize("text, says", [
    ("RAGLOOP_MAX_STEPS = ", "not valid TOML"),
    ("max_steps = 3", "is not a setting"),
    ("[RAGLOOP_KB]\nx = 1", "single value"),
])
def test_bad_file_is_a_config_error_naming_it(clean_env, text, says) -> None:
    (clean_env / "ragloop.toml").write_text(text)
    with pytest.raises(ConfigError, match=says) as info:
        settings()
    assert "ragloop.toml" in str(info.value)


def test_bad_number_in_file_names_the_variable(clean_env) -> None:
    (clean_env / "ragloop.toml").write_text('RAGLOOP_MAX_STEPS = "six"\n')
    with pytest.raises(ConfigError, match="RAGLOOP_MAX_STEPS"):
        settings()


def ragloop(cwd, *args: str, columns: int = 100,
            terminal: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    env["COLUMNS"] = str(columns)
    if terminal:  # Rich treats stdout as a terminal (rich.console.Console.is_terminal)
        env.update(TTY_COMPATIBLE="1", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "ragloop", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def test_cli_reads_the_file(tmp_path) -> None:
    (tmp_path / "ragloop.toml").write_text('RAGLOOP_KB = "from-the-file"\n')
    done = ragloop(tmp_path, "search", "anything")
    assert done.returncode == 2
    assert "from-the-file" in done.stderr


def test_help_shows_environment_hints_and_no_type_noise(tmp_path) -> None:
    # the help table wraps: compare its words with the frame and line breaks taken out
    text = " ".join(ragloop(tmp_path, "ask", "--help", columns=200).stdout
                    .replace("│", " ").split())
    assert "[env RAGLOOP_KB, default ./kb]" in text
    assert "[env RAGLOOP_MODEL, default offline, or anthropic:" in text
    assert "llamacpp:<model>" in text
    assert "<bool>" not in text
    assert "URL ." not in text


def test_docs_shows_whole_doc_ids_on_a_narrow_terminal(small_kb_template, tmp_path) -> None:
    import shutil

    from ragloop.kb import KnowledgeBase

    folder = tmp_path / "kb"
    shutil.copytree(small_kb_template, folder)
    docs = tmp_path / "docs"
    docs.mkdir()
    long_name = "a-document-with-a-rather-long-name-that-would-be-cut.md"
    (docs / long_name).write_text("# Title\n\nSome text about harvest notes.\n")
    with KnowledgeBase.open(folder) as kb:
        kb.ingest(docs)
        ids = [d.doc_id for d in kb.documents()]
    done = ragloop(tmp_path, "docs", "--kb", str(folder), columns=60, terminal=True)
    assert done.returncode == 0, done.stderr
    assert "\t" not in done.stdout  # the table, not the piped TSV
    for doc_id in ids:
        assert doc_id in done.stdout


def test_a_value_the_setting_does_not_take_names_the_file(clean_env) -> None:
    """The file's values meet the settings model's check (core/config.py), file named; a
    misspelt RAGLOOP_ name is refused too (it used to pass, silently doing nothing)."""
    (clean_env / "ragloop.toml").write_text('RAGLOOP_CITATION_CHECK = "model"\n')
    with pytest.raises(ConfigError, match=r"ragloop\.toml: Bad setting"
                                          r" RAGLOOP_CITATION_CHECK='model': must be one of"):
        settings()
    (clean_env / "ragloop.toml").write_text("RAGLOOP_MAX_STEP = 3\n")
    with pytest.raises(ConfigError, match="'RAGLOOP_MAX_STEP' is not a setting"):
        settings()
