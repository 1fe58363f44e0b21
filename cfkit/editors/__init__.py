"""Image editors: one protocol, several interchangeable engines.

An editor turns an :class:`EditRequest` (source image, mask, prompt) into an
:class:`EditResult` (one raw image per candidate, at the source's exact size).
Inside cfkit a mask is an 8-bit array with 255 where the image may change; each
engine converts it to the convention of the service or library it calls.

Engines register in the ``cfkit.editors`` entry-point group, built-ins
included, and are configured the same way: an ``Options`` model fed from
``-o KEY=VALUE``, ``cfkit.toml [edit.engines.NAME]`` and a spec's
``engines: {NAME: …}``. :func:`load_editor` imports only the chosen one, and the
engine imports its heavy libraries only in ``edit``.

Failures an engine raises, and what ``auto`` does with them:

- :class:`~cfkit.errors.EditorUnavailable` — cannot run here (no key, package or
  weights): ``auto`` tries the next engine.
- :class:`~cfkit.errors.EditorTransport` — the service stayed unreachable after
  the engine's retries: ``auto`` tries the next engine. So does
  :class:`~cfkit.errors.EditorUnanswered`, raised by ``cfkit edit`` itself when
  the engine's server (:meth:`Editor.server`) gives no answer to the connection
  tried before its call: nothing is sent.
- :class:`~cfkit.errors.EditRefused` — a content-policy refusal: recorded and
  shown, never retried and never replaced by another engine.
- :class:`~cfkit.errors.EditorError` — anything else: the edit fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from cfkit.errors import SpecError, UsageError, stopped_sending  # noqa: F401 (engines mark a stop with it)
from cfkit.options import OptionField, OptionValues, PluginOptions, option_fields, validate_options
from cfkit.registry import EDITORS, load, plugins, with_defaults


class EditorOptions(PluginOptions):
    """Base of every engine's ``Options`` (see :class:`cfkit.options.PluginOptions`)."""


@dataclass(frozen=True)
class EditRequest:
    """Everything an engine needs for one call, the same for every engine.

    ``image`` is the source, ``(H, W, 3)`` uint8; ``mask`` is ``(H, W)`` uint8 with
    255 where the image may change. Engine-specific data (an operation, an
    asset, a file to import) reaches the engine through its own ``Options``.
    Relative paths in options are resolved with :meth:`path`.
    """

    spec_id: str
    prompt: str
    image: np.ndarray
    mask: np.ndarray
    n: int = 1
    seed: int | None = None
    files: Path | None = None  # the folder spec-relative paths (masks, assets) are relative to
    root: Path | None = None  # the workspace: a file outside it is never read

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)`` of the source image."""
        return int(self.image.shape[1]), int(self.image.shape[0])

    def path(self, value: str | Path, *, what: str) -> Path:
        """``value`` resolved against :attr:`files`; a path that leaves the workspace is refused."""
        base = self.files or Path.cwd()
        candidate = (base / Path(value).expanduser()).resolve()
        if self.root is not None and not candidate.is_relative_to(self.root.resolve()):
            raise SpecError(f"spec {self.spec_id}: {what} '{value}' points outside the workspace {self.root}; "
                            "keep masks and assets inside the workspace folder.")
        return candidate


@dataclass(frozen=True)
class EngineServer:
    """The server an engine's calls go to, for ``cfkit edit`` to check that it answers before the first call
    (:meth:`Editor.server`): ``url`` its address (http or https, without credentials), ``shown`` the same as people
    see it (credentials redacted), ``fix`` where the user sets it (named in the line when it does not answer),
    ``timeout`` how many seconds the check waits for a connection, ``start`` what to start where nothing listens
    there."""

    url: str
    shown: str
    fix: str
    timeout: float = 5.0
    start: str = "the server of the images API there (POST /images/edits)"


@dataclass(frozen=True)
class EditResult:
    """The raw outputs of one call, each ``(H, W, 3)`` uint8 at the source's exact size.

    ``params`` lists every setting that shaped the output (no secrets);
    ``seed`` is the seed the engine actually used for the first image (image
    ``i`` used ``seed + i``), or None when the engine takes no seed;
    ``usage`` and ``cost_usd`` are filled only when the service reports them;
    ``abandoned`` counts the attempts of the call given up after they were sent
    (a timeout once the request was out) before this reply came: a service may
    bill them too.
    """

    images: tuple[np.ndarray, ...]
    model: str | None
    params: dict[str, Any]
    seed: int | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    abandoned: int = 0


class Editor:
    """An image editing engine, :meth:`edit` being the whole seam: the base class, with defaults.

    Class attributes: ``name``; ``Options``, the pydantic model of its
    options (the constructor takes one validated instance);
    ``max_candidates``, how many images one call may make (1 for a
    deterministic engine); ``auto_rank``, its place in ``--engine auto``
    (lower first; None keeps it out); ``paid``, whether a service bills its
    calls (``cfkit edit`` then counts them and says what it spent). An engine may also offer
    ``describe(request) -> dict`` (what it would send, for ``--dry-run``) and
    ``check(request)`` (input checks that must fail before anything is
    written); neither may call a service or write a file. An engine that
    calls a server offers ``server()``, the :class:`EngineServer` its calls
    go to: ``cfkit edit`` opens one connection to it before the engine's
    first call (:func:`cfkit.backends.no_answer.connect_problem`) and sends
    nothing when none opens. ``model`` names
    the model it uses, or is None. An engine class that does not subclass this
    one still works: :func:`editor_class` gives it these defaults.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type[EditorOptions]]
    max_candidates: ClassVar[int] = 1
    auto_rank: ClassVar[int | None] = None
    paid: ClassVar[bool] = False
    model: str | None = None

    def edit(self, request: EditRequest) -> EditResult:
        raise NotImplementedError(f"{type(self).__name__} defines no edit(request)")

    def describe(self, request: EditRequest) -> Mapping[str, Any]:
        """What the engine would send for ``request`` (``--dry-run``); nothing by default."""
        return {}

    def check(self, request: EditRequest) -> None:
        """Checks of ``request`` that must fail before anything is written; none by default."""

    def server(self) -> EngineServer | None:
        """The server the engine's calls go to, checked to answer before its first call; None (the default):
        it calls no server, nothing is checked."""
        return None


