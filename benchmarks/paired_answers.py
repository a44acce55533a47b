"""Two eval runs of the same questions, paired: per path, how many answers hold the reference
in each, and which questions one run gained or lost against the other.

    python benchmarks/paired_answers.py A/results.jsonl B/results.jsonl [--show N]

"Holds the reference" is the eval's `answer_em` (the reference or an alias anywhere in the
answer, eval/metrics.has_reference), counted over the questions with a reference that both
runs answered. The two-sided sign test over the questions that changed says how likely a
split at least this uneven is if neither run is better (a few questions either way on a
couple of hundred is noise).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from compare_records import load  # records keyed by (qid, path), as that diff matches them

from ragloop.eval.metrics import has_reference


def holds(record: dict[str, Any]) -> bool:
    return bool(record.get("reference")) and has_reference(record, record.get("answer") or "")


def sign_test(gained: int, lost: int) -> float:
    """Two-sided exact binomial p of a gained/lost split at least this uneven (p = 1/2)."""
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--show", type=int, default=5, help="questions listed per side")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    keys = sorted(k for k in a.keys() & b.keys()
                  if a[k].get("reference") and a[k].get("answerable", True))
    print(f"{'path':8} {'n':>4} {'A holds':>8} {'B holds':>8} {'gained':>7} {'lost':>5} {'p':>6}")
    for path in sorted({k[1] for k in keys}):
        mine = [k for k in keys if k[1] == path]
        in_a = {k for k in mine if holds(a[k])}
        in_b = {k for k in mine if holds(b[k])}
        gained, lost = sorted(in_b - in_a), sorted(in_a - in_b)
        print(f"{path:8} {len(mine):>4} {len(in_a):>8} {len(in_b):>8} {len(gained):>7}"
              f" {len(lost):>5} {sign_test(len(gained), len(lost)):>6.2f}")
        for label, items in (("gained", gained), ("lost", lost)):
            for k in items[:args.show]:
                print(f"    {label}: {k[0]} {a[k]['q']!r} ref {a[k]['reference']!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
