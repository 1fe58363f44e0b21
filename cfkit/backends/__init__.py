"""Model backends: one seam, ``Backend.answer(request) -> Reply``.

A backend is named ``KIND:NAME`` on the command line (``openai:gpt-5.5``,
``hf:/models/qwen``, ``replay:preds.jsonl``, ``baseline:always-no``). The kind
is looked up in the ``cfkit.backends`` entry-point group, through which the
built-ins register exactly as a third-party package would; the name is handed
to the backend class. Options arrive as ``-o key=value`` strings and are checked
against the backend's ``Options`` model, so an unknown or malformed key is
refused with the allowed list before anything runs.

Exceptions a backend raises (all from :mod:`cfkit.errors`):

    BackendError
    ├── BackendUnavailable   cannot run here: no key, no package, no weights (stops the run)
    ├── QuotaRefused         the account cannot pay: no credit or quota (stops the run; cfkit.backends.billing)
    └── TransportError       one request failed after its retries (recorded, retried next run)

Any other ``BackendError`` stops the run: it means every request would fail
the same way (a wrong model name, a rejected key).

Start-up checks come first: a backend class may name the modules it imports
(``requires``) and the cfkit extra that installs them (``extra``);
:func:`load_backend` looks them up without importing them and, when one is
missing, raises :class:`BackendUnavailable` with the exact ``pip install``
command, before a run is opened. The constructor then checks whatever else it
can without sending a request (a key, local weights).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from cfkit import registry
from cfkit.errors import BackendUnavailable, TransportError, UsageError
from cfkit.hints import install_hint
from cfkit.images import ImageData
from cfkit.option_words import PLAIN, OptionWords
from cfkit.options import OptionField, identity_options, option_fields, parse_option_pairs, validate_plugin_options

if TYPE_CHECKING:
    from pydantic import BaseModel

    from cfkit.options import PlainSpec


@dataclass(frozen=True)
class Generation:
    """Decoding settings of a request. The protocol is greedy: temperature 0.

    The fields after ``max_tokens`` are model controls a user may set
    (:mod:`cfkit.backends.controls`); None means not given, and a setting not
    given is left out of :meth:`record`, so requests and runs that set none
    keep the keys and ids they always had.
    """

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    extra_body: str | None = None  # a JSON object (canonical text) laid over the request body

    def record(self) -> dict[str, Any]:
        """The settings as a run records them and a cache key covers them: those given, and always the first two."""
        found: dict[str, Any] = {"temperature": self.temperature, "max_tokens": self.max_tokens}
        for key in ("top_p", "seed", "reasoning_effort", "extra_body"):
            value = getattr(self, key)
            if value is not None:
                found[key] = value
        return found


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """Where a request comes from. Used by the runner, replay and baselines; never sent to a model.

    It holds no gold label: a baseline that needs the suite's label
    distribution gets it once, at construction (:class:`BackendContext`).
    """

    suite: str
    case_id: str
    pair_id: str  # '' when the request is not part of a counterfactual pair
    condition: str
    yes_option: str | None = None


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """One question to a model: exactly what it receives, plus the metadata that stays here.

    ``images`` are :class:`ImageData` when a backend receives the request; a
    planned request may hold them by reference instead (anything with
    ``mime``, ``sha256`` and ``data``; the runner reads them when it sends).
    """

    system: str
    user: str
    images: tuple[ImageData, ...]
    option_ids: tuple[str, ...]
    schema: dict[str, Any] | None
    generation: Generation
    meta: RequestMeta

    def fingerprint(self) -> dict[str, Any]:
        """The request's content for the cache key: texts, image bytes (hashed), options, schema, decoding.

        ``meta`` is left out on purpose: two cases that send identical content
        get the identical (deterministic) answer.
        """
        return {
            "system": self.system,
            "user": self.user,
            # ``sha256`` of the bytes sent: an image held by reference knows it without reading the file.
            "images": [[img.mime, img.sha256] for img in self.images],
            "option_ids": list(self.option_ids),
            "schema": self.schema,
            "generation": self.generation.record(),
        }


@dataclass(frozen=True)
class KnownAnswer:
    """An answer a backend already knows in parsed form (replay, baselines); the runner stores it as is."""

    answer: str | None
    parse: str | None
    error: str | None
    reason: str | None = None
    confidence: str | None = None


@dataclass(frozen=True)
class Reply:
    """What came back for one request."""

    raw: str | None
    usage: dict[str, Any] = field(default_factory=dict)  # token counts as the server reported them
    latency_s: float = 0.0  # wall time of the call, retries included
    cost_usd: float | None = None  # None when the backend has no prices
    notes: tuple[str, ...] = ()  # anything the user should know, e.g. a structured-output fallback
    refused: bool = False  # the model declined (an explicit refusal, not an unreadable reply)
    known: KnownAnswer | None = None
    reasoning: str | None = None  # a reasoning text the server returned beside the content; never graded
    server_model: str | None = None  # the model id the server says answered, when it says
    system_fingerprint: str | None = None  # the server's build fingerprint, when it reports one
    raw_chars: int | None = None  # the reply's full length when ``raw`` was cut to the storage cap
    truncated: bool = False  # generation stopped at the token limit (finish_reason "length"), not at its end
    endpoint: str | None = None  # which server answered, when the model has several (provenance, not identity)
    retries: int = 0  # failed attempts retried before this reply came (the request is still one request)
    failovers: int = 0  # attempts another replica failed before this one answered (a replica pool)
    # Attempts before this reply given up after the request was sent (a timeout, a connection dropped mid-reply, a
    # complete response thrown away): the server may have generated a reply for each, and a provider billed it;
    # not a connection refused, nor an error status answered at once. ``cost_usd`` leaves them out.
    abandoned: int = 0


@dataclass(frozen=True)
class Capabilities:
    """What a backend can take and how the runner should treat it."""

    images: bool  # accepts images at all
    multi_image: bool  # accepts two images in one request; otherwise pairs go as one labelled sheet
    json_schema: bool  # can constrain its output to a JSON schema
    remote: bool  # an API (default concurrency 4) rather than a local model (default 1)
    cacheable: bool = True  # replies are worth caching by request content (false for replay/baselines)


@dataclass(frozen=True)
class BackendContext:
    """What the runner tells a backend at construction: the suite and its gold-label distribution.

    ``gold_labels`` counts "yes"/"no" for two-option cases and the option id
    for the others; only ``baseline:majority`` reads it. ``words``: how the
    command that built the backend sets its options, for its hints.
    """

    suite: str | None = None
    gold_labels: Counter = field(default_factory=Counter)
    root: Path | None = None  # folder relative names (replay files) are resolved against
    store_dir: Path | None = None  # the workspace's store folder, for a backend's own small caches (file hashes)
    words: OptionWords = PLAIN  # what a hint tells the user to type for an option (cfkit.option_words)


class Backend:
    """A model that answers probe requests: the base class, with a default for every optional member.

    ``answer`` may be ``async def`` (API clients) or a plain function (local
    models); the runner runs a plain one in a worker thread. A backend class that
    does not subclass this one still works: :func:`backend_class` gives it these
    defaults (:func:`cfkit.registry.with_defaults`), so cfkit reads every member
    as a plain attribute.
    """

    kind: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities | None] = None  # required in practice; None only for a broken plug-in
    Options: ClassVar[type[BaseModel]]
    #: Modules the backend imports, checked before a run opens, and the cfkit extra that installs them.
    requires: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str | None] = None
    #: Keys of ``cache_identity`` that follow from the suite's cases, not from a setting: a run's settings
    #: leave them out, its cache keys keep them.
    derived_identity: ClassVar[tuple[str, ...]] = ()

    model: str  # "KIND:NAME", as recorded in runs and predictions
    priced: bool = False  # True when replies carry cost_usd
    cache_identity: dict[str, Any]  # settings that change answers (e.g. the server URL); part of the cache key
    options: BaseModel | None = None  # the validated options it was built with
    endpoint: str | None = None  # the resolved server URL, credentials redacted; recorded with a run
    versions: dict[str, str] | None = None  # library -> version of what answers (openai, transformers, torch …)
    notes: tuple[str, ...] = ()  # said when a run starts, and kept with the run
    replayed_from: str | None = None  # the file its replies are read from (replay:): a run then sends nothing
    #: Set by the runner to a function the backend calls with the Retry-After seconds (or None) when the
    #: server answers 429/503, before it retries: the runner then keeps fewer requests in flight.
    on_overload: Callable[[float | None], None] | None = None
    # Set by the runner: told, in one line, what a person should hear while the run sends, and how many more
    # requests may be in flight from now on (a replica back in use: cfkit.backends.replicas).
    on_news: Callable[[str, int], None] | None = None
    #: The model controls of :mod:`cfkit.backends.controls` it honours (none by default).
    controls: ClassVar[tuple[str, ...]] = ()
    #: The batch-file line format its :meth:`batch_body` writes (``probe run --batch-file``): "openai", or None.
    batch_file_format: ClassVar[str | None] = None
    #: True when it sends images as base64 (``image.base64`` where an image has it): a probe run then reads each
    #: file into a reused buffer and keeps only its base64 (:class:`cfkit.images.EncodedImage`).
    sends_base64: ClassVar[bool] = False
    #: Its options as plain readings (:class:`cfkit.options.PlainSpec`), taken without pydantic when every value
    #: given is plainly right; None: the ``Options`` model reads them all.
    plain_options: ClassVar[PlainSpec | None] = None
    batch_size: int = 1  # requests one call answers together (a local model's batches)
    replicas: int = 1  # servers that answer it (cfkit.backends.replicas); -j applies at each

    @property
    def replicas_in_use(self) -> int:
        """How many of its :attr:`replicas` take requests (not left out when the backend was made)."""
        return self.replicas

    def answer(self, request: ProbeRequest) -> Reply:
        raise NotImplementedError(f"{type(self).__name__} defines no answer(request)")

    def batch_api(self) -> Any:
        """The provider's batch API (``probe run --batch``); None when it has none."""
        return None

    def warm_up(self) -> None:
        """Called once a run knows it will send, before it plans: start set-up that can go on while the run
        plans (on a thread, say, where another CPU can run it). Nothing by default."""

    async def check_endpoint(self) -> str | None:
        """Whether the server can be reached, asked once before a run sends: why not, in one line, or None."""
        return None

    async def aclose(self) -> None:
        """Release connections at the end of a run."""

    def run_notes(self) -> list[str]:
        """Asked when a run stops sending: what to say of how its servers did (replicas left out), kept with
        the run's notes. Nothing by default."""
        return []

    def set_concurrency(self, per_endpoint: int) -> None:
        """With several :attr:`replicas`: the requests each may have in flight (one server: the runner's limit)."""

    def batch_body(self, request: ProbeRequest) -> dict[str, Any]:
        """The request body of ``request`` as a line of a batch file or job carries it."""
        raise NotImplementedError(f"{type(self).__name__} writes no batch lines")

    def reply_from_completion(self, completion: dict[str, Any], *, price_factor: float = 1.0) -> Reply:
        """A reply read from what a batch answered for one request (a result line's ``response.body``), its cost
        ``price_factor`` times the live prices. A backend with :meth:`batch_api` defines it and :meth:`batch_body`
        (:func:`batch_members_missing`)."""
        raise NotImplementedError(f"{type(self).__name__} reads no batch results")


