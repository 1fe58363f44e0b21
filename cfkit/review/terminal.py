"""The review's own use of the terminal (:mod:`cfkit.terminal`): arrow keys, and the refusal without one.

← and → step through candidates like ``[`` and ``]`` (:data:`ALIASES`).
"""

from __future__ import annotations

from cfkit.errors import UsageError
from cfkit.terminal.keys import RESIZE, KeySource, TerminalKeys, terminal_problem

__all__ = ["ALIASES", "RESIZE", "KeySource", "TerminalKeys", "require_terminal", "terminal_problem"]

#: Keys read as another: the arrows step through candidates like [ and ].
ALIASES = {"\x1b[C": "]", "\x1b[D": "[", "\x1bOC": "]", "\x1bOD": "["}


def require_terminal(spec_hint: str) -> None:
    problem = terminal_problem()
    if problem:
        raise UsageError(
            f"the interactive review needs a terminal ({problem}). Decide without one: "
            f"'cfkit review {spec_hint} --accept' or '--reject --note \"why\"'; see the edit and its check "
            f"with 'cfkit review {spec_hint} --json', or write it as a picture with "
            f"'cfkit review {spec_hint} --show --output view.png'."
        )
