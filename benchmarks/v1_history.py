"""Follow-ups through `/v1/chat/completions` with the whole history, against the engine's own
follow-ups (issue 40: "through /v1 with the history, at least as good as the engine's own").

    .venv/bin/python benchmarks/v1_history.py --kb KB
        --set examples/evals/fastapi_conversations.jsonl [--plain] [--limit N] [--port 8765]

One real server (`ragloop serve --kb KB`, a subprocess on loopback, offline) answers every
conversation of the set twice, over real HTTP:

- the engine's own follow-ups: `POST /ask` with the conversation's id (the server keeps the
  turns as facts: what each searched and cited);
- an OpenAI-style client: `POST /v1/chat/completions` with every earlier message, the
  assistant's as the API wrote them (answer and its Sources block), as a chat UI sends them
  back; with `--plain`, only the answer's text (a client that drops the Sources block).

Per follow-up (every turn after the first) it reports whether both searched the same thing
(the run's `standalone`), and all-gold among the documents each run's answer cites (the one
figure both paths return); for the `/ask` path also all-gold@5 of its evidence (what
`ragloop eval` scores). Both paths let the router decide (`/v1` takes no route), so any
difference is the history's.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from ragloop.eval.conversations import UNANSWERABLE, load_conversations, resolve
from ragloop.eval.metrics import distinct, recall_all, share

TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(kb: str, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAGLOOP_MODEL": "offline"}
    env.pop("RAGLOOP_API_KEY", None)
    proc = subprocess.Popen([sys.executable, "-m", "ragloop", "serve", "--kb", kb,
                             "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise SystemExit("the server did not come up in 120 s")


def cited(citations: list[dict[str, Any]]) -> list[str]:
    return distinct(str(c["doc_id"]) for c in citations if c.get("doc_id"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kb", required=True)
    ap.add_argument("--set", required=True, type=Path)
    ap.add_argument("--plain", action="store_true",
                    help="send assistant messages without their Sources block")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--port", type=int)
    a = ap.parse_args()

    port = a.port or free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(a.kb, port)
    try:
        with httpx.Client(base_url=base, timeout=TIMEOUT_S) as http:
            doc_ids = [d["doc_id"] for d in http.get("/documents").json()["documents"]]
            conversations = load_conversations(a.set)[:a.limit]
            misses = resolve(conversations, doc_ids)
            if misses:
                print(f"gold names no document matched: {misses}", file=sys.stderr)
            model = http.get("/v1/models").json()["data"][0]["id"]
            rows: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
            differ: list[str] = []
            for conv in conversations:
                conversation_id = "new"
                messages: list[dict[str, str]] = []
                for i, t in enumerate(conv.turns):
                    own = http.post("/ask", json={"question": t.q,
                                                  "conversation_id": conversation_id})
                    own.raise_for_status()
                    mine = own.json()
                    conversation_id = mine["conversation_id"]
                    messages.append({"role": "user", "content": t.q})
                    v1 = http.post("/v1/chat/completions",
                                   json={"model": model, "messages": messages})
                    v1.raise_for_status()
                    reply = v1.json()
                    content = reply["choices"][0]["message"]["content"]
                    run = http.get(f"/runs/{reply['id'].removeprefix('chatcmpl-')}").json()
                    body = content.split("\n\nSources:\n")[0] if a.plain else content
                    messages.append({"role": "assistant", "content": body})
                    if i == 0:
                        continue
                    kinds = ["all"] + ([t.type] if t.type != "follow_up" else [])
                    same = (mine["standalone"] or "") == (run["standalone"] or "")
                    if not same:
                        differ.append(f"{conv.id}.{i}: /ask {mine['standalone']!r}"
                                      f" | /v1 {run['standalone']!r}")
                    for kind in kinds:
                        flags = rows[kind]
                        flags["same"].append(same)
                        if t.type == UNANSWERABLE:
                            continue
                        evidence = distinct(str(e["doc_id"]) for e in mine["evidence"])
                        flags["ask@5"].append(recall_all(evidence, t.gold_docs, 5))
                        flags["ask cited"].append(recall_all(cited(mine["citations"]),
                                                             t.gold_docs, 10))
                        flags["v1 cited"].append(recall_all(cited(run["citations"]),
                                                            t.gold_docs, 10))
    finally:
        server.terminate()
        server.wait(timeout=30)

    sent = "answer text only (no Sources block)" if a.plain else "as the API wrote them"
    print(f"{a.set.name}: {len(conversations)} conversations (the router decides on both"
          " paths, as /v1 takes no route); /v1 history"
          f" sent {sent}")
    print("| turns | n | same search as /ask | /ask evidence all-gold@5"
          " | /ask cited all-gold | /v1 cited all-gold |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind, flags in sorted(rows.items(), key=lambda x: x[0] != "all"):
        cells = [share(flags.get(key, [])) for key in ("same", "ask@5", "ask cited", "v1 cited")]
        shown = " | ".join("–" if c is None else f"{c:.2f}" for c in cells)
        print(f"| {kind} | {len(flags['same'])} | {shown} |")
    for line in differ:
        print(f"differs: {line}")


if __name__ == "__main__":
    main()
