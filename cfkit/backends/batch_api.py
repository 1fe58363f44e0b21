"""The batch API a backend hands ``probe run --batch`` and ``probe collect`` (:meth:`cfkit.backends.Backend.batch_api`).

:class:`BatchAPI` is its base class, with a default for every optional member,
as :class:`~cfkit.backends.Backend` is a backend's: cfkit reads each member as
a plain attribute and never probes a plug-in's object with ``getattr``. The
built-ins (:class:`cfkit.backends.openai_batch.OpenAIBatches`,
:class:`cfkit.backends.anthropic_batch.MessageBatches`) subclass it; the object
a third-party backend's ``batch_api()`` returns is given its defaults when cfkit
takes it (:func:`batch_api_of`), whether or not its class subclasses it.

Required (the defaults refuse in one line, naming the member):

- ``upload(path) -> str``: a batch input file (one JSON line a request:
  ``custom_id``, ``body``) to the provider; the id to create the batch from;
- ``create(file_id, *, metadata) -> BatchInfo``: start the batch;
- ``get(batch_id) -> BatchInfo``: where it stands (:data:`NOT_FOUND` for one the
  provider no longer knows);
- ``content(file_id) -> bytes``: an output or error file of an ended batch, as
  lines of ``{"custom_id", "response": {"status_code", "body"}, "error"}``.

Optional:

- ``endpoint``: where the batches go, as shown to people (stored with each);
- ``file_deadline_s``: seconds a whole download may take (``probe collect
  --timeout`` sets it);
- ``check_model() -> str | None``: asked once before anything is recorded or
  uploaded; refuses a model the provider does not serve by raising
  :class:`~cfkit.errors.BackendUnavailable`, returns None when it checked the
  model, and otherwise why it could not, in a few words. The default cannot
  check: ``probe run --batch`` then tells the user, once, that the model was not
  checked (a misspelt name shows only when the batch is collected), and keeps
  that line with the run's notes;
- ``cancel(batch_id) -> BatchInfo``: ask the provider to stop a batch (``probe
  collect --final``); without it, collect says the batch may still run and be
  billed (:func:`can_cancel`);
- ``aclose()``: release connections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cfkit.errors import PluginError

#: Statuses after which a batch changes no more.
FINAL = frozenset({"completed", "failed", "expired", "cancelled"})
#: The status of a batch the server answers 404 for: it no longer knows it (or the URL is not its server's).
NOT_FOUND = "not found"
#: Seconds an upload or a download of a whole file may take, all its attempts together (``probe collect
#: --timeout`` changes it for downloads).
FILE_DEADLINE_S = 1800.0


@dataclass(frozen=True)
class BatchInfo:
    """A batch as the server describes it."""

    id: str
    status: str
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)  # total, completed, failed
    errors: tuple[str, ...] = ()  # why the batch itself failed (validation errors), in the server's words

    @property
    def final(self) -> bool:
        return self.status in FINAL


class BatchAPI:
    """A provider's batch API: the base class, with a default for every optional member (see the module docstring)."""

    endpoint: str = ""  # where the batches go, as shown to people (credentials redacted)
    file_deadline_s: float = FILE_DEADLINE_S  # a whole download, every attempt together

    def _missing(self, member: str) -> PluginError:
        return PluginError(f"{type(self).__name__} (a batch API) defines no {member}; its backend cannot run "
                           "--batch. Run without --batch, or give the batch API that method.")

    async def upload(self, path: Path) -> str:
        raise self._missing("upload(path)")

    async def create(self, file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        raise self._missing("create(file_id, metadata=…)")

    async def get(self, batch_id: str) -> BatchInfo:
        raise self._missing("get(batch_id)")

    async def content(self, file_id: str) -> bytes:
        raise self._missing("content(file_id)")

    async def cancel(self, batch_id: str) -> BatchInfo:
        raise self._missing("cancel(batch_id)")

    async def check_model(self) -> str | None:
        """Refuse (raise :class:`~cfkit.errors.BackendUnavailable`) a model the provider does not serve; None when
        the model was checked, else why it could not be. The default cannot check."""
        return f"{type(self).__name__} defines no check_model()"

    async def aclose(self) -> None:
        """Release connections."""


def as_batch_api(api: Any) -> BatchAPI:
    """``api`` with :class:`BatchAPI`'s defaults for what its class leaves out (as :func:`cfkit.backends.as_backend`)."""
    from cfkit import registry

    if isinstance(api, BatchAPI):
        return api
    try:
        api.__class__ = registry.with_defaults(type(api), BatchAPI)
    except TypeError:  # a class whose layout cannot change (__slots__)
        raise PluginError(f"{type(api).__name__} (a batch API) cannot take cfkit's defaults (__slots__); make it "
                          "subclass cfkit.backends.batch_api.BatchAPI.") from None
    return api


def batch_api_of(backend: Any) -> BatchAPI:
    """The batch API of ``backend`` (one that has one: :func:`cfkit.backends.has_batch_api`), with the defaults."""
    api = backend.batch_api()
    if api is None:
        raise PluginError(f"{backend.model}: its batch_api() gave no batch API. Run it without --batch.")
    return as_batch_api(api)


def can_cancel(api: BatchAPI) -> bool:
    """Whether ``api`` can ask the provider to stop a batch: its class defines ``cancel``."""
    return type(api).cancel is not BatchAPI.cancel


def unchecked(model: str, why: str) -> str:
    """The line told once when ``probe run --batch`` could not check that the provider serves ``model``."""
    return (f"{model}: the model was not checked before the batch was submitted ({why}); a name the provider does "
            "not serve shows only when 'cfkit probe collect' reads the batch")
