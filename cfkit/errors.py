"""The one error tree of cfkit.

Library code raises these; only the CLI turns them into messages. A message
names what failed, the bad value, what is allowed and what to do next.

    CfkitError
    ├── InputError            bad input from the user (exit status 2); always one of:
    │   ├── UsageError        a command's arguments are wrong or do not go together
    │   ├── OptionError       an engine's or backend's option is unknown or has a bad value
    │   ├── PluginError       an engine or backend name is unknown or registered twice
    │   ├── NotFoundError     what the command needs is not there (a run, an edit, predictions)
    │   ├── OutputError       a file cannot be written where asked (it exists, the folder refuses)
    │   ├── ConfigError       cfkit.toml or workspace discovery
    │   ├── CaseError         cases.jsonl records and case subsets
    │   ├── SpecError         edit specs, masks, regions
    │   ├── ImageError        an image that cannot be read or is unsafe
    │   ├── CaptionError      caption files
    │   ├── TemplateError     probe templates
    │   ├── PredictionError   predictions JSONL
    │   ├── LabelError        audit labels files (JSONL, CSV) given to 'cfkit audit import'
    │   ├── MissingExtra      an option needs an optional dependency group (an extra) that is not installed
    │   └── InputRejected     the command has listed every problem of its input itself; nothing is added
    ├── CheckFailed           a check ran and did not pass (exit status 1)
    ├── Incomplete            the work a command needs is not finished yet (exit status 1)
    ├── RunIncomplete         a probe run ended without a reply to every planned request (exit status 1)
    ├── StoreError            the SQLite store
    ├── WeightsError          model weights could not be downloaded or did not verify
    ├── EditorError           an image editor failed or cannot run here
    │   ├── EditorUnavailable the editor cannot run on this machine
    │   ├── EditorTransport   the editor's service stayed unreachable after retries
    │   │   └── EditorUnanswered  its server gave no answer before the call: nothing sent
    │   ├── EditRefused       the editor declined the request (content policy)
    │   └── EditorKeyRefused  the editor's service refused the key: stops a batch of edits (exit 2)
    └── BackendError          a model backend failed or cannot run here
        ├── BackendUnavailable
        ├── QuotaRefused      the provider refused for quota or billing: no retry can help (stops the run, exit 2)
        └── TransportError    one request failed after retries (recorded; retried next run)

An unreadable model reply is not an exception: cfkit.parse returns no answer
and says why (missing, ambiguous, conflicting, unparseable, refused).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails


class CfkitError(Exception):
    """Base of every error cfkit raises on purpose."""

    exit_code = 1


class InputError(CfkitError):
    """The user's input is wrong; the message says where and how to fix it."""

    exit_code = 2


class UsageError(InputError):
    """A command's arguments are wrong or do not go together (a flag's value, a combination, a count)."""


class OptionError(InputError):
    """An engine's or backend's option (``-o KEY=VALUE``, cfkit.toml, a spec) is unknown or has a bad value."""


class PluginError(InputError):
    """An engine or backend name is not installed, or two packages register the same name."""


class NotFoundError(InputError):
    """Something the command needs is not there: a run, an edit, predictions, requests to send."""


class OutputError(InputError):
    """A file cannot be written where the user asked: it exists (and --force was not given), or the folder refuses it."""


class ConfigError(InputError):
    """cfkit.toml is missing, malformed or names something that does not exist."""


class CaseError(InputError):
    """A case record is malformed or inconsistent."""


class SpecError(InputError):
    """An edit spec, its mask or its regions are malformed or inconsistent."""


class ImageError(InputError):
    """An image is missing, unreadable, or refused as unsafe."""


class CaptionError(InputError):
    """A caption file is malformed."""


class TemplateError(InputError):
    """A probe template is malformed (a slot missing or repeated)."""


class PredictionError(InputError):
    """A predictions file is malformed."""


class LabelError(InputError):
    """An audit labels file is malformed: a row names an unknown item, or a judgement is not yes/no."""


class MissingExtra(InputError):
    """An option asked for needs a package of an optional group (e.g. matplotlib for --plot) that is not installed."""


class InputRejected(InputError):
    """The input has problems the command has already listed, one per line (a validation report).

    Raised with an empty message, it ends the command with exit status 2 and the
    CLI adds no line of its own; with a message, that message is shown like any other.
    """


