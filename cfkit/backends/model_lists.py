"""What a server's answer to ``GET /models`` says of a model: the one reading every check of a model list makes
(a replica set's start-up check, :mod:`cfkit.backends.replicas`; ``probe run --batch``'s check of its server; a
study's endpoints, :mod:`cfkit.study.check`), and the one line refusing a run none of whose servers can answer for
its model, so the same answer is said in the same words."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cfkit.errors import BackendUnavailable

if TYPE_CHECKING:
    from cfkit.option_words import OptionWords

#: How long a check waits for each server's model list (seconds).
MODELS_DEADLINE_S = 15.0
#: The statuses of a server that refuses the key a request carried, or wants one it did not.
KEY_REFUSED = (401, 403)


def model_entries(body: bytes) -> list[dict[str, Any]] | None:
    """The entries (each with a text ``id``) of a ``GET /models`` answer, or None when it holds no model list."""
    import orjson

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


def listed(entries: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The entry of model ``name`` in a server's model list (:func:`model_entries`), or None: its id is ``name``
    (or ``models/NAME``, as a provider may list it)."""
    return next((e for e in entries if e["id"] in (name, f"models/{name}")), None)


def not_listed(entries: list[dict[str, Any]], name: str) -> str:
    """Why a server whose model list is ``entries`` cannot answer for ``name`` (it does not list it): the models
    it lists, and the nearest of them to ``name`` (a typo)."""
    from cfkit.suggest import closest

    ids = sorted(e["id"] for e in entries)
    served = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "") if ids else "nothing"
    near = closest(name, ids)
    return f"it serves {served}, not '{name}'" + (f"; did you mean '{near}'?" if near else "")


@dataclass(frozen=True)
class Listing:
    """What one answer to ``GET /models`` says of a model (:func:`read_listing`)."""

    entry: dict[str, Any] | None = None  # the model's entry, where the server lists it
    why: str | None = None  # why the server cannot answer for the model, where it does not list it
    listed: bool = False  # it answered a model list: a ``why`` is certain (not a server that could not tell)
    status: int | None = None  # the HTTP status of an answer that was no model list (401: a key refused)
    said: str = ""  # what such an answer said (its error message)


def read_listing(status: int | None, body: bytes, name: str, *, failure: str | None = None,
                 detail: str = "", unanswered: str | None = None, shown: str = "the server",
                 url: str = "--base-url") -> Listing:
    """The one reading of a server's answer to ``GET /models`` for model ``name`` (``status`` and ``body``, or the
    ``failure`` and ``detail`` of an attempt that got no answer): it lists the model (:func:`listed`), lists others
    or none (:func:`not_listed`), answers without a model list, or does not answer. Every check of a model list
    (replicas, ``--batch``, a study's endpoints) reads it here, so the same answer is said in the same words. An
    attempt that got no answer at all (``unanswered``: its kind, :mod:`cfkit.backends.no_answer`) is said as
    ``probe run``'s start-up check and a study say it (server ``shown``; ``url``: where the command sets it)."""
    if unanswered is not None:
        from cfkit.backends.no_answer import no_answer

        return Listing(why=no_answer(shown, unanswered, detail=detail, seconds=MODELS_DEADLINE_S, url=url))
    if failure is not None or status != 200:
        if failure is None:
            from cfkit.backends.http import error_text

            detail = " ".join(error_text(body)[1].split())[:200]
        return Listing(why=f"it did not answer GET /models: {failure or f'HTTP {status}'}: {detail or 'no detail'}",
                       status=None if failure is not None else status, said=detail)
    entries = model_entries(body)
    if entries is None:
        return Listing(why="it answered GET /models without a model list")
    entry = listed(entries, name)
    return Listing(entry, None if entry is not None else not_listed(entries, name), listed=True)


