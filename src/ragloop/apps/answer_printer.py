"""`ragloop ask` on a terminal: the answer printed as it is written.

The answer's pieces (AnswerDeltaEvent) go to stdout as they come, made visible like all data
(apps/terminal.py). A reset (the model's text was a preamble to a search, or the reply is
asked again) ends the line with a note that the text above is set aside. When the run ends,
`print_run` shows the checked answer only when the checks changed the streamed text (a
citation taken out), then the sources, as without streaming.
"""

from __future__ import annotations

from rich.console import Console

from ragloop.apps.terminal import visible
from ragloop.core.events import AnswerDeltaEvent, Event

SET_ASIDE = "(set aside: the model went on searching or was asked again)"


class AnswerPrinter:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""  # what streamed since the last reset: the answer before its checks
        self._open = False  # a streamed line is on the screen, not ended yet

    def hear(self, event: Event) -> bool:
        """Print `event` when it is a piece of the answer (True), else leave it (False)."""
        if not isinstance(event, AnswerDeltaEvent):
            return False
        if event.reset:
            if self._open:
                self.console.print(f"\n[dim]{SET_ASIDE}[/]")
            self.text, self._open = "", False
        if event.text:
            if not self._open:
                self.console.print()  # a blank line between the steps and the answer
            self.console.file.write(visible(event.text))
            self.console.file.flush()
            self.text += event.text
            self._open = True
        return True

    def end(self) -> None:
        """End the streamed answer's line."""
        if self._open:
            self.console.print()
            self._open = False
