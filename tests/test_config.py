"""Settings from the environment: RAGLOOP_<FIELD> for every field, typed; a value of the wrong
type is a ConfigError that names the variable (the command prints it, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ragloop.core.config import DEFAULT_ANTHROPIC_MODEL, Settings
from ragloop.core.errors import ConfigError


@pytest.fixture
def env(monkeypatch):
    for key in list(os.environ):
        if key.startswith("RAGLOOP_") or key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            monkeypatch.delenv(key)
    return monkeypatch


def test_every_field_reads_its_variable(env) -> None:
    env.setenv("RAGLOOP_KB", "/data/kb")
    env.setenv("RAGLOOP_MAX_STEPS", "9")
    env.setenv("RAGLOOP_REQUEST_TIMEOUT_S", "12.5")
    env.setenv("RAGLOOP_GRADER_MODEL", "openai:gpt-5.4-mini")
    env.setenv("RAGLOOP_EMBED_BASE_URL", "http://localhost:9/v1")
    s = Settings.from_env()
    assert (s.kb, s.max_steps, s.request_timeout_s) == ("/data/kb", 9, 12.5)
    assert s.grader_model == "openai:gpt-5.4-mini" and s.embed_base_url == "http://localhost:9/v1"
    assert (s.model, s.search_k, s.embedder) == ("offline", 8, None)
    assert s.with_(kb="other", model=None).kb == "other" and s.with_(kb="other").model == "offline"
    assert Settings().kb == "kb"  # Settings(...) itself never reads the environment


def test_the_model_follows_the_keys_that_are_set(env) -> None:
    env.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert Settings.from_env().model == DEFAULT_ANTHROPIC_MODEL
    env.setenv("RAGLOOP_MODEL", "ollama:qwen3")
    assert Settings.from_env().model == "ollama:qwen3"
    env.setenv("RAGLOOP_MODEL", "")  # empty: as if unset
    assert Settings.from_env().model == DEFAULT_ANTHROPIC_MODEL


def test_a_bad_value_names_its_variable(env) -> None:
    env.setenv("RAGLOOP_MAX_STEPS", "six")
    with pytest.raises(ConfigError, match="RAGLOOP_MAX_STEPS='six'"):
        Settings.from_env()
    res = subprocess.run(
        [sys.executable, "-m", "ragloop", "docs"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert res.returncode == 2 and "RAGLOOP_MAX_STEPS" in res.stderr
    assert "Traceback" not in res.stderr