def read_exchange(exchange: Any, name: str, shown: str = "the server", *, url: str = "--base-url") -> Listing:
    """:func:`read_listing` of an :class:`~cfkit.backends.http.Exchange` from server ``shown``."""
    return read_listing(exchange.status, exchange.body, name, failure=exchange.failure, detail=exchange.detail,
                        unanswered=exchange.no_answer, shown=shown, url=url)


def refusal(who: str, name: str, why: Sequence[tuple[str, str]], *, url_flag: str = "--base-url") -> str:
    """The one line refusing a run none of whose servers can answer for ``name`` (``why``: each server as shown,
    and why not), before anything is sent or recorded (``url_flag``: how a run names its server)."""
    detail = "; ".join(f"{shown}: {reason}" for shown, reason in why)
    if len(why) == 1:
        return (f"{who}: {why[0][0]} cannot answer for '{name}' ({why[0][1]}). Nothing was sent. Fix the model's "
                f"name, or give {url_flag} for a server that serves '{name}'.")
    return (f"{who}: no replica can answer for '{name}' ({detail}). Nothing was sent. Start the servers, or give "
            f"{url_flag} for servers that serve '{name}'.")


def none_serve(who: str, name: str, readings: Sequence[tuple[str, Listing]], *, url_flag: str,
               words: OptionWords | None = None, key_sent: bool | None = None) -> str:
    """The one line refusing a replica set none of whose servers can answer for ``name`` (``readings``: each
    server as shown, and its :class:`Listing`), with the fix its servers' answers call for: every server refused
    the key (HTTP 401/403): the key, said as :func:`cfkit.option_words.key_refused` says it, with the option that
    names its variable (``words``; ``key_sent``: a key went with the requests, None: not known); every server
    listed its models without ``name``: the model's name; else those fixes its servers call for, with starting
    the servers and ``url_flag`` (how the command names its servers)."""
    from cfkit.option_words import PLAIN, key_refused

    words = words or PLAIN
    shown = ", ".join(where for where, _ in readings)
    keys = [r for _, r in readings if r.status in KEY_REFUSED]
    if len(keys) == len(readings):
        status = "/".join(dict.fromkeys(str(r.status) for r in keys))
        said = keys[0].said if len({r.said for r in keys}) == 1 else ""
        return key_refused(who, f"every replica ({shown})", status, said, words, sent=key_sent, several=True)
    detail = "; ".join(f"{where}: {r.why}" for where, r in readings)
    if all(r.listed for _, r in readings):
        return (f"{who}: no replica can answer for '{name}' ({detail}). Nothing was sent. Fix the model's name, or "
                f"give {url_flag} for servers that serve '{name}'.")
    fixes = ["start the servers"] if any(not r.listed and r.status not in KEY_REFUSED for _, r in readings) else []
    if any(r.listed for _, r in readings):
        fixes.append("fix the model's name")
    if keys:
        fixes.append(f"check the key (its variable is named with {words.of('api_key_env')})")
    return (f"{who}: no replica can answer for '{name}' ({detail}). Nothing was sent. "
            f"{', '.join(fixes).capitalize()}, or give {url_flag} for servers that serve '{name}'.")


async def check_served(client: Any, shown: str, name: str, *, who: str, url_flag: str = "--base-url") -> str | None:
    """Ask one server (``client``, a :class:`~cfkit.backends.http.JSONClient`) which models it serves, as the
    start-up check of a replica set does (:func:`served_model`), before a batch is submitted to it. Raises
    :class:`BackendUnavailable` (:func:`refusal`) when it lists its models without ``name``; a server that cannot
    be asked, or gives no list, is not refused here (the submission itself says what is wrong): why the model
    could not be checked is returned (:meth:`cfkit.backends.batch_api.BatchAPI.check_model`), else None."""
    reading = read_exchange(await client.request("GET", "/models", deadline=MODELS_DEADLINE_S), name, shown)
    if reading.listed and reading.why is not None:
        raise BackendUnavailable(refusal(who, name, [(shown, reading.why)], url_flag=url_flag))
    return None if reading.listed else f"{shown}: {reading.why}"
