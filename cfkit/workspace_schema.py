"""The full check of ``cfkit.toml`` (pydantic), for what :mod:`cfkit.workspace`'s plain reading leaves to it.

A ``cfkit.toml`` whose values are all plainly of their types and in range is
read without pydantic (:func:`cfkit.workspace.load_workspace`), so that everyday
commands start fast; any other one comes here, where it is accepted, converted
(a ``pairs = "12"`` read as 12) or refused with pydantic's words, as always.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cfkit.errors import ConfigError, describe_validation
from cfkit.vocabulary import MAX_CONCURRENCY, MAX_MARGIN_PX


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DatasetModel(_Section):
    cases: str = "data/cases.jsonl"
    images: str = "data/images"


class WorkspaceModel(_Section):
    store: str = ".cfkit"
    pairs: int = Field(36, ge=1, le=10_000)
    pair_prefix: str = Field("CF", pattern=r"^[A-Za-z][A-Za-z_-]*$")  # pair ids are PREFIX01, PREFIX02, …
    interventions: str = "interventions"
    captions: str = "captions"
    probes: str = "probes"


class EditModel(_Section):
    engine: str = "auto"  # an engine name, or auto
    candidates: int = Field(1, ge=1, le=100)
    auto: list[str] | None = None  # the engines auto tries, in order (default: each engine's auto_rank)
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)  # [edit.engines.NAME]: that engine's options


class PriceModel(_Section):
    input: float = Field(ge=0, description="USD per million input tokens")
    output: float = Field(ge=0, description="USD per million output tokens")
    cached_input: float | None = Field(None, ge=0, description="USD per million input tokens read from a prompt "
                                                               "cache (default: input)")
    cache_write: float | None = Field(None, ge=0, description="USD per million input tokens written to Anthropic's "
                                                              "5-minute prompt cache (default: 1.25 x input)")
    cache_write_1h: float | None = Field(None, ge=0, description="USD per million input tokens written to "
                                                                 "Anthropic's 1-hour prompt cache (default: 2 x input)")


class ProbeModel(_Section):
    model: str | None = None
    concurrency: int = Field(4, ge=1, le=MAX_CONCURRENCY)
    modality_subset: str = "modality-100.txt"
    protocol: Literal["default", "paper"] = "default"  # the preset 'probe run' uses without --protocol
    prices: dict[str, PriceModel] = Field(default_factory=dict)  # [probe.prices."KIND:NAME"]: for cost estimates
    base_urls: list[str] = Field(default_factory=list)  # replicas of the openai: model when no --base-url is given


class CheckModel(_Section):
    margin: int = Field(4, ge=0, le=MAX_MARGIN_PX)  # pixels between the edit mask and the keep region
    lpips_backbone: str | None = None  # AlexNet ImageNet weights (.pth); default: torch's hub cache


class ConfigModel(_Section):
    dataset: DatasetModel = DatasetModel()
    workspace: WorkspaceModel = WorkspaceModel()
    edit: EditModel = EditModel()
    probe: ProbeModel = ProbeModel()
    check: CheckModel = CheckModel()


def checked(raw: Any, where: str, then: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``raw`` (a parsed ``cfkit.toml``) validated: its values, and the same as JSON.

    A refusal is one :class:`ConfigError`: ``where``, pydantic's account of the
    problem, then ``then`` (what to do, or what was not done).
    """
    try:
        model = ConfigModel.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {describe_validation(exc, ConfigModel)} {then}") from exc
    return model.model_dump(), model.model_dump(mode="json")
