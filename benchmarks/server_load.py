"""Load on one server: N concurrent offline runs, each followed over SSE to its end.

    .venv/bin/python benchmarks/server_load.py [--runs 50] [--kb PATH] [--workers 2]

Builds a throwaway knowledge base from examples/kb unless --kb is given, starts the real app
with uvicorn on a loopback port, POSTs every run at once, follows each run's event stream, and
checks that every run finished and every stream carried all of its events (seq 0..n-1, no
gaps, no duplicates, then `end`). Prints runs/s and time-to-first-event percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "Who approves travel expenses above the threshold, and who is that person?",
    "Is the sensor waterproof?",
    "What is the battery life of the sensor?",
    "How far ahead must flights be booked?",
    "Who is the chief executive officer?",
]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


async def one_run(client: httpx.AsyncClient, question: str, route: str,
                  follow: httpx.AsyncClient | None = None) -> dict:
    """POST one run on `client`, follow its events on `follow` (another server) or `client`."""
    follow = follow or client
    t0 = time.perf_counter()
    r = await client.post("/runs", json={"question": question, "route": route})
    r.raise_for_status()
    run_id = r.json()["run_id"]
    posted = time.perf_counter() - t0
    seqs: list[int] = []
    first_event = None
    end = None
    async with follow.stream("GET", f"/runs/{run_id}/events") as response:
        response.raise_for_status()
        event, data = "message", []
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line == "":
                if data:
                    payload = json.loads("\n".join(data))
                    if event == "step":
                        if first_event is None:
                            first_event = time.perf_counter() - t0
                        seqs.append(payload["seq"])
                    elif event == "end":
                        end = payload
                        break
                event, data = "message", []
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
    total = time.perf_counter() - t0
    run = (await follow.get(f"/runs/{run_id}")).json()
    # the run's own clock: from the worker starting it to its first event reaching us
    started = run["created_at"] - wall_t0
    return {"run_id": run_id, "seqs": seqs, "end": end, "status": run["status"],
            "first_event_s": first_event, "total_s": total, "post_s": posted,
            "start_to_first_s": (t0 + first_event - mono_t0) - started
            if first_event is not None else None}


wall_t0 = time.time()
mono_t0 = time.perf_counter()


async def load(url: str, runs: int, route: str) -> list[dict]:
    global wall_t0, mono_t0
    wall_t0, mono_t0 = time.time(), time.perf_counter()
    limits = httpx.Limits(max_connections=runs * 2 + 10, max_keepalive_connections=runs * 2)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        return await asyncio.gather(*(one_run(client, QUESTIONS[i % len(QUESTIONS)], route)
                                      for i in range(runs)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--kb", type=Path, help="An existing knowledge base folder.")
    parser.add_argument("--workers", type=int, default=2, help="Run worker threads.")
    parser.add_argument("--route", default="auto", choices=("auto", "single", "agent"))
    args = parser.parse_args()

    from ragloop.apps.server.app import create_app
    from ragloop.core.config import Settings
    from ragloop.kb import KnowledgeBase
    from ragloop.storage.sqlite.runs import RunStore

    tmp = tempfile.TemporaryDirectory(prefix="ragloop-load-")
    folder = args.kb or Path(tmp.name) / "kb"
    settings = Settings.from_env().with_(kb=str(folder), model="offline")
    kb = KnowledgeBase.open(folder, settings)
    if args.kb is None:
        t = time.perf_counter()
        kb.ingest([ROOT / "examples" / "kb"])
        print(f"built the knowledge base from examples/kb in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
    app = create_app(settings, kb=kb, workers=args.workers)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           limit_concurrency=None, backlog=2048))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            print("the server did not start", file=sys.stderr)
            return 1
        time.sleep(0.05)
    url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

    t0 = time.perf_counter()
    results = asyncio.run(load(url, args.runs, args.route))
    wall = time.perf_counter() - t0
    server.should_exit = True
    thread.join(30)

    store = RunStore(kb.store.db_path)
    problems = []
    for r in results:
        stored = [e.seq for e in store.events(r["run_id"])]
        if r["end"] is None:
            problems.append(f"{r['run_id']}: stream ended without `end`")
        elif r["end"]["status"] in ("running", "queued", "failed", "unknown"):
            problems.append(f"{r['run_id']}: ended {r['end']['status']}")
        if r["seqs"] != list(range(len(r["seqs"]))) or r["seqs"] != stored or not stored:
            problems.append(f"{r['run_id']}: streamed seqs {r['seqs']} != stored {stored}")
    store.close()
    kb.close()
    tmp.cleanup()

    ttfe = [r["first_event_s"] for r in results if r["first_event_s"] is not None]
    totals = [r["total_s"] for r in results]
    events = sum(len(r["seqs"]) for r in results)
    print(f"runs            {len(results)} concurrent, {args.workers} worker threads, offline,"
          f" route {args.route}")
    print(f"completed       {sum(r['end'] is not None for r in results)}/{len(results)};"
          f" events streamed {events} (all complete: {not problems})")
    print(f"wall time       {wall:.2f} s  →  {len(results) / wall:.2f} runs/s")
    print(f"first event     p50 {statistics.median(ttfe):.2f} s  p95 {pct(ttfe, 95):.2f} s"
          f"  (queued behind the workers: the last runs wait for the first)")
    own = [r["start_to_first_s"] for r in results if r["start_to_first_s"] is not None]
    posts = [r["post_s"] for r in results]
    print(f"POST /runs      p50 {statistics.median(posts) * 1000:.0f} ms"
          f"  p95 {pct(posts, 95) * 1000:.0f} ms")
    print(f"run start → first event at the client  p50 {statistics.median(own) * 1000:.0f} ms"
          f"  p95 {pct(own, 95) * 1000:.0f} ms")
    print(f"run end-to-end  p50 {statistics.median(totals):.2f} s  p95 {pct(totals, 95):.2f} s")
    for line in problems[:20]:
        print("PROBLEM", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
