"""The placement knob's curve: the agent's lead over single-shot against what it loses.

    .venv/bin/python benchmarks/placement_curve.py run DATASET --kb KB --out OUT \
        [--offset N] [eval options: --limit N, -k 10, ...]
    .venv/bin/python benchmarks/placement_curve.py curve OUT [--knob 0.3,0.5,1.0,...]

`run` runs `ragloop eval DATASET --paths single,agent` (offline model) once, and writes what
the pipeline driver knew when it placed each question's documents (single-shot's documents,
the run's, why each was reached, grades) to OUT/placement.jsonl. `--offset N` skips the
first N questions of a BEIR folder (the tuning half is 1-300 of HotpotQA dev, 301-600 the
part not tuned on). `curve` then places every question's documents again for each value of
the knob (`Policy.give_up_below`: single-shot documents graded below it, covering no open
part, give their place to a document reached through a hop), for the hop signals off
(`hops off`: only documents the grader is sure about give their place, the rule before
issue 27) and for each signal off alone (`no pointer`, ...), and prints per type
all-gold@5/@10 of single-shot and the agent, the lead, and lost/gained at 5 and 10. The
placement is a pure function of what the run gathered, so one run gives the whole curve;
the gathering itself does not depend on the knob.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

KNOBS = (0.3, 0.5, 0.7, 0.9, 1.0, 2.0)
CAPTURE = "placement.jsonl"


def _capture(out: Path) -> None:
    """Write each run's placement inputs to OUT/placement.jsonl (this process only)."""
    from ragloop.agent.pipeline_driver import PipelineDriver

    original = PipelineDriver._keep_single_shot
    out.mkdir(parents=True, exist_ok=True)
    sink = (out / CAPTURE).open("a", encoding="utf-8")

    def keep(self: PipelineDriver, ctx: Any, ordered: list[Any]) -> list[Any]:
        placed = original(self, ctx, ordered)
        found = list(dict.fromkeys(e.doc_id for e in ordered))
        sink.write(json.dumps({
            "q": ctx.question, "single": self._single_docs, "found": found,
            "reached": {d: sorted(h) for d, h in self._reached.items()},
            "scores": self._doc_score,
            "confirmed": sorted({e.doc_id for e in ordered if e.confirmed})}) + "\n")
        sink.flush()
        return placed

    PipelineDriver._keep_single_shot = keep  # type: ignore[method-assign]