def _backend_options() -> type:
    from cfkit.options import PluginOptions

    class BackendOptions(PluginOptions):
        """Base of every backend's ``Options`` (see :class:`cfkit.options.PluginOptions`).

        Fields marked ``json_schema_extra={"cache": False}`` cannot change an
        answer (timeouts, retries, prices); the others enter the cache key.
        """

    BackendOptions.__module__, BackendOptions.__qualname__ = __name__, "BackendOptions"
    return BackendOptions


def __getattr__(name: str) -> Any:
    """``BackendOptions`` (a pydantic model) is built when first asked for: a run whose backend reads its options
    plainly (:class:`cfkit.options.PlainSpec`) never imports pydantic."""
    if name == "BackendOptions":
        built = globals()["BackendOptions"] = _backend_options()
        return built
    raise AttributeError(f"module 'cfkit.backends' has no attribute {name!r}")


#: The options that can change an answer: part of a backend's cache identity.
cache_options = identity_options


def split_model(spec: str) -> tuple[str, str]:
    """``"openai:gpt-5.5"`` -> ``("openai", "gpt-5.5")``; the name may itself contain colons."""
    kind, sep, name = spec.partition(":")
    if not sep or not kind or not name:
        kinds = ", ".join(sorted(registry.plugins(registry.BACKENDS))) or "none"
        raise UsageError(
            f"model '{spec}' is not KIND:NAME (e.g. openai:gpt-5.5, hf:Qwen/Qwen3-VL-8B-Instruct, "
            f"baseline:always-no). Installed kinds: {kinds}."
        )
    return kind, name


