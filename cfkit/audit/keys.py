"""Where an interactive session's keys come from: the terminal (or, in tests, a script).

:func:`require_terminal` refuses a session without one and names the
commands that do the same work non-interactively.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

from rich.console import Console

from cfkit.errors import UsageError


class KeySource(Protocol):
    """Where a session's keys come from: a terminal, or a script in tests."""

    def key(self) -> str: ...

    def line(self, prompt: str) -> str: ...


class TerminalKeys:
    """Single key presses from the terminal; a note is typed as a line.

    Use it as a context manager: on POSIX the terminal stays in cbreak mode
    (no echo, no line buffering, Ctrl-C still interrupts) for the whole
    session, so keys typed while a frame is drawn wait in the buffer instead
    of being flushed, as switching modes per key would do. Elsewhere it falls
    back to ``click.getchar``.
    """

    def __init__(self, console: Console):
        self.console = console
        self._fd: int | None = None
        self._saved: list | None = None

    def __enter__(self) -> "TerminalKeys":
        if os.name == "posix" and sys.stdin.isatty():
            import termios
            import tty

            self._fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(self._fd)
            tty.setcbreak(self._fd, termios.TCSANOW)  # TCSANOW: keep keys already typed
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()

    def _restore(self) -> None:
        if self._fd is not None and self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def key(self) -> str:
        if self._fd is None:
            import click

            try:
                return click.getchar()
            except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C: quit; everything is saved already
                return "q"
        data = os.read(self._fd, 1)
        if not data:
            return "q"  # end of input
        if data == b"\x1b":  # an escape sequence arrives in one burst: take what follows at once
            import select

            while select.select([self._fd], [], [], 0.03)[0]:
                data += os.read(self._fd, 1)
                if len(data) >= 8 or data[-1:].isalpha() or data[-1:] == b"~":
                    break
        elif data[0] >= 0xC0:  # the rest of a UTF-8 character
            data += os.read(self._fd, (2 if data[0] >= 0xE0 else 1) + (1 if data[0] >= 0xF0 else 0))
        return data.decode("utf-8", "replace")

    def line(self, prompt: str) -> str:
        self._restore()
        try:
            return self.console.input(prompt)
        except EOFError:
            return ""
        finally:
            if self._fd is not None:
                import termios
                import tty

                tty.setcbreak(self._fd, termios.TCSANOW)


def require_terminal(command: str, annotator: str) -> None:
    """Refuse an interactive session without a terminal, pointing to the commands that need none."""
    problem = "TERM is 'dumb'" if os.environ.get("TERM", "") == "dumb" else (
        None if sys.stdin.isatty() and sys.stdout.isatty() else "stdin or stdout is not a terminal")
    if problem:
        other = ("'cfkit audit items --as {0} --json' lists your items and 'cfkit audit label ITEM --as {0} --cue "
                 "yes|no --link yes|no' labels one" if command == "annotate" else
                 "'cfkit audit agreement' lists the disagreements and 'cfkit audit resolve ITEM --as {0} --cue yes|no "
                 "--link yes|no --note …' resolves one").format(annotator)
        raise UsageError(f"'cfkit audit {command}' needs a terminal ({problem}); without one, {other}.")