def editor_class(name: str) -> type:
    """The class registered as ``name``; unknown names list what is installed."""
    if name == "auto":
        raise UsageError("'auto' is a chain of engines, not one engine; name one.")
    return with_defaults(load(EDITORS, name), Editor)


def load_editor(name: str, options: OptionValues | Mapping[str, Any] | None = None) -> Editor:
    """Construct engine ``name`` with its options, checked against its ``Options`` model.

    An unknown key is refused with the list the engine accepts; a bad value
    with the rule it broke and where it came from.
    """
    cls = editor_class(name)
    values = options if isinstance(options, OptionValues) else OptionValues.of(options, "-o")
    if set(values.values) - set(cls.Options.model_fields):
        others = {other: editor_class(other).Options for other in plugins(EDITORS) if other != name}
    else:
        others = None
    validated = validate_options(cls.Options, values, what=f"engine '{name}'", see="cfkit edits engines",
                                 elsewhere=others)
    return cls(validated)


@dataclass(frozen=True)
class EditorInfo:
    """One installed engine, as ``cfkit edits engines`` lists it."""

    name: str
    package: str
    target: str
    auto_rank: int | None
    max_candidates: int
    options: list[OptionField]
    problem: str | None = None  # why the class could not be loaded


def describe_editors() -> list[EditorInfo]:
    """Every engine in the entry-point group, with its options; loading one imports no heavy library."""
    infos = []
    for name, plugin in sorted(plugins(EDITORS).items()):
        try:
            cls = editor_class(name)
            infos.append(EditorInfo(name, plugin.package, plugin.value, cls.auto_rank,
                                    cls.max_candidates, option_fields(cls.Options)))
        except Exception as exc:  # a broken third-party plug-in must not hide the others
            infos.append(EditorInfo(name, plugin.package, plugin.value, None, 0, [], f"{type(exc).__name__}: {exc}"))
    return infos


def auto_chain(configured: tuple[str, ...] | list[str] | None = None) -> tuple[str, ...]:
    """The engines ``--engine auto`` tries, in order: ``[edit] auto`` when set, else by each engine's ``auto_rank``."""
    if configured:
        return tuple(configured)
    ranked = []
    for name in plugins(EDITORS):
        rank = editor_class(name).auto_rank
        if rank is not None:
            ranked.append((rank, name))
    return tuple(name for _, name in sorted(ranked))


# ── shared image helpers for engines ────────────────────────────────────────


def resize_rgb(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize an RGB array to ``size = (width, height)`` with Lanczos; a no-op at that size."""
    if (array.shape[1], array.shape[0]) == tuple(size):
        return array
    return np.asarray(Image.fromarray(array).resize(size, Image.Resampling.LANCZOS))


def resize_mask(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Resize a 0/255 mask to ``size`` and keep it binary (nearest neighbour)."""
    if (mask.shape[1], mask.shape[0]) == tuple(size):
        return mask
    return np.asarray(Image.fromarray(mask).resize(size, Image.Resampling.NEAREST))