class CheckFailed(CfkitError):
    """A check ran to completion and found problems."""

    exit_code = 1


class Incomplete(CfkitError):
    """What the command needs is not finished yet (labels still to give, disagreements to resolve); nothing was lost."""


class RunIncomplete(CfkitError):
    """A probe run ended with planned requests that have no stored reply (failures, a budget stop, replay gaps)."""

    exit_code = 1


class StoreError(CfkitError):
    """The SQLite store cannot be opened or written."""


class WeightsError(CfkitError):
    """Model weights could not be downloaded here, or the download was not the file it named."""


class EditorError(CfkitError):
    """An image editor failed.

    ``abandoned``: attempts of the call it ended that were given up after they were sent (a timeout once the
    request was out, a connection dropped before the reply): a service may bill them though nothing came back."""

    def __init__(self, message: str = "", *, abandoned: int = 0):
        super().__init__(message)
        self.abandoned = abandoned


class EditorUnavailable(EditorError):
    """An image editor cannot run here (no key, no package, no weights)."""

    exit_code = 2


class EditorTransport(EditorError):
    """An image editor's service could not be reached or kept failing after its retries.

    ``failure`` says how its last attempt failed, opening as :class:`cfkit.probe.stopping.StopPolicy` reads a
    backend's TransportError (``ConnectionError: …``, ``Timeout: …``, ``HTTP 503: …``), for a batch of edits to
    stop as a probe run does; ``endpoint`` is the server (credentials redacted), when the engine names one;
    ``abandoned`` as for :class:`EditorError`."""

    def __init__(self, message: str = "", *, failure: str = "ConnectionError", endpoint: str | None = None,
                 abandoned: int = 0):
        super().__init__(message, abandoned=abandoned)
        self.failure = failure
        self.endpoint = endpoint


class EditorUnanswered(EditorTransport):
    """An image editor's server gave no answer at all to the check before the engine's first call (nothing
    listening, host not known, no connection in time: :func:`cfkit.backends.no_answer.connect_problem`). Nothing
    was sent and nothing is recorded; ``auto`` tries its next engine, and a batch of edits stops at once (exit
    status 1, as ``probe run`` stops for the same)."""


class EditRefused(EditorError):
    """An image editor declined the request under its content policy; never retried."""


class EditorKeyRefused(EditorError):
    """An image editor's service refused the key (HTTP 401/403): no other spec can fare better, so a batch of
    edits stops at it (exit status 2), as an account without credit (:class:`QuotaRefused`) stops it."""

    exit_code = 2


class BackendError(CfkitError):
    """A model backend failed.

    ``abandoned``: attempts of the request it ended that were given up after they were sent (see
    :attr:`cfkit.backends.Reply.abandoned`): a provider may bill them, also when the error stops the run."""

    abandoned: int = 0


class BackendUnavailable(BackendError):
    """A model backend cannot run here (no key, no package, no weights)."""

    exit_code = 2


class QuotaRefused(BackendError):
    """The provider refused a request because the account has no credit or quota left (or billing is not set up).

    No retry can help, so it is not retried: it stops the run as a refused key does (exit status 2); the replies
    already stored are kept, and the same command asks the rest once the account has credit."""

    exit_code = 2


class TransportError(BackendError):
    """One request got no usable reply after its retries; the runner records it and retries it next run.

    ``abandoned`` is how many of its attempts were given up after the request was sent (see
    :attr:`cfkit.backends.Reply.abandoned`): a provider may bill them although nothing came back."""

    def __init__(self, message: str = "", *, abandoned: int = 0):
        super().__init__(message)
        self.abandoned = abandoned


_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")
_MISSING = ("missing", "missing_argument")


def stopped_sending(stop: BaseException, *, abandoned: int, out: bool) -> None:
    """Mark ``stop`` (asyncio's cancellation, or Ctrl-C/SIGTERM as ``KeyboardInterrupt``, met inside a backend's
    request or an edit engine's call) with what it had sent: ``abandoned`` attempts given up once sent, and whether
    an attempt was ``out`` (sent, its reply not come) rather than the stop falling between attempts. The first mark
    stays (the innermost place knows best); the caller re-raises the stop."""
    if sent_before_stop(stop, unmarked=None) is None:
        stop.cfkit_sent = (abandoned, out)  # type: ignore[attr-defined]


