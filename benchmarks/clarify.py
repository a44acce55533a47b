"""Asking the user back, measured through `ragloop ask` itself (issue 30): every question of
`examples/evals/ambiguity.jsonl` is asked with the real command in a subprocess, offline
(`ragloop ask --json --kb KB "…"`, default route and driver), and the run's status read from
its JSON.

    .venv/bin/python benchmarks/clarify.py --kb KB [--show]

KB is the examples knowledge base (a copy of a prebuilt one: runs are written to it). The
table gives, per split (`tuned`: the questions the offline rule was fixed on; `holdout`:
written before the first run and never tuned on) and type, the share of runs that ended with
status needs_input, and for the ambiguous ones the share whose options are all readings the
set lists (a wrong option is worse than none). Set RAGLOOP_CLARIFY=off to see the same runs
with asking back switched off (every share 0 by construction).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AMBIGUITY = ROOT / "examples" / "evals" / "ambiguity.jsonl"


def _read(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def ask(kb: str, question: str) -> dict:
    """One `ragloop ask --json` run, as a user would type it."""
    done = subprocess.run([sys.executable, "-m", "ragloop", "ask", "--json", "--kb", kb,
                           question], capture_output=True, text=True, check=False,
                          env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"ragloop ask failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _in_readings(options: list[str], readings: list[str]) -> bool:
    wanted = {r.lower() for r in readings}
    return bool(options) and all(o.lower() in wanted for o in options)


def run(kb: str, show: bool) -> dict[tuple[str, str], dict[str, list[bool]]]:
    rows: dict[tuple[str, str], dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for q in _read(AMBIGUITY):
        result = ask(kb, q["q"])
        asked = result["status"] == "needs_input"
        options = (result.get("clarification") or {}).get("options") or []
        row = rows[(q.get("split", "tuned"), q["type"])]
        row["needs_input"].append(asked)
        if asked and q["type"] == "ambiguous":
            row["options_right"].append(_in_readings(options, q["readings"]))
        if show:
            print(f"{q['id']} {q['type']:9} {result['status']:12} {q['q']!r} -> {options}",
                  flush=True)
    return rows


def _share(flags: list[bool]) -> str:
    return f"{sum(flags) / len(flags):.2f} ({sum(flags)}/{len(flags)})" if flags else "–"


def report(rows: dict[tuple[str, str], dict[str, list[bool]]]) -> str:
    lines = ["| split | questions | n | needs_input | options all readings (of those asked) |",
             "| --- | --- | ---: | ---: | ---: |"]
    for (split, kind), r in sorted(rows.items(), key=lambda kv: (kv[0][0] != "tuned", kv[0])):
        right = _share(r["options_right"]) if kind == "ambiguous" else "–"
        lines.append(f"| {split} | {kind} | {len(r['needs_input'])} | {_share(r['needs_input'])}"
                     f" | {right} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kb", required=True, help="a copy of the examples knowledge base")
    parser.add_argument("--show", action="store_true", help="print every question's run")
    args = parser.parse_args(argv)
    print(report(run(args.kb, args.show)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
