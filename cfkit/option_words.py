"""How the user sets a backend option in the command that built the backend: what a hint may tell them to type.

One backend serves several commands, and each takes its options its own way:
``cfkit probe run`` has ``--base-url``, ``--api-key-env`` and ``--max-tokens``;
the judge commands (``audit prelabel``, ``edits screen``) and ``captions draft``
have ``--max-tokens`` and ``-o KEY=VALUE``; under
``cfkit study run`` and ``study validate`` nothing is typed at all, the study
file says it (``api_key_env`` in an ``[endpoints.NAME]`` table, ``max_tokens``
in a ``[models.NAME]`` table). A backend's messages name an option through the
:class:`OptionWords` it was built with (``BackendContext.words``), so a hint
names what works where it is shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: What a value looks like in ``-o KEY=VALUE`` for the options hints name.
_VALUE = {"api_key_env": "NAME", "base_url": "URL", "max_tokens": "N"}


@dataclass(frozen=True)
class OptionWords:
    """``flags``: option key -> what the user types for it here (``--api-key-env``); any other key is
    ``-o KEY=VALUE``, which every command that builds a backend takes, unless ``otherwise`` says how."""

    flags: Mapping[str, str] = field(default_factory=dict)
    otherwise: str | None = None  # "{key}", "{value}" filled in: how a key not in ``flags`` is set (a study's model
    #                               options, an edit engine's ``-o ENGINE.KEY=VALUE``)

    def of(self, key: str) -> str:
        """How option ``key`` is set where the backend was built."""
        if key in self.flags:
            return self.flags[key]
        if self.otherwise is not None:
            return self.otherwise.replace("{key}", key).replace("{value}", _VALUE.get(key, "VALUE"))
        return f"-o {key}={_VALUE.get(key, 'VALUE')}"


#: A command with ``-o KEY=VALUE`` and nothing else for a backend's options (a library caller).
PLAIN = OptionWords()

#: ``cfkit probe collect``: ``--base-url`` and ``--api-key-env`` for the run it collects, whatever its backend.
COLLECT = OptionWords({"base_url": "--base-url", "api_key_env": "--api-key-env"})


def probe_run_words(kind: str) -> OptionWords:
    """``cfkit probe run``'s for a model of backend ``kind``: ``--max-tokens``, and ``--base-url`` and
    ``--api-key-env`` for an ``openai:`` model only (the command refuses them for any other)."""
    if kind == "openai":
        return OptionWords({**COLLECT.flags, "max_tokens": "--max-tokens"})
    return OptionWords({"max_tokens": "--max-tokens"})


def key_refused(who: str, where: str, status: int | str, said: str, words: OptionWords, *, sent: bool | None = True,
                several: bool = False) -> str:
    """The one line for a server's refusal of the key (HTTP 401/403), whichever backend, batch API, engine or
    replica set met it: ``who`` ("anthropic backend"), the server ``where`` (as shown; ``several``: servers, "every
    replica (A, B)"), what it ``said`` (may be empty), and how to name the variable holding a key in the command
    that built the backend (``words``). ``sent``: a key (or URL credentials) went with the request; when none did,
    the line says so rather than "check the key"; None: not known here, the line says both."""
    said = f": {said}" if said else ""
    it, its = ("them", "their") if several else ("it", "its")
    flag = words.of("api_key_env")
    if sent is None:
        return (f"{who}: {where} refused the request for want of a key (HTTP {status}{said}): none was sent to "
                f"{it}, or not the right one. Name the variable holding {its} key with {flag}, and check the key "
                "in it.")
    if not sent:
        return (f"{who}: {where} wants a key (HTTP {status}{said}), and none was sent to {it}; name the variable "
                f"holding {its} key with {flag}.")
    return (f"{who}: {where} refused the key (HTTP {status}{said}). Check the key in its environment variable, "
            f"or name another variable with {flag}.")


def engine_words(engine: str) -> OptionWords:
    """``cfkit edit``'s for the options of edit engine ``engine``: ``-o ENGINE.KEY=VALUE``, which names the engine
    whether the edit runs it alone (``--engine openai``) or in ``--engine auto``'s chain, where a bare
    ``-o KEY=VALUE`` is refused."""
    return OptionWords(otherwise=f"-o {engine}.{{key}}={{value}}")


#: The judge commands (``audit prelabel``, ``edits screen``) and ``captions draft``: ``--max-tokens`` of their own,
#: the rest as ``-o KEY=VALUE`` (``-o base_url=URL``, ``-o api_key_env=NAME``).
JUDGE = OptionWords({"max_tokens": "--max-tokens"})


def study_words(file: Path, model: str, endpoint: str | None, named: bool, replicas: bool = False) -> OptionWords:
    """Where study file ``file`` sets the options of its model ``model`` (``[models.MODEL]``), behind
    ``endpoint`` (a name, or a URL; the first of several where ``replicas``) or none; ``named``: the endpoint is
    an ``[endpoints.NAME]`` table, which holds the key (``api_key_env``); behind a URL, or none, the key is the
    model's option."""
    where = f"of {file}"
    model_table = f"[models.{model}]"
    key = f'options = {{ api_key_env = "NAME" }} in {model_table} {where}'
    url = f"endpoint in {model_table} {where}"
    if replicas and named:
        key = f'api_key_env = "NAME" in the [endpoints.NAME] tables its endpoints name {where}'
        url = f"endpoints in {model_table} {where}"
    elif replicas:
        url = f"endpoints in {model_table} {where}"
    elif endpoint is not None and named:
        key = f'api_key_env = "NAME" in [endpoints.{endpoint}] {where}'
        url = f"url in [endpoints.{endpoint}] {where}"
    elif endpoint is None:
        url = f"an endpoint in {model_table} {where}"
    return OptionWords({"api_key_env": key, "base_url": url, "max_tokens": f"max_tokens in {model_table} {where}"},
                       otherwise=f"{{key}} in the options of {model_table} {where}")