def sent_before_stop(stop: BaseException, *, unmarked: tuple[int, bool] | None = (0, True)
                     ) -> tuple[int, bool] | None:
    """What :func:`stopped_sending` marked ``stop`` with: (attempts given up once sent, whether one was out); for a
    stop nothing marked, ``unmarked``: by default one attempt out (what did not say may have sent it), the side a
    bill is safe on."""
    return stop.__dict__.get("cfkit_sent", unmarked)


def describe_validation(exc: ValidationError, model: type | None = None) -> str:
    """One line for the first problem pydantic found in a record: field, problem, fix.

    Unknown keys come first when they are what went wrong: a key in the wrong case or
    misspelt (``Neutral:``) both is unknown and leaves its field missing, and the line
    names it with the field meant. ``model`` is the pydantic model validated, whose field
    names (at any depth) are the suggestions; without it only the missing fields are.
    """
    errors = exc.errors()
    unknown = [e for e in errors if e["type"] in _UNKNOWN]
    if unknown:
        parent = tuple(unknown[0]["loc"][:-1])
        here = [e for e in unknown if tuple(e["loc"][:-1]) == parent]
        missing = [str(e["loc"][-1]) for e in errors if e["type"] in _MISSING and tuple(e["loc"][:-1]) == parent]
        names = sorted(set(field_names(model, parent)) | set(missing))
        guesses = {str(e["loc"][-1]): closest_name(str(e["loc"][-1]), names) for e in here}
        if missing or any(guesses.values()):
            return _describe_unknown(parent, guesses, [m for m in missing if m not in guesses.values()])
    return describe_error(errors[0])


def _describe_unknown(parent: tuple, guesses: dict[str, str | None], missing: list[str]) -> str:
    prefix = "".join(f"{p}." for p in parent)
    named = [f"'{prefix}{key}'" + (f" (did you mean '{guess}'?)" if guess else "") for key, guess in guesses.items()]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    fix = "rename it" if len(named) == 1 else "rename them"
    if not all(guesses.values()):
        fix += " or remove it" if len(named) == 1 else " or remove those that are not meant"
    tail = "".join(f"; field '{prefix}{m}' is required, add it" for m in missing)
    return f"unknown field{'s' if len(named) > 1 else ''} {listed}; {fix}{tail}."


def closest_name(key: str, names: list[str]) -> str | None:
    """The field ``key`` was most likely meant to be: the same name in another case, else a close spelling."""
    import difflib

    for name in names:
        if name.lower() == key.lower().replace("-", "_").replace(" ", "_"):
            return name
    close = difflib.get_close_matches(key.lower(), names, n=1, cutoff=0.75)
    return close[0] if close else None


def field_names(model: type | None, loc: tuple) -> list[str]:
    """The keys a pydantic ``model`` accepts at ``loc`` (a location of its errors); empty when not known."""
    options = _members(model)
    for step in loc:
        options = [found for o in options for found in _members(_step(o, step))]
    return sorted({info.alias or name for o in options if hasattr(o, "model_fields")
                   for name, info in o.model_fields.items()})


def _members(annotation: typing.Any) -> list[typing.Any]:
    """The types an annotation stands for: ``Annotated[X, ...]`` is X, ``X | Y | None`` is X and Y."""
    if annotation is None or annotation is type(None):
        return []
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _step(annotation: typing.Any, step: typing.Any) -> typing.Any:
    """What is found at ``step`` (a key or index of an error's location) inside a value of ``annotation``."""
    if hasattr(annotation, "model_fields"):
        fields = {info.alias or name: info for name, info in annotation.model_fields.items()}
        return fields[step].annotation if isinstance(step, str) and step in fields else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset) and isinstance(step, int) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def describe_error(err: ErrorDetails) -> str:
    """One line for one of the problems pydantic found (an item of ``ValidationError.errors()``)."""
    where = ".".join(str(p) for p in err["loc"]) or "record"
    kind = err["type"]
    if kind in _UNKNOWN:
        return f"unknown field '{where}'; remove it or check its spelling."
    if kind in _MISSING:
        return f"field '{where}' is required; add it."
    msg = err["msg"].removeprefix("Value error, ")
    return f"field '{where}': {msg}."
