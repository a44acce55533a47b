"""The Makefile as a newcomer meets it (issue 41.5): `make lint` installs ruff and
import-linter only (pinned), not the dev extra whose llama-cpp-python builds for minutes, and
`make test`'s chromium step does not fail where apt-get cannot install it (no root): it says the
browser tests will be skipped. Run with `make -n` (what make would run) in a copy, and the
chromium line for real under a PATH whose apt-get fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def dry_run(tmp_path: Path, target: str) -> list[str]:
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-phoenix.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    done = subprocess.run([MAKE, "-n", target], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    # a recipe line continued with a backslash is one shell command
    return done.stdout.replace("\\\n", " ").splitlines()


def test_make_lint_installs_ruff_and_import_linter_only(tmp_path) -> None:
    lines = dry_run(tmp_path, "lint")
    installs = [line for line in lines if " install " in line]
    assert installs == [".venv/bin/pip install -q -c requirements.lock ruff import-linter"]
    assert not any("[dev" in line or "torch" in line for line in lines)
    assert "PYTHONPATH=src .venv/bin/lint-imports" in lines


def test_the_chromium_step_warns_and_goes_on_where_apt_get_cannot_install(tmp_path) -> None:
    lines = dry_run(tmp_path, ".venv/.installed")
    step = next(line for line in lines if line.startswith("command -v chromium"))
    # a PATH with no chromium and an apt-get that fails as it does without root
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text("#!/bin/sh\necho 'E: are you root?' >&2\nexit 100\n")
    fake.chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", step], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={"PATH": str(bin_dir)})
    assert done.returncode == 0, done.stderr
    assert "the browser tests will be skipped" in done.stdout
