"""The study file: which models, on which suites, behind which endpoints, and how the report shows them.

A TOML file in the workspace (docs/formats.md, "Study file"). Tables:

``[endpoints.NAME]``  an OpenAI-compatible server: ``url``, ``concurrency``
                      (requests in flight over every run that uses it),
                      ``rate`` (requests started per second, optional),
                      ``api_key_env``
``[models.NAME]``     ``model`` (KIND:NAME), ``endpoint`` (a name above or a
                      URL) or ``endpoints`` (a list: replicas of the model,
                      where the backend spreads requests over several
                      servers), ``options`` (``api_key_env`` among them
                      only where the endpoints are URLs: a table says its
                      own key), ``protocol``, ``max_tokens``, ``display``, ``group``
``[suites.NAME]``     one table per suite asked; ``limit``, ``cases``,
                      ``subset``, ``all_cases``, ``reviewed_only``,
                      ``accepted_only``, as on ``probe run``
``[report]``          ``reference``, ``compare`` (pairs of model names,
                      base first), ``resamples``, ``seed``

Every name is checked here, against the others (an endpoint a model names
exists, a compare pair names two models of the study) and against the
vocabulary (a suite is one of cfkit's), before anything is started.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cfkit.errors import ConfigError, describe_validation
from cfkit.vocabulary import MAX_CONCURRENCY, SUITES

_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+-]*$"


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, protected_namespaces=())


class Endpoint(_Table):
    url: str = Field(min_length=1)
    concurrency: int = Field(4, ge=1, le=MAX_CONCURRENCY)
    rate: float | None = Field(None, gt=0)  # requests started per second, at most
    api_key_env: str | None = None


class StudyModel(_Table):
    model: str = Field(pattern=r"^[a-z][a-z0-9_-]*:.+$")
    endpoint: str | None = None
    endpoints: list[str] | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    protocol: Literal["default", "paper"] | None = None
    max_tokens: int | None = Field(None, ge=1, le=65536)
    concurrency: int | None = Field(None, ge=1, le=MAX_CONCURRENCY)  # a model with no endpoint (local, baseline)
    display: str | None = Field(None, min_length=1)  # the name of the model's rows in the study's report
    group: str | None = None

    @field_validator("display")
    @classmethod
    def _no_equals(cls, value: str | None) -> str | None:
        if value is not None and "=" in value:
            raise ValueError(f"display name {value!r} holds '=', which the report reads as MODEL=NAME; leave it out")
        return value


class StudySuite(_Table):
    limit: int | None = Field(None, ge=1)
    cases: str | None = None
    subset: str | None = None
    all_cases: bool = False
    reviewed_only: bool = False
    accepted_only: bool = False


class ReportSettings(_Table):
    reference: bool = False
    compare: list[tuple[str, str]] = Field(default_factory=list)
    resamples: int = Field(10_000, ge=100, le=1_000_000)
    seed: int = Field(0, ge=0)


class StudyFile(_Table):
    name: str | None = None
    endpoints: dict[str, Endpoint] = Field(default_factory=dict)
    models: dict[str, StudyModel] = Field(min_length=1)
    suites: dict[str, StudySuite] = Field(min_length=1)
    report: ReportSettings = Field(default_factory=ReportSettings)

    @field_validator("suites")
    @classmethod
    def _known_suites(cls, value: dict[str, StudySuite]) -> dict[str, StudySuite]:
        for name in value:
            if name not in SUITES:
                raise ValueError(f"'{name}' is not a suite; the suites are {', '.join(SUITES)}")
        return value


class Study:
    """A study file read and checked: its path, its tables, and each model's endpoint resolved."""

    def __init__(self, path: Path, data: StudyFile):
        self.path = path
        self.data = data
        self.name = data.name or path.stem

    @property
    def models(self) -> dict[str, StudyModel]:
        return self.data.models

    @property
    def suites(self) -> dict[str, StudySuite]:
        return self.data.suites

    def display(self, name: str) -> str:
        return self.models[name].display or name

    def endpoints_of(self, name: str) -> list[tuple[str, Endpoint]]:
        """``(endpoint name, its settings)`` for each endpoint of model ``name`` (none for a local model)."""
        model = self.models[name]
        given = [model.endpoint] if model.endpoint else list(model.endpoints or [])
        return [(g, self.data.endpoints[g]) if g in self.data.endpoints  # a URL: the key is the model's option
                else (g, Endpoint(url=g, concurrency=model.concurrency or 4,
                                  api_key_env=model.options.get("api_key_env"))) for g in given]

    def endpoint_of(self, name: str) -> tuple[str, Endpoint] | None:
        """The endpoint model ``name`` is paced by: its one endpoint, or its replicas as one (their names joined
        by '+', their concurrencies and rates added); None for a model with no endpoint."""
        found = self.endpoints_of(name)
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        rates = [e.rate for _, e in found]
        return "+".join(n for n, _ in found), Endpoint(
            url=found[0][1].url, concurrency=min(sum(e.concurrency for _, e in found), MAX_CONCURRENCY),
            rate=None if None in rates else sum(rates), api_key_env=found[0][1].api_key_env)

    def label_clash(self, labels: dict[str, str]) -> str | None:
        """Why the report could not show these models a row each, or None; ``labels``: study model name -> the
        model label its runs record (``KIND:NAME``, the report's name for its rows, known once its backend is
        built). Two models of one label, or a display name that is another model's shown name, are refused
        alike by ``study validate``, ``study run`` (before anything is sent) and ``study report``."""
        where = f"study file {self.path}"
        owners: dict[str, str] = {}
        for name, label in labels.items():
            if (first := owners.setdefault(label, name)) != name:
                return (f"{where}: models '{first}' and '{name}' are both {label}, and a report shows one row per "
                        "model (with one set of settings); keep one in the study, and put other settings of "
                        "that model in a study of their own.")
        shown: dict[str, str] = {}
        for name, label in labels.items():
            seen = self.models[name].display or label
            if (first := shown.setdefault(seen, name)) != name:
                return (f"{where}: models '{first}' and '{name}' would both be shown as '{seen}' in the report "
                        "(a display name, or the model a run records where it has none); give each its own "
                        "display name.")
        return None

    def pairs(self) -> list[tuple[str, str]]:
        """Every (model name, suite) the study runs, models in file order, suites in file order within each."""
        return [(m, s) for m in self.models for s in self.suites]


