"""Where a request to an OpenAI-compatible API goes, and which key it carries: one policy for every caller.

The probe backend (``openai:MODEL``) and the openai image editor both resolve
their server through :func:`resolve_endpoint`:

- **Base URL**: the ``base_url`` option (``--base-url``), else
  ``$OPENAI_BASE_URL``, else the official API, ``https://api.openai.com/v1``.
  It must be an ``http://`` or ``https://`` URL with a host, no whitespace or
  control character, no query and no fragment; anything else is refused with
  one line (:class:`~cfkit.errors.OptionError`, exit status 2).
- **Key**: the official key, ``$OPENAI_API_KEY``, goes only to the official
  host over https. Any other server gets the key from the variable named by
  ``api_key_env`` (``--api-key-env``) and nothing else; when that option is
  not given and ``$OPENAI_API_KEY`` is set, the endpoint carries a one-line
  note saying the key was withheld (callers record it with the run or the
  edit, and the CLI prints it). Without any key a placeholder is sent, which
  servers that need no key ignore.
- **Plain http**: no key, and no credentials written in the URL
  (``http://user:pass@host``), is ever sent over plain http except to a
  loopback address (``127.0.0.0/8``, ``::1``, ``localhost``); such a
  configuration is refused, not silently changed.
- **Credentials in the URL** are sent as HTTP basic auth (never together with
  a key) and redacted, as ``***@``, in every form that is stored or shown
  (:attr:`Endpoint.shown`, :func:`redact_url`).

Nothing here performs a request; it only decides.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from cfkit.errors import OptionError

OFFICIAL_URL = "https://api.openai.com/v1"
OFFICIAL_HOST = "api.openai.com"
OFFICIAL_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
#: Sent as the key when there is none; servers that need no key ignore it.
PLACEHOLDER_KEY = "cfkit-no-key"


@dataclass(frozen=True)
class Provider:
    """Whose official API a policy guards: its URL and host, the variable of its key and of its base URL."""

    official_url: str
    official_host: str
    key_env: str
    base_url_env: str


#: The default provider; the native Anthropic backend resolves its server with :data:`ANTHROPIC`.
OPENAI = Provider(OFFICIAL_URL, OFFICIAL_HOST, OFFICIAL_KEY_ENV, BASE_URL_ENV)
ANTHROPIC = Provider("https://api.anthropic.com", "api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")

_USERINFO = re.compile(r"(//)[^/?#]*@")


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``; other URLs are returned unchanged."""
    return _USERINFO.sub(r"\1***@", url, count=1)


def base_url_problem(value: str) -> str | None:
    """Why ``value`` cannot be a base URL (a phrase to follow the value), or None when it can."""
    example = "give the server's http:// or https:// address, e.g. http://localhost:8000/v1"
    if "://" not in value:
        return f"is not a URL; {example}"
    odd = next((ch for ch in value if ch.isspace() or ord(ch) < 32 or ord(ch) == 127), None)
    if odd is not None:
        # Checked before parsing: urlsplit silently drops tabs and newlines.
        kind = {"\t": "a tab", " ": "a space"}.get(odd, "whitespace or a control character")
        return f"contains {kind} (U+{ord(odd):04X})"
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:  # a broken IPv6 literal, a port that is not a number or out of range
        return f"is not a valid URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"is {'a ' + parts.scheme + ':// URL' if parts.scheme else 'not a URL'}; {example}"
    if not parts.hostname:
        return "has no host; write it as http://HOST:PORT/v1"
    if port == 0:
        return "has port 0"
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        return "has a query or fragment; give the server's base address only, e.g. http://localhost:8000/v1"
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a hostname or IP literal, without brackets) names this machine's loopback interface."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


@dataclass(frozen=True)
class Endpoint:
    """A resolved server: where to send, what to send as credentials, and what to tell the user."""

    url: str  # the base URL requests go to, without credentials or trailing slash
    shown: str  # the same URL as given, credentials redacted: the form stored and printed
    official: bool  # the official OpenAI API
    key_env: str | None  # the variable the key is read from (set or not); None when no key is wanted
    key: str | None = field(default=None, repr=False)  # the key itself; never stored, never printed
    credentials: tuple[str, str] | None = field(default=None, repr=False)  # user and password from the URL
    key_problem: str | None = None  # why the key is missing (the caller raises its "unavailable" error)
    notes: tuple[str, ...] = ()  # what the user should know, e.g. that $OPENAI_API_KEY was withheld

    @property
    def authorization(self) -> str:
        """The ``Authorization`` header value: the key, else the URL's credentials, else the placeholder."""
        if self.key:
            return f"Bearer {self.key}"
        if self.credentials is not None:
            user, password = self.credentials
            return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return f"Bearer {PLACEHOLDER_KEY}"