def backend_class(kind: str) -> type:
    """The class registered as ``kind`` in the ``cfkit.backends`` entry-point group."""
    return registry.with_defaults(registry.load(registry.BACKENDS, kind), Backend)


def _importable(module: str) -> bool:
    """Whether ``module`` can be found, without importing it (a module set to None in sys.modules cannot)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package; a module whose spec is None
        return False


def missing_requirement(cls: type) -> str | None:
    """One line naming what ``cls`` needs that is not installed and the command that installs it; None when all is there."""
    absent = [m for m in cls.requires if not _importable(m)]
    if not absent:
        return None
    kind = cls.kind or cls.__name__
    names = " and ".join(f"'{m}'" for m in absent)
    verb = "is" if len(absent) == 1 else "are"
    extra = cls.extra
    if extra:
        return (f"the {kind} backend needs {names}, which {verb} not installed; install cfkit's {extra} extra: "
                f"{install_hint(extra)}")
    return f"the {kind} backend needs {names}, which {verb} not installed; install the package that provides it."


def check_installed(kind: str) -> type:
    """The class of backend ``kind``, after checking that what it imports is installed.

    Raises :class:`BackendUnavailable` (exit status 2) with the install command
    when a required module is missing; nothing has been recorded at that point.
    """
    cls = backend_class(kind)
    problem = missing_requirement(cls)
    if problem is not None:
        raise BackendUnavailable(problem)
    return cls


def load_backend(spec: str, options: Mapping[str, Any] | None = None, *,
                 context: BackendContext | None = None) -> Backend:
    """Build the backend named by ``spec`` ("KIND:NAME") with validated ``options``.

    Example::

        backend = load_backend("openai:gpt-5.5", {"base_url": "http://localhost:8000/v1"})
    """
    kind, name = split_model(spec)
    cls = check_installed(kind)
    validated = validate_plugin_options(cls, options or {}, what=f"backend '{kind}'", see="cfkit probe backends")
    return cls(name, validated, context or BackendContext())


@dataclass(frozen=True)
class BackendInfo:
    """One installed backend, as ``cfkit probe backends`` lists it."""

    kind: str
    package: str
    target: str
    capabilities: Capabilities | None
    options: list[OptionField]
    problem: str | None = None  # why the class could not be loaded
    missing: str | None = None  # what it needs that is not installed, with the install command
    install: str | None = None  # the command alone, when the backend names its cfkit extra


def describe_backends() -> list[BackendInfo]:
    """Every backend in the entry-point group, with its capabilities and options.

    Loading a backend class imports only its own module, never the heavy
    library it wraps.
    """
    infos = []
    for kind, plugin in sorted(registry.plugins(registry.BACKENDS).items()):
        try:
            cls = backend_class(kind)
            missing = missing_requirement(cls)
            infos.append(BackendInfo(kind, plugin.package, plugin.value, cls.capabilities, _listed_options(cls),
                                     missing=missing, install=install_hint(cls.extra) if missing and cls.extra else None))
        except Exception as exc:  # a broken third-party plug-in must not hide the others
            infos.append(BackendInfo(kind, plugin.package, plugin.value, None, [], f"{type(exc).__name__}: {exc}"))
    return infos


def as_backend(backend: Any) -> Backend:
    """``backend`` with :class:`Backend`'s defaults for what it leaves out: a backend object built by hand
    from a class that does not subclass :class:`Backend` is given the class :func:`backend_class` would give."""
    if isinstance(backend, Backend):
        return backend
    try:
        backend.__class__ = registry.with_defaults(type(backend), Backend)
    except TypeError:  # a class whose layout cannot change (__slots__): used as it is
        pass
    return backend


def has_batch_api(backend: Any) -> bool:
    """Whether ``backend`` offers a provider batch API (``probe run --batch``): its class overrides ``batch_api``."""
    return type(as_backend(backend)).batch_api is not Backend.batch_api


def batch_members_missing(backend: Any) -> list[str]:
    """What a backend with a batch API leaves to :class:`Backend`'s defaults that a batch needs: writing its
    lines (``batch_body``) and reading its results (``reply_from_completion``)."""
    kind = type(as_backend(backend))
    return [name for name, own, base in (("batch_body()", kind.batch_body, Backend.batch_body), (
        "reply_from_completion()", kind.reply_from_completion, Backend.reply_from_completion)) if own is base]


def _listed_options(cls: type) -> list[OptionField]:
    """A backend's own options, then the model controls it takes (:mod:`cfkit.backends.controls`)."""
    from cfkit.backends.controls import ModelControls

    own = option_fields(cls.Options)
    taken = set(cls.controls) - {o.name for o in own}
    return own + [o for o in option_fields(ModelControls) if o.name in taken]


def is_async(backend: Backend) -> bool:
    return inspect.iscoroutinefunction(backend.answer)


__all__ = [
    "Backend", "BackendContext", "BackendInfo", "BackendOptions", "Capabilities", "Generation", "ImageData",
    "KnownAnswer", "ProbeRequest", "Reply", "RequestMeta", "TransportError", "as_backend", "backend_class",
    "batch_members_missing", "has_batch_api", "cache_options", "check_installed", "describe_backends",
    "load_backend", "missing_requirement", "parse_option_pairs", "split_model",
]
