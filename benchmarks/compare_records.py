"""Diff two eval runs record by record: every field but the run's latency and id.

    python benchmarks/compare_records.py BEFORE/results.jsonl AFTER/results.jsonl [--show N]

Records are matched by (qid, path). A field only one side has is listed as added or removed
(a record field introduced by a change); a field both have and that differs is counted, with
up to N examples. The exit status is 1 when any shared field differs, so a refactor that
must not change behaviour can be checked in one command.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

IGNORED = {"latency_s", "run_id"}


def load(path: Path) -> dict[tuple[str, ...], dict[str, Any]]:
    """Records by (qid, path), and the way a conversation turn was asked (typed, naive join,
    history, rewrite) where the record has one: without it the four ways of a turn fold into
    one key and only the last is compared."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            way = (str(r["way"]),) if "way" in r else ()
            out[(str(r["qid"]), str(r["path"]), *way)] = r
    return out


def compare(before: dict[tuple[str, ...], dict[str, Any]],
            after: dict[tuple[str, ...], dict[str, Any]], show: int) -> int:
    keys = sorted(before.keys() & after.keys())
    print(f"records: before {len(before)}, after {len(after)}, both {len(keys)}")
    for side, only in (("before", before.keys() - after.keys()),
                       ("after", after.keys() - before.keys())):
        if only:
            print(f"  only {side}: {sorted(only)[:show]}")
    differs: Counter[str] = Counter()
    added: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    changed_records = 0
    for key in keys:
        b, a = before[key], after[key]
        changed = False
        for field in (a.keys() - b.keys()) - IGNORED:
            added[field] += 1
        for field in (b.keys() - a.keys()) - IGNORED:
            removed[field] += 1
        for field in sorted((a.keys() & b.keys()) - IGNORED):
            if a[field] != b[field]:
                changed = True
                differs[field] += 1
                ex = examples.setdefault(field, [])
                if len(ex) < show:
                    ex.append(f"{key}: {json.dumps(b[field])[:300]} → {json.dumps(a[field])[:300]}")
        changed_records += changed
    print(f"records with a differing field: {changed_records} of {len(keys)}")
    for field, n in added.items():
        print(f"  field added: {field} ({n} records)")
    for field, n in removed.items():
        print(f"  field removed: {field} ({n} records)")
    for field, n in differs.most_common():
        print(f"  {field}: {n} records differ")
        for line in examples[field]:
            print(f"    {line}")
    return 1 if differs else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--show", type=int, default=3, help="examples per differing field")
    args = parser.parse_args()
    sys.exit(compare(load(args.before), load(args.after), args.show))


if __name__ == "__main__":
    main()
