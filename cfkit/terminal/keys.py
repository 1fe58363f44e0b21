"""Keys from a terminal: single presses, typed lines and resizes.

:class:`TerminalKeys` keeps the terminal in cbreak mode for the whole session
(no echo, no line buffering, Ctrl-C still interrupts), so keys typed while a
frame is drawn wait in the buffer instead of being flushed, as switching modes
per key would do. It reads one key at a time: an escape sequence (an arrow,
``"\\x1b[C"``) or a UTF-8 character arrives as one key. ``SIGWINCH`` becomes the
pseudo-key :data:`RESIZE`, so a session redraws at the new size at once instead
of on the next key press. Without a POSIX terminal it falls back to
``click.getchar``.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

from rich.console import Console

#: The key :meth:`TerminalKeys.key` returns when the terminal was resized.
RESIZE = "<resize>"


class KeySource(Protocol):
    """Where a session's keys come from: a terminal, or a script in tests."""

    def key(self) -> str: ...

    def line(self, prompt: str) -> str: ...


class TerminalKeys:
    """Single key presses from the terminal; a note is typed as a line. Use it as a context manager."""

    def __init__(self, console: Console):
        self.console = console
        self._fd: int | None = None
        self._saved: list | None = None
        self._wake: tuple[int, int] | None = None
        self._previous = None
        self._previous_wakeup = -1

    def __enter__(self) -> "TerminalKeys":
        if os.name != "posix" or not sys.stdin.isatty():
            return self
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
        self._fd = sys.stdin.fileno()
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd, termios.TCSANOW)  # TCSANOW: keep keys already typed
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        self._restore()
        self._saved = None
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            signal.signal(signal.SIGWINCH, self._previous)
            self._previous = None
        if self._wake is not None:
            for fd in self._wake:
                os.close(fd)
            self._wake = None

    def _restore(self) -> None:
        if self._fd is not None and self._saved is not None:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def _resized(self, _signum: int, _frame: object) -> None:
        """Nothing to do here: the wakeup fd already woke :meth:`key`, which returns RESIZE."""

    def key(self) -> str:
        if self._fd is None:
            import click

            try:
                return click.getchar()
            except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C: quit; everything is saved already
                return "q"
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
                return self._one_key()

    def _one_key(self) -> str:
        import select

        data = os.read(self._fd, 1)
        if not data:
            return "q"  # end of input
        if data == b"\x1b":  # an escape sequence arrives in one burst: take what follows at once
            while select.select([self._fd], [], [], 0.03)[0]:
                data += os.read(self._fd, 1)
                if len(data) >= 8 or data[-1:].isalpha() or data[-1:] == b"~":
                    break
        elif data[0] >= 0xC0:  # the rest of a UTF-8 character
            data += os.read(self._fd, (2 if data[0] >= 0xE0 else 1) + (1 if data[0] >= 0xF0 else 0))
        return data.decode("utf-8", "replace")

    def line(self, prompt: str) -> str:
        """A line typed in the terminal's ordinary (echoing, line-editing) mode."""
        self._restore()
        try:
            return self.console.input(prompt)
        except EOFError:
            return ""
        finally:
            if self._fd is not None and self._saved is not None:
                import termios
                import tty

                tty.setcbreak(self._fd, termios.TCSANOW)


def terminal_problem(env: dict[str, str] | None = None) -> str | None:
    """Why an interactive session cannot run here, or None when it can."""
    env = os.environ if env is None else env
    if env.get("TERM", "") == "dumb":
        return "TERM is 'dumb'"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "stdin or stdout is not a terminal"
    return None


def follow_terminal_size(console: Console) -> None:
    """Draw at the terminal's size now, even where COLUMNS / LINES were exported at another size."""
    try:
        size = os.get_terminal_size(console.file.fileno())
    except (AttributeError, ValueError, OSError):
        return  # not a real terminal (a test's recording console): keep its size
    if size.columns and size.lines:
        console.size = (size.columns, size.lines)


#: The smallest terminal a session draws its view in; below it the view's first line (which spec or item)
#: would scroll away, so the session shows only :func:`too_small`'s line and acts on no key but quit.
MIN_COLUMNS, MIN_LINES = 40, 12


def too_small(width: int, height: int, session: str) -> str | None:
    """The line to show instead of ``session``'s view in a terminal of ``width`` × ``height`` cells too small
    for it; None when it fits."""
    if width >= MIN_COLUMNS and height >= MIN_LINES:
        return None
    return (f"Terminal {width}×{height} is too small for {session} (at least {MIN_COLUMNS}×{MIN_LINES}): "
            "enlarge it, or q quits.")
