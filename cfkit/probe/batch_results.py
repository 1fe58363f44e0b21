"""Reading a batch's result files (``probe collect``): what a server wrote is data, read line by line.

:class:`BatchResults` maps each ``custom_id`` to its status code, response
body and what went wrong. A line that is not a result is left out and said,
and counted as a failure of the request whose ``custom_id`` it still shows
(else its line number is given for every request left unanswered); a
``custom_id`` answered twice keeps its first answer; one the batch never
carried is left out; a file in which no line is a result (a proxy's or a
login page) is refused whole, so nothing of it is stored and collecting can
be run again. A result saying the account could not pay for its request
(``insufficient_quota``, an Anthropic ``billing_error`` or "credit balance is
too low": :func:`cfkit.backends.billing.result_refusal`) is kept in
:attr:`BatchResults.unpaid`, for ``probe collect`` to say once.
"""

from __future__ import annotations

import re
from typing import Any

from cfkit.backends.billing import result_refusal
from cfkit.errors import TransportError


class BatchResults:
    """custom_id -> (status code, response body, what went wrong), read from a batch's output and error files.

    A server's file is data: a line that is not JSON is left out, counted as
    a failure of the request whose ``custom_id`` it shows (else of every
    request the files leave unanswered) with its line number; a ``custom_id``
    answered twice keeps its first answer and is said; one the batch never
    carried is said and left out.
    """

    def __init__(self, batch: str, carried: set[str], endpoint: str):
        self.batch = batch
        self.endpoint = endpoint
        self.carried = carried
        self.found: dict[str, tuple[int | None, Any, str | None]] = {}
        self.broken: dict[str, str] = {}  # custom_id -> why its line could not be read
        self.bad_lines: list[str] = []  # "file F line N" of lines without a readable custom_id
        self.problems: list[str] = []
        self._where: dict[str, str] = {}
        # custom_id -> (HTTP status or None, the provider's words) of a result saying the account could not pay
        self.unpaid: dict[str, tuple[int | None, str]] = {}

    @property
    def unread(self) -> str | None:
        """Why the requests with no answer have none, when lines of the files could not be read."""
        if not self.bad_lines:
            return None
        shown = ", ".join(self.bad_lines[:3]) + (f" and {len(self.bad_lines) - 3} more" if len(self.bad_lines) > 3
                                                 else "")
        return f"its result could not be read ({shown} of the batch's result files is not a JSON object)"

    def add(self, file_id: str, data: bytes) -> None:
        """Read one result file; one in which no line is a result (a proxy's page) is refused whole, unread."""
        import orjson

        lines = data.splitlines()
        if data.strip() and not any(_looks_like_result(line) for line in lines):
            start = data[:60].decode("utf-8", "replace").split("\n")[0].strip()
            raise TransportError(f"{self.endpoint} answered file {file_id} of batch {self.batch} with something that "
                                 f"is not a result file ({start!r}); a proxy or login page may be in the way. "
                                 "Nothing of it was stored: run 'cfkit probe collect' again later.")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"file {file_id} line {number}"
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                entry = None
            if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
                custom_id = _custom_id_in(line)
                if custom_id in self.carried and custom_id not in self.found:
                    self.broken[custom_id] = f"{where} of its results is not a JSON object"
                else:
                    self.bad_lines.append(where)
                self.problems.append(f"batch {self.batch}: {where} is not a result line (left out).")
                continue
            custom_id = entry["custom_id"]
            if custom_id not in self.carried:
                self.problems.append(f"batch {self.batch}: {where} answers a request it was not sent "
                                     f"({custom_id[:80]!r}); left out.")
                continue
            if custom_id in self.found:
                self.problems.append(f"batch {self.batch}: {where} answers a request {self._where[custom_id]} "
                                     "answered already; the first answer is kept.")
                continue
            self.found[custom_id] = status, body, _ = _result(entry)
            self._where[custom_id] = where
            refused = result_refusal(status, body, entry.get("error"))  # the account could not pay for it
            if refused is not None:
                self.unpaid[custom_id] = refused
            self.broken.pop(custom_id, None)


def _looks_like_result(line: bytes) -> bool:
    return line.lstrip().startswith(b"{") and b'"custom_id"' in line


def _custom_id_in(line: bytes) -> str | None:
    """The ``custom_id`` a broken line still shows, if any."""
    match = re.search(rb'"custom_id"\s*:\s*"([^"\\]{1,512})"', line)
    return match.group(1).decode("utf-8", "replace") if match else None


def _result(entry: dict[str, Any]) -> tuple[int | None, Any, str | None]:
    response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
    error = entry.get("error") if isinstance(entry.get("error"), dict) else None
    body = response.get("body")
    status = response.get("status_code")
    words = None
    if error is not None:
        words = f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip()
    elif status != 200:
        message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(
            body.get("error"), dict) else None
        words = f"HTTP {status}: {message or 'no message'}"
    return (status if isinstance(status, int) else None, body, words)