def _check(path: Path, data: StudyFile) -> None:
    where = f"study file {path}"
    for name, model in data.models.items():
        if not _valid_name(name):
            raise ConfigError(f"{where}: model name '{name}' may hold only letters, digits and . _ + -; rename it.")
        if model.endpoint is not None and model.endpoints is not None:
            raise ConfigError(f"{where}: model '{name}' gives both 'endpoint' and 'endpoints'; keep one.")
        named = [model.endpoint] if model.endpoint else list(model.endpoints or [])
        if model.endpoints is not None and not named:
            raise ConfigError(f"{where}: model '{name}' has an empty 'endpoints' list; name one or drop it.")
        if len(set(named)) < len(named):
            raise ConfigError(f"{where}: model '{name}' lists an endpoint twice; list each once.")
        keys = {data.endpoints[e].api_key_env if e in data.endpoints else None for e in named}
        if len(keys) > 1:
            raise ConfigError(f"{where}: model '{name}' lists endpoints with different api_key_env; replicas of "
                              "one model take one key variable.")
        for endpoint in named:
            if endpoint not in data.endpoints and "://" not in endpoint:
                known = ", ".join(data.endpoints) or "none"
                raise ConfigError(f"{where}: model '{name}' names endpoint '{endpoint}', which is neither an "
                                  f"[endpoints.{endpoint}] table (known: {known}) nor a URL.")
        if named and not model.model.startswith("openai:"):
            raise ConfigError(f"{where}: model '{name}' ({model.model}) has an endpoint, and only openai: models "
                              "talk to one; drop the endpoint or use an openai: model.")
        if named and model.concurrency is not None and named[0] in data.endpoints:
            raise ConfigError(f"{where}: model '{name}' sets 'concurrency', but its endpoint '{named[0]}' sets how "
                              "many requests are in flight; set it there.")
        if named and "base_url" in model.options:
            raise ConfigError(f"{where}: model '{name}' sets option 'base_url' and an endpoint; the endpoint says "
                              "where the server is. Keep one.")
        tables = [e for e in named if e in data.endpoints]
        if tables and "api_key_env" in model.options:  # a URL endpoint has no key of its own: the model's option
            raise ConfigError(f"{where}: model '{name}' sets option 'api_key_env', and its endpoint '{tables[0]}' "
                              f"is an [endpoints.{tables[0]}] table, which says the key of every model behind it; "
                              f"set api_key_env there and drop it from the model's options.")
    displays: dict[str, str] = {}
    for name, model in data.models.items():
        shown = model.display or name
        if shown in displays:
            raise ConfigError(f"{where}: models '{displays[shown]}' and '{name}' are both shown as '{shown}'; give "
                              "each its own display name.")
        displays[shown] = name
    for base, other in data.report.compare:
        for side in (base, other):
            if side not in data.models:
                raise ConfigError(f"{where}: [report] compare names '{side}', which is not a model of the study "
                                  f"({', '.join(data.models)}).")
        if base == other:
            raise ConfigError(f"{where}: [report] compare pairs '{base}' with itself; name two models.")
    if data.report.compare and "contextcanvas" not in data.suites:
        raise ConfigError(f"{where}: [report] compare pairs are compared on the contextcanvas cases, and the study "
                          "asks no contextcanvas suite; add [suites.contextcanvas] or drop compare.")


def _valid_name(name: str) -> bool:
    import re

    return re.match(_NAME, name) is not None


def load_study(path: Path | str, root: Path | None = None) -> Study:
    """Read and check a study file; raises :class:`ConfigError` naming the file and the first problem. ``root``:
    the workspace folder, where a relative ``path`` not found from the current folder is looked for (as every
    ``cfkit study`` command and ``cfkit view --study`` find it)."""
    path = Path(path)
    if root is not None and not path.is_absolute() and not path.exists():
        path = root / path
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"study file {path} not found; write one with 'cfkit study new {path}'.") from None
    except IsADirectoryError:
        raise ConfigError(f"study file {path} is a folder; give the TOML file.") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"study file {path}: not UTF-8 text (byte {exc.start}); save it as UTF-8.") from exc
    except OSError as exc:
        raise ConfigError(f"study file {path}: cannot be read ({exc.strerror}).") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"study file {path}: not valid TOML ({exc}).") from exc
    try:
        data = StudyFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"study file {path}: {describe_validation(exc, StudyFile)} See docs/formats.md, 'Study file'.") from exc
    _check(path, data)
    return Study(path, data)
