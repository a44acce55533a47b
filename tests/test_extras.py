"""Postgres and plotting are optional extras: the base install lists neither, ingest / search /
ask / serve run with them hidden, a postgresql:// KB without its extra is a clear error naming
it, and `ragloop eval` without matplotlib writes its report with tables only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from ragloop.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = ("psycopg", "psycopg_pool", "pgvector", "matplotlib")

# None in sys.modules: an import of these fails and find_spec answers None, as when pip never
# installed them
BLOCK = textwrap.dedent(f"""
    import sys
    for name in {HIDDEN!r}:
        sys.modules[name] = None
""")


def test_base_dependencies_have_no_postgres_driver_or_matplotlib() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"]).lower()
    for name in ("psycopg", "pgvector", "matplotlib"):
        assert name not in base
    extras = project["optional-dependencies"]
    assert any("psycopg" in d for d in extras["postgres"])
    assert any("pgvector" in d for d in extras["postgres"])
    assert any("matplotlib" in d for d in extras["eval"])


def run_hidden(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = BLOCK + textwrap.dedent(f"""
        sys.argv = ["ragloop", *{list(args)!r}]
        from ragloop.apps.cli import main
        main()
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLOOP_")}
    env["RAGLOOP_MODEL"] = "offline"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    # Rich wraps a long error: compare words
    done.stderr = " ".join(done.stderr.split())
    return done


def test_cli_works_without_the_extras(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump P7\n\n## Seals\n\nThe P7 pump uses Viton seals rated"
                                  " to 200 °C.\n")
    kb = str(tmp_path / "kb")
    for args in (("ingest", str(docs), "--kb", kb), ("search", "pump seals", "--kb", kb),
                 ("ask", "What seals does the P7 pump use?", "--kb", kb)):
        done = run_hidden(tmp_path, *args)
        assert done.returncode == 0, (args, done.stderr)
    assert "Viton" in done.stdout
    # serve: the app is built and its modules imported (the server itself is tested elsewhere)
    code = BLOCK + textwrap.dedent(f"""
        from ragloop.apps.server.app import create_app
        from ragloop.core.config import Settings
        create_app(Settings(kb={kb!r}))
        print("built")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and "built" in done.stdout, done.stderr


def test_postgres_url_without_the_extra_names_it(tmp_path) -> None:
    done = run_hidden(tmp_path, "search", "x", "--kb", "postgresql://u@localhost:1/db")
    assert done.returncode == 2  # a UserError: the user can fix it
    assert "pip install 'ragloop[postgres]'" in done.stderr
    assert "psycopg" in done.stderr


def test_eval_without_the_extra_writes_the_tables_and_says_the_plots_need_it(tmp_path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "pump.md").write_text("# Pump P7\n\n## Seals\n\nThe P7 pump uses Viton seals rated"
                                  " to 200 °C.\n")
    kb, out = str(tmp_path / "kb"), tmp_path / "out"
    assert run_hidden(tmp_path, "ingest", str(docs), "--kb", kb).returncode == 0
    data = tmp_path / "q.jsonl"
    data.write_text('{"q": "What seals does the P7 pump use?", "gold_doc": "pump.md"}\n')
    done = run_hidden(tmp_path, "eval", str(data), "--kb", kb, "--paths", "single",
                      "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "tables only: pip install 'ragloop[eval]' adds the plots" in " ".join(
        done.stdout.split())
    page = (out / "report.html").read_text()
    assert "<table>" in page and "recall@10" in page
    assert "matplotlib is not installed" in page and "<img" not in page
    assert json.loads((out / "report.json").read_text())["paths"]["single"]["recall@10"] == 1.0
    assert "| recall@10" in (out / "report.md").read_text()


def test_require_extra_is_a_config_error(monkeypatch) -> None:
    from ragloop.core import extras

    monkeypatch.setattr(extras, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"ragloop\[postgres\]"):
        extras.require_extra("postgres", extras.POSTGRES_MODULES, "A postgresql:// KB")
