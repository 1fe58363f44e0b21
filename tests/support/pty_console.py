"""A console drawing into a string but sized by a real pseudo-terminal, which a test resizes as a user would.

A session asks the terminal for its size (``os.get_terminal_size`` on the console's file) before each frame;
this console's file answers with a pty's size, so a test can resize "the terminal" between two keys and read
every frame the session drew (each starts with the screen-clearing sequence).
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import termios

from rich.console import Console

CLEAR = "\x1b[2J"
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class _PtyText(io.StringIO):
    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return True


class ResizableTerminal:
    """``with ResizableTerminal(80, 24) as term``: ``term.console`` to draw on, ``term.resize(60, 20)``,
    ``term.frames()`` the plain lines of each frame drawn."""

    def __init__(self, columns: int, lines: int):
        self.columns, self.lines = columns, lines

    def __enter__(self) -> "ResizableTerminal":
        self._master, self._slave = os.openpty()
        self.resize(self.columns, self.lines)
        self.file = _PtyText(self._slave)
        self.console = Console(file=self.file, width=self.columns, height=self.lines, force_terminal=True,
                               color_system="truecolor")
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._master)
        os.close(self._slave)

    def resize(self, columns: int, lines: int) -> None:
        fcntl.ioctl(self._slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))

    def frames(self) -> list[list[str]]:
        """Each frame drawn, as the lines a person sees (the trailing cursor line dropped)."""
        text = self.file.getvalue()
        return [CSI.sub("", frame).rstrip("\n").split("\n") for frame in text.split(CLEAR)[1:]]


class ScriptedKeys:
    """The keys of a session, as listed: a ``(columns, lines)`` entry resizes the terminal and reports the resize,
    as SIGWINCH does; once the script is done, q. Each line prompt is answered with ``typed``."""

    def __init__(self, term: ResizableTerminal, script: list, typed: str = ""):
        self.term, self.script, self.typed = term, list(script), typed

    def key(self) -> str:
        from cfkit.terminal.keys import RESIZE

        if not self.script:
            return "q"
        step = self.script.pop(0)
        if isinstance(step, tuple):
            self.term.resize(*step)
            return RESIZE
        return step

    def line(self, prompt: str) -> str:
        return self.typed