def _sliced(folder: Path, offset: int) -> Path:
    """A BEIR folder without its first `offset` queries (corpus and qrels linked)."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}-from{offset + 1}-"))
    target = tmp / folder.name
    target.mkdir()
    for name in ("corpus.jsonl", "qrels"):
        if (folder / name).exists():
            (target / name).symlink_to((folder / name).resolve())
    lines = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (target / "queries.jsonl").write_text("".join(lines[offset:]), encoding="utf-8")
    return target


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="placement_curve.py run")
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--offset", type=int, default=0)
    args, rest = parser.parse_known_args(argv)
    dataset = _sliced(args.dataset, args.offset) if args.offset else args.dataset
    _capture(args.out)
    from ragloop.apps.cli import main as cli_main

    sys.argv = ["ragloop", "eval", str(dataset), "--out", str(args.out), "--paths",
                "single,agent", "--model", "offline", *rest]
    cli_main()
    return 0


def _all_gold(docs: list[str], gold: list[str], k: int) -> bool:
    return bool(gold) and all(g in docs[:k] for g in gold)


def steps_table(agent: list[dict[str, Any]], types: list[str], of: Any) -> str:
    """Per type, the agent runs' mean steps and the share that used every step (as run: the
    steps do not depend on the placement)."""
    rows = ["| type | n | mean steps | used every step |", "| --- | ---: | ---: | ---: |"]
    for t in types:
        chosen = [r for r in agent if of(r, t)]
        if chosen:
            full = sum(int(r.get("steps") or 0) >= int(r.get("max_steps") or 0) > 0
                       for r in chosen)
            steps = sum(int(r.get("steps") or 0) for r in chosen) / len(chosen)
            rows.append(f"| {t or '(none)'} | {len(chosen)} | {steps:.2f} |"
                        f" {100 * full / len(chosen):.1f}% |")
    return "\n".join(rows)


def curve(out: Path, knobs: list[float], budget: float = 0.03,
          ranks: tuple[int, ...] = (5, 4, 3, 2)) -> list[str]:
    from ragloop.agent import placement
    from ragloop.agent.placement import Hop, Policy, place

    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x]
    inputs = {}
    for line in (out / CAPTURE).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            inputs[row["q"]] = row
    single = {r["qid"]: r for r in records if r["path"] == "single"}
    agent = [r for r in records if r["path"] == "agent" and r.get("gold")
             and r.get("answerable", True) and r["qid"] in single]
    base = placement.DEFAULT_POLICY
    points: list[tuple[str, Policy | None]] = [
        ("hops off", replace(base, signals=frozenset())),
        ("chosen (default)", base),
        # the grade's part of the knob, kept documents never giving their place
        *((f"give_up<{v:g}", replace(base, give_up_below=v, kept_from_rank=None))
          for v in knobs),
        # the kept documents' part of the knob: from which first-search rank a kept document
        # gives its place to one reached through a hop; with and without the given-up
        # documents coming right after the hops
        *((f"kept from #{r}{' next' if nxt else ''}",
           replace(base, kept_from_rank=r, displaced_next=nxt))
          for nxt in (False, True) for r in ranks),
        ("displaced next", replace(base, displaced_next=True)),
        *((f"no {h}", replace(base, signals=base.signals - {h})) for h in Hop
          if h in base.signals),
        ("as run", None)]
    kinds = sorted({r.get("type", "") for r in agent})
    # a family of types ("compositional_3hop", "compositional_4hop") also gets its own line
    families = sorted({t.split("_")[0] for t in kinds
                       if sum(k.split("_")[0] == t.split("_")[0] for k in kinds) > 1})
    types = ["ALL", *kinds, *(f"{f}_*" for f in families)]

    def of(r: dict[str, Any], t: str) -> bool:
        kind = r.get("type", "")
        return t == "ALL" or kind == t or (t.endswith("_*") and kind.split("_")[0] == t[:-2])

    lines = [steps_table(agent, types, of), "",
             "| point | type | n | single @5 | agent @5 | lead @5 | lost@5 | gained@5 |"
             " single @10 | agent @10 | lead @10 | lost@10 | gained@10 |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
             " ---: | ---: |"]
    picks: list[tuple[float, float, str]] = []
    for name, policy in points:
        docs: dict[str, list[str]] = {}
        for r in agent:
            row = inputs.get(r["q"])
            if policy is None or row is None or not row["single"]:
                docs[r["qid"]] = r.get("docs") or []
                continue
            made = place(row["single"], row["found"], row["reached"], row["scores"],
                         row["confirmed"], policy=policy)
            docs[r["qid"]] = made.order
        for t in types:
            chosen = [r for r in agent if of(r, t)]
            if not chosen:
                continue
            cells = [name, t or "(none)", str(len(chosen))]
            for k in (5, 10):
                s = [_all_gold(single[r["qid"]].get("docs") or [], r["gold"], k) for r in chosen]
                a = [_all_gold(docs[r["qid"]], r["gold"], k) for r in chosen]
                lost = sum(x and not y for x, y in zip(s, a, strict=True))
                gained = sum(y and not x for x, y in zip(s, a, strict=True))
                n = len(chosen)
                cells += [f"{sum(s) / n:.3f}", f"{sum(a) / n:.3f}",
                          f"{(sum(a) - sum(s)) / n:+.3f}", f"{lost} ({100 * lost / n:.1f}%)",
                          str(gained)]
                if t == "ALL" and k == 10 and policy is not None:
                    picks.append((lost / n, (sum(a) - sum(s)) / n, name))
            lines.append("| " + " | ".join(cells) + " |")
    under = [p for p in picks if p[0] < budget]
    if under:
        best = max(under, key=lambda p: (p[1], -p[0]))
        lines.append(f"\nbest point with lost@10 under {100 * budget:g}% (ALL): {best[2]}"
                     f" (lead@10 {best[1]:+.3f}, lost@10 {100 * best[0]:.1f}%)")
    missing = sum(1 for r in agent if r["q"] not in inputs)
    if missing:
        lines.append(f"\n{missing} agent runs have no placement inputs (results from an"
                     " earlier run): their docs are counted as run at every point.")
    return lines


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "curve"):
        print(__doc__)
        return 2
    if sys.argv[1] == "run":
        return run(sys.argv[2:])
    parser = argparse.ArgumentParser(prog="placement_curve.py curve")
    parser.add_argument("out", type=Path)
    parser.add_argument("--knob", default=",".join(str(v) for v in KNOBS))
    parser.add_argument("--budget", type=float, default=0.03,
                        help="the lost@10 share a point must stay under to be picked")
    args = parser.parse_args(sys.argv[2:])
    print("\n".join(curve(args.out, [float(v) for v in args.knob.split(",")], args.budget)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