def resolve_endpoint(base_url: str | None, api_key_env: str | None, *, who: str, url_flag: str, key_flag: str,
                     environ: Mapping[str, str] | None = None, provider: Provider = OPENAI) -> Endpoint:
    """The endpoint for a ``base_url`` option and an ``api_key_env`` option (either may be None).

    ``who`` starts every message ("openai backend"); ``url_flag`` and
    ``key_flag`` say how the user sets the two options where ``who`` is used
    ("--base-url", "--api-key-env"). ``environ`` defaults to ``os.environ``. Raises
    :class:`OptionError` for a bad base URL and for a key (or URL
    credentials) that would travel over plain http to a host that is not
    loopback. A key variable that is named but empty is not an error here: it
    is reported in :attr:`Endpoint.key_problem`, for the caller to raise as its
    own "cannot run here" error. ``provider`` names the official API, its key
    and base-URL variables (OpenAI's unless told).
    """
    env = os.environ if environ is None else environ
    official_url, official_host = provider.official_url, provider.official_host
    key_var, url_var = provider.key_env, provider.base_url_env
    # 1. The base URL, and where it came from (for the message if it is bad).
    if base_url:
        raw, origin = base_url, "base URL"
    elif env.get(url_var):
        raw, origin = env[url_var], f"${url_var}"
    else:
        raw, origin = official_url, "base URL"
    problem = base_url_problem(raw)
    if problem is not None:
        fix = f"fix or unset ${url_var}" if origin.startswith("$") else f"fix {url_flag}"
        raise OptionError(f"{who}: {origin} {redact_url(raw)!r} {problem}; {fix}.")
    parts = urlsplit(raw)
    host = parts.hostname or ""
    secure = parts.scheme == "https"
    shown = redact_url(raw).rstrip("/")
    official = host == official_host
    if official and (not secure or parts.port not in (None, 443)):
        raise OptionError(f"{who}: {origin} {shown!r}: the official API is reached over https only; "
                          f"write {official_url}.")
    credentials = None
    netloc = parts.netloc
    if "@" in netloc:
        credentials = (unquote(parts.username or ""), unquote(parts.password or ""))
        netloc = netloc.rpartition("@")[2]
    url = urlunsplit(parts._replace(netloc=netloc)).rstrip("/")

    # 2. Which key, if any.
    notes: list[str] = []
    if api_key_env:
        key_env: str | None = api_key_env
    elif official:
        key_env = key_var
    else:
        key_env = None
        if env.get(key_var, "").strip():
            notes.append(f"${key_var} was not sent to {shown}: it goes only to {official_url}; "
                         f"name the variable holding this server's key with {key_flag}")
    if (key_env is not None or credentials is not None) and not secure and not is_loopback(host):
        what = f"the key in ${key_env}" if key_env is not None else "the credentials in the URL"
        raise OptionError(f"{who}: refusing to send {what} over plain http to {host}, which is not this machine; "
                          f"use an https:// URL, or reach the server through 127.0.0.1 (e.g. an SSH tunnel).")
    key = env.get(key_env, "").strip() if key_env is not None else None
    key_problem = None
    if key_env is not None and not key:
        key_problem = f"${key_env} is not set; export your key in it or name another variable with {key_flag} " \
                      f"(server {shown})."
    if key and credentials is not None:
        raise OptionError(f"{who}: {shown} carries credentials in the URL and ${key_env} holds a key; keep one.")
    return Endpoint(url=url, shown=shown, official=official, key_env=key_env, key=key or None,
                    credentials=credentials, key_problem=key_problem, notes=tuple(notes))


def configured_base_url(base_urls: list[str], model: str, options: Mapping[str, object]) -> str | list[str] | None:
    """The ``base_url`` option an ``openai:`` model gets from cfkit.toml's ``[probe] base_urls`` when the command
    names no server (``options`` has no ``base_url``): one URL, or the list of replicas (the backend spreads its
    requests over them); None where the backend's default applies. ``probe run`` and ``captions draft`` both ask
    here, so a model configured for a local server is never sent to the default one by either."""
    if not model.startswith("openai:") or "base_url" in options or not base_urls:
        return None
    return base_urls[0] if len(base_urls) == 1 else list(base_urls)
