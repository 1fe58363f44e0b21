"""What predictions are scored against: the cases' gold options, each pair's golds, the modality subset."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cfkit.cases import CaseSet
from cfkit.dataset import load_cases
from cfkit.errors import SpecError
from cfkit.plural import agree, plural
from cfkit.report.commands import SINGLE, Commands
from cfkit.subsets import missing_subset_message, modality_cases, modality_subset_path
from cfkit.workspace import Workspace


@dataclass(frozen=True)
class PairGold:
    pair: str
    case: str
    original: str
    edit: str


@dataclass(frozen=True)
class Gold:
    """What the predictions are scored against."""

    cases: CaseSet
    pairs: dict[str, PairGold]
    modality_cases: list[str] | None  # None when the modality subset cannot be used
    modality_problem: str | None = None  # why not (said only when modality predictions are given)
    unreviewed_left_out: tuple[str, ...] = ()  # subset cases left out of the rows for their unreviewed drafted caption
    #                                            (report --reviewed-only, cfkit.report.reviewed)

    @property
    def pair_cases(self) -> dict[str, str]:
        return {p.pair: p.case for p in self.pairs.values()}

    def outside_modality(self, answers: dict[str, dict[tuple[str, str, str], object]],
                         commands: Commands = SINGLE) -> list[str]:
        """Leave out of ``answers`` (modality answers by model, each by (case, pair, condition)) those about cases
        outside the modality subset, which Table S9 is not over (a run or a file made with ``--all-cases``, or
        before the subset file changed), and return one note a model that had any."""
        subset, unreviewed = set(self.modality_cases or ()), set(self.unreviewed_left_out)
        notes = []
        for model, got in answers.items():
            outside = [key for key in got if key[0] not in subset]
            for key in outside:
                del got[key]
            outside = [key for key in outside if key[0] not in unreviewed]  # said once, for every model
            if outside:
                cases = sorted({key[0] for key in outside})
                notes.append(f"modality: {plural(len(outside), 'answer')} of {model} about {plural(len(cases), 'case')} outside the "
                             f"modality subset (first {cases[0]}) "
                             f"{agree(len(outside), 'are')} left out of its rows, which are over the subset; "
                             f"{commands.all_cases} scores every case.")
        return notes


def load_gold(ws: Workspace, *, subset: str | Path | None = None, all_cases: bool = False,
              pairs_too: bool = True) -> Gold:
    """Cases, pair golds from the specs, and the modality cases (:func:`cfkit.subsets.modality_cases`).
    ``pairs_too`` False: no pair golds, and the specs not read (what marks stale answers needs them only for a
    majority baseline's counterfactual run: :mod:`cfkit.report.standing`)."""
    cases = load_cases(ws.cases_path, ws.image_root)
    pairs: dict[str, PairGold] = {}
    folder = ws.interventions_dir
    if not pairs_too or not (folder.is_dir() and any(folder.glob("*.yaml"))):  # no spec: the specs' reader (and
        # pydantic) not loaded
        return _with_modality(ws, cases, pairs, subset, all_cases)
    from cfkit.specs import load_spec_file, spec_files

    for path in spec_files(ws):
        spec = load_spec_file(path).spec
        if spec.case not in cases:
            raise SpecError(f"{path}: field 'case': '{spec.case}' is not in {cases.path}. Fix the id.")
        case = cases.get(spec.case)
        original, edit = case.option_for_label(spec.labels.original), case.option_for_label(spec.labels.edit)
        if original is None or edit is None:
            raise SpecError(f"{path}: case {case.id} has no yes_option, so its labels cannot be mapped to options; "
                             "counterfactual pairs need a Yes/No case.")
        pairs[spec.id] = PairGold(spec.id, case.id, original, edit)
    return _with_modality(ws, cases, pairs, subset, all_cases)


def _with_modality(ws: Workspace, cases: CaseSet, pairs: dict[str, PairGold], subset: str | Path | None,
                   all_cases: bool) -> Gold:
    modality, problem = None, None
    if subset is None and not all_cases and not modality_subset_path(ws).exists():
        problem = missing_subset_message(ws)
    else:
        modality = modality_cases(ws, cases, subset=subset, all_cases=all_cases)
    return Gold(cases=cases, pairs=pairs, modality_cases=modality, modality_problem=problem)
