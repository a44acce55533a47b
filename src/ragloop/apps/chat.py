"""`ragloop chat`: an interactive conversation with a knowledge base.

Each line is the next turn of one conversation (stored like `ragloop ask --conversation`, so
`ragloop ask "…" --conversation ID` can continue it later). `/new` starts over; an empty
line is ignored; end of input (Ctrl-D) or Ctrl-C at the prompt leaves cleanly. Ctrl-C during
a turn stops that turn (the run is recorded failed) and returns to the prompt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragloop.agent.conversations import EngineConversation
from ragloop.agent.run import RunResult
from ragloop.core.errors import UserError
from ragloop.core.events import Event

NEW = "/new"
QUIT = ("/exit", "/quit")
HELP = f"{NEW} starts a new conversation; Ctrl-D (or {QUIT[0]}) leaves."


def chat_loop(start: Callable[[], EngineConversation], read: Callable[[str], str],
              say: Callable[[str], None], on_event: Callable[[Event], None],
              show: Callable[[RunResult], None], **options: Any) -> int:
    """Read lines with `read` until the input ends; each is asked as the next turn of the
    conversation `start()` made (keyword `options` as `Engine.ask`). Returns the exit code."""
    conversation = start()
    say(f"conversation {conversation.id}. {HELP}")
    while True:
        try:
            line = read("> ")
        except (EOFError, KeyboardInterrupt):
            say("")
            return 0
        question = line.strip()
        if not question:
            continue
        if question in QUIT:
            return 0
        if question == NEW:
            conversation = start()
            say(f"new conversation {conversation.id}")
            continue
        try:
            result = conversation.ask(question, on_event=on_event, **options)
        except KeyboardInterrupt:
            say("(stopped)")
            continue
        except UserError as exc:  # a bad question loses nothing: the conversation goes on
            say(f"error: {exc}")
            continue
        show(result)
