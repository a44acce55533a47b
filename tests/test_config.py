"""Settings from the environment: RAGLOOP_<FIELD> for every field, typed; a value of the wrong
type is a ConfigError that names the variable (the command prints it, no traceback)."""

from __future__ import annotations

import os
import re
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


def test_a_folder_may_be_given_as_a_path(tmp_path) -> None:
    assert Settings(kb=tmp_path).kb == str(tmp_path)
    assert Settings().with_(kb=tmp_path / "kb").kb == str(tmp_path / "kb")


def test_the_model_follows_the_keys_that_are_set(env) -> None:
    env.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert Settings.from_env().model == DEFAULT_ANTHROPIC_MODEL
    env.setenv("RAGLOOP_MODEL", "ollama:qwen3")
    assert Settings.from_env().model == "ollama:qwen3"
    env.setenv("RAGLOOP_MODEL", "")  # empty: as if unset
    assert Settings.from_env().model == DEFAULT_ANTHROPIC_MODEL


def test_a_bad_value_names_its_variable(env) -> None:
    env.setenv("RAGLOOP_MAX_STEPS", "six")
    with pytest.raises(ConfigError, match=r"RAGLOOP_MAX_STEPS=.six."):
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


@pytest.mark.parametrize("values, says", [
    ({"clarify": "never"}, "RAGLOOP_CLARIFY='never': must be one of auto, off"),
    ({"citation_check": "model"}, "RAGLOOP_CITATION_CHECK='model': must be one of auto, offline"),
    ({"strictness": 1.5}, "RAGLOOP_STRICTNESS=1.5 (--strict): must be a number from 0 to 1"),
    ({"max_steps": 1}, "RAGLOOP_MAX_STEPS=1 (--max-steps): must be a whole number, at least 2"),
    ({"stop_on_disconnect": "maybe"}, "RAGLOOP_STOP_ON_DISCONNECT='maybe'"),
    ({"hidden_text": "show"}, "RAGLOOP_HIDDEN_TEXT='show': must be one of drop, keep"),
    ({"serach_k": 3}, "'serach_k': not a setting"),
])
def test_a_bad_value_is_refused_where_settings_are_made(values, says) -> None:
    """Python, the environment and a per-call override meet the same check and the same text."""
    with pytest.raises(ConfigError, match=re.escape(says)):
        Settings(**values)
    with pytest.raises(ConfigError, match=re.escape(says)):
        Settings().with_(**values)


def test_the_same_error_from_the_environment(env) -> None:
    env.setenv("RAGLOOP_CLARIFY", "never")
    with pytest.raises(ConfigError, match=re.escape("RAGLOOP_CLARIFY='never': must be one of")):
        Settings.from_env()
    env.setenv("RAGLOOP_CLARIFY", " OFF ")  # a choice is a word, as before
    assert Settings.from_env().clarify == "off"


def test_a_setting_read_below_any_settings_object_is_the_models(env) -> None:
    """The SQLite lock, the Postgres store, the embedders and the server read their variables
    through the same model: typed, a choice read as a word, the same error text."""
    from ragloop.apps.server.app import max_upload_bytes
    from ragloop.core.config import env_setting
    from ragloop.storage.sqlite.lock import lock_wait_s

    assert lock_wait_s() == 120.0 and max_upload_bytes() == 20 << 20  # unset: the defaults
    env.setenv("RAGLOOP_LOCK_WAIT", "0.5")
    env.setenv("RAGLOOP_MAX_UPLOAD_MB", "1.5")
    env.setenv("RAGLOOP_PG_PREPARE", " OFF ")
    env.setenv("RAGLOOP_PG_POOL_SIZE", "")  # empty: as if unset
    assert lock_wait_s() == 0.5 and max_upload_bytes() == 3 << 19
    assert env_setting("pg_prepare") == "off" and env_setting("pg_pool_size") == 4
    assert env_setting("embed_threads", 3) == 3  # an argument wins, checked the same way
    env.setenv("RAGLOOP_LOCK_WAIT", "soon")
    with pytest.raises(ConfigError, match=re.escape("RAGLOOP_LOCK_WAIT='soon': must be a"
                                                    " number, at least 0")):
        lock_wait_s()
    with pytest.raises(ConfigError, match=re.escape("RAGLOOP_EMBED_THREADS=0: must be a whole"
                                                    " number, at least 1")):
        env_setting("embed_threads", 0)


def test_a_run_option_is_checked_by_its_model() -> None:
    from ragloop.core.config import RunOptions

    with pytest.raises(ConfigError, match=re.escape("route='both' (--route): must be one of"
                                                    " auto, single, agent")):
        RunOptions(route="both")
    with pytest.raises(ConfigError, match="driver='loop'"):
        RunOptions(driver="loop")


def test_the_readme_table_is_the_models() -> None:
    """README's settings table is generated: `ragloop settings --markdown --into README.md`."""
    from pathlib import Path

    from ragloop.core.config import TABLE_END, TABLE_START, settings_table

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].lstrip("\n")
    assert table == settings_table(), "run `ragloop settings --markdown --into README.md`"
    for name in Settings.model_fields:
        assert f"`{Settings.setting_name(name)}`" in table


def test_a_decision_setting_names_a_registered_implementation(env, tmp_path) -> None:
    """RAGLOOP_GRADER (one setting per decision kind) takes a name the registry knows: an
    unknown one is the same ConfigError in Python and on the command line, whether the
    registry was loaded before the settings were made or only when the run builds it."""
    import ragloop.agent.decisions  # noqa: F401  the registry: names the settings check

    says = "Bad setting RAGLOOP_GRADER='nope': must be one of offline, model"
    with pytest.raises(ConfigError, match=re.escape(says)):
        Settings(grader="nope")
    with pytest.raises(ConfigError, match=re.escape(says)):
        Settings().with_(grader="nope")
    assert Settings(grader=" Offline ").grader == "offline"  # a name is a word
    assert Settings().grader is None  # unset: the model's when configured, else offline
    for command in (["settings"], ["ask", "How is the harvest stored?", "--kb",
                                   str(tmp_path / "kb")]):
        res = subprocess.run([sys.executable, "-m", "ragloop", *command], capture_output=True,
                             text=True, timeout=120,
                             env={**os.environ, "RAGLOOP_GRADER": "nope"})
        assert res.returncode == 2 and says in res.stderr, (command, res.stderr)
        assert "Traceback" not in res.stderr


def test_each_option_the_model_names_is_the_clis_and_names_its_variable() -> None:
    """A field made with `flag=` (the settings table says "also `--x`") is an option of the
    CLI, and every such option's help names the setting's variable."""
    import typer.main

    from ragloop.apps.cli import app
    from ragloop.core.config import RunOptions

    helps: dict[str, list[str]] = {}
    for command in typer.main.get_command(app).commands.values():  # type: ignore[attr-defined]
        for param in command.params:
            for opt in param.opts:
                helps.setdefault(opt, []).append(getattr(param, "help", None) or "")
    for model in (Settings, RunOptions):
        for name, field in model.model_fields.items():
            flag = (field.json_schema_extra or {}).get("flag")  # type: ignore[union-attr]
            if flag is None:
                continue
            assert flag in helps, f"{name}: the model names {flag}, which no command has"
            if model is Settings:
                variable = Settings.setting_name(name)
                assert all(variable in h for h in helps[flag]), (flag, variable)
