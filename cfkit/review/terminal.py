"""Keys for the review loop: single key presses from a terminal, and resizes as a key of their own.

:class:`TerminalKeys` reads one key at a time in cbreak mode (no Enter
needed; Ctrl-C still interrupts), held while it is open so that a key pressed
during a redraw is not lost, and turns ``SIGWINCH`` into
the pseudo-key :data:`RESIZE`, so the loop redraws the screen at the new size
at once instead of on the next key press. Arrow keys arrive as one key
(``"\\x1b[C"``); :data:`ALIASES` maps ← → to ``[`` ``]``.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

from rich.console import Console

from cfkit.errors import UsageError

#: The key :meth:`TerminalKeys.key` returns when the terminal was resized.
RESIZE = "<resize>"
#: Keys read as another: the arrows step through candidates like [ and ].
ALIASES = {"\x1b[C": "]", "\x1b[D": "[", "\x1bOC": "]", "\x1bOD": "["}


class KeySource(Protocol):
    """Where the loop's keys come from: a terminal, or a script in tests."""

    def key(self) -> str: ...

    def line(self, prompt: str) -> str: ...


class TerminalKeys:
    """Single key presses from the terminal; a note is typed as a line. Use it as a context manager."""

    def __init__(self, console: Console):
        self.console = console
        self._wake: tuple[int, int] | None = None
        self._previous = None
        self._previous_wakeup = -1
        self._fd = -1
        self._saved: list | None = None

    def __enter__(self) -> "TerminalKeys":
        import signal
        import termios
        import tty

        self._wake = os.pipe()
        os.set_blocking(self._wake[1], False)
        if hasattr(signal, "SIGWINCH"):
            self._previous = signal.signal(signal.SIGWINCH, self._resized)
            # The signal may reach any thread (numpy's BLAS starts some) while the main one waits in select;
            # the wakeup fd is written whichever thread takes it, so the wait ends at once.
            self._previous_wakeup = signal.set_wakeup_fd(self._wake[1])
        # cbreak for the whole review, set without flushing: a key pressed while a frame is drawn is kept.
        self._fd = sys.stdin.fileno()
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd, termios.TCSANOW)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal
        import termios

        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None
        if hasattr(signal, "SIGWINCH") and self._previous is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            signal.signal(signal.SIGWINCH, self._previous)
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)
            self._wake = None

    def _resized(self, _signum: int, _frame: object) -> None:
        """Nothing to do here: the wakeup fd already woke :meth:`key`, which redraws."""

    def key(self) -> str:
        import select

        while True:
            watch = [self._fd] + ([self._wake[0]] if self._wake else [])
            ready, _, _ = select.select(watch, [], [])
            if self._wake and self._wake[0] in ready:
                import signal

                if signal.SIGWINCH in os.read(self._wake[0], 1024):  # the numbers of the signals received
                    return RESIZE
                continue
            if self._fd in ready:
                data = os.read(self._fd, 32).decode("utf-8", errors="replace")
                if not data:
                    return "q"  # end of input
                return ALIASES.get(data, data if data.startswith("\x1b") else data[0])

    def line(self, prompt: str) -> str:
        """A line typed in the terminal's ordinary (echoing, line-editing) mode."""
        import termios
        import tty

        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
        try:
            return self.console.input(prompt)
        except EOFError:
            return ""
        finally:
            if self._saved is not None:
                tty.setcbreak(self._fd, termios.TCSANOW)


def terminal_problem(env: dict[str, str] | None = None) -> str | None:
    """Why the interactive loop cannot run here, or None when it can."""
    env = os.environ if env is None else env
    if env.get("TERM", "") == "dumb":
        return "TERM is 'dumb'"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "stdin or stdout is not a terminal"
    return None


def require_terminal(spec_hint: str) -> None:
    problem = terminal_problem()
    if problem:
        raise UsageError(
            f"the interactive review needs a terminal ({problem}). Decide without one: "
            f"'cfkit review {spec_hint} --accept' or '--reject --note \"why\"'; see the edit and its check "
            f"with 'cfkit review {spec_hint} --json', or write it as a picture with "
            f"'cfkit review {spec_hint} --show --output view.png'."
        )
