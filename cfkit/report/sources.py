"""Where a report's predictions come from: files, or stored runs chosen so that nothing is merged silently.

From the store, :func:`cfkit.report.choice.choose` takes one run per model
and suite and says which runs it leaves out and why (the rule is that
module's). With the predictions come what the report needs to say why a unit
has no answer: the run it came from and whether that run was complete, what
it skipped and why, what the server said for a failed request, and each
pair's selected edit now; and, per run read, how many other runs of its model
and suite are not read.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.plural import plural
from cfkit.predictions import Prediction, predictions_from_store
from cfkit.report.choice import SetAside, read_runs
from cfkit.report.commands import SINGLE, Commands, made_by

if TYPE_CHECKING:  # the store's owners load only for a report from the store, not from predictions files
    from pathlib import Path

    from cfkit.cases import CaseSet
    from cfkit.store import Store
    from cfkit.store.runs import RunRecord
    from cfkit.workspace import Workspace

#: A unit of a model's answers: (model, suite, case, pair or '', condition).
UnitKey = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class RunInfo:
    """What the report says about a run its rows come from."""

    id: str
    model: str
    suite: str
    status: str
    complete: bool
    subset: bool
    n_requests: int
    n_done: int
    stopped: str | None
    max_tokens: int | None = None  # the token limit its replies were made with (RunRecord.made_with_max_tokens)
    skipped: tuple[tuple[str, str], ...] = ()  # (pair or case, why the run did not ask it)
    imported: str | None = None  # the file a run imported from another harness was read from
    captions: Mapping[str, Mapping[str, str]] | None = None  # modality: case -> condition -> digest of its caption
    #                                                          texts as asked (None: not recorded, older runs)
    unreviewed: tuple[str, ...] = ()  # cases (pairs) asked with a caption (edit) no person had reviewed
    templates_sha256: str = ""  # one digest over all the probe templates when the run asked ("": not known)
    asked: Mapping[str, str] | None = None  # case -> digest of what the run was shown of it (cfkit.cases.asked_digests;
    #                                         None: not recorded, older runs and peers' files)
    replayed: bool = False  # its replies were read from a file made elsewhere (a replay, an import): cut off there
    left_out: tuple[str, ...] | None = None  # units its selection left out (None: not recorded)
    selection: Mapping[str, Any] | None = None  # how it chose part of the suite (--limit, --cases, --reviewed-only)
    asked_pairs: frozenset[str] | None = None  # the pairs it planned (counterfactual; None: not recorded)
    templates: Mapping[str, str] | None = None  # each probe template its requests were rendered from -> its digest
    #                                             (cfkit.report.prompts_now; None: not recorded, older runs)
    asked_whole: bool = False  # imported, and its export had a row for every unit it planned (of the whole suite):
    #                            ``asked`` (``asked_pairs``) name all it planned, as a stored run's do
    study: Path | None = None  # the study file of the 'cfkit study run' that sent it last (None: 'cfkit probe run')

    @classmethod
    def of(cls, record: RunRecord, status: str | None = None) -> "RunInfo":
        """``status``: the run's status as shown (:func:`cfkit.store.leases.statuses`), else the stored one."""
        skipped = tuple((s.get("pair_id", ""), s.get("reason", "")) for s in record.notes.get("skipped") or ()
                        if isinstance(s, dict))
        source = (record.imported or {}).get("from")
        return cls(record.id, record.model, record.suite, status or record.status, record.complete, record.subset,
                   record.n_requests, record.n_done, record.notes.get("stopped"),
                   record.made_with_max_tokens, skipped,
                   str(source) if source else None, record.notes.get("captions"),
                   tuple(record.notes.get("unreviewed") or ()), record.templates_sha256 or "",
                   record.notes.get("asked"), record.replayed,
                   tuple(record.notes["left_out"]) if "left_out" in record.notes else None, record.selection,
                   frozenset(record.notes["asked_pairs"]) if "asked_pairs" in record.notes else None,
                   record.notes.get("templates"), record.notes.get("asked_whole") is True,
                   made_by(record).study)


@dataclass
class Sources:
    """Predictions and what is known about where they came from."""

    preds: list[Prediction]
    runs: dict[tuple[str, str], RunInfo] = field(default_factory=dict)  # (model, suite) -> its run
    details: dict[UnitKey, str] = field(default_factory=dict)  # why a stored reply has no answer
    selected_edits: dict[str, int | None] | None = None  # pair -> its selected edit now; None without a store
    set_aside: list[SetAside] = field(default_factory=list)  # runs left out, and models refused, with why
    others: dict[str, tuple[int, int]] = field(default_factory=dict)  # run read -> (newer, older) runs of its model
    #                                                                   and suite not read
    stale_captions: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (run, case, condition) -> why
    stale_cases: dict[tuple[str, str], str] = field(default_factory=dict)  # (run, case) -> why: the case was changed
    stale_images: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (run, case, condition) -> why
    stale_prompts: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (run, case, condition) -> why:
    #                                                   a probe template of its prompt changed (report.prompts_now)
    unreviewed_captions: dict[str, list[str]] = field(default_factory=dict)  # run -> cases whose caption, as asked,
    #                                                                          is still a draft no person reviewed
    reviewed_view: bool = False  # the modality rows count only cases whose captions are reviewed (report --reviewed-only)
    commands: Commands = SINGLE  # the commands its notes recommend: cfkit report's, or a study report's
    workspace: Path | None = None  # the workspace's folder, as a study's commands name it

    def raise_limit(self, run: RunInfo | None) -> str:
        """What raises ``run``'s token limit and asks it again: the study report's commands under ``cfkit study
        report``; else the commands that made the run (a study's file and ``cfkit study run`` for a run a study
        sent, as ``runs show`` and the view say it: :func:`cfkit.report.commands.made_by`), else probe run's."""
        if self.commands.study is None and run is not None and run.study:
            return Commands(run.study, self.workspace).raise_limit
        return self.commands.raise_limit

    def note_selected_edits(self, store: Store) -> None:
        """Each pair's selected edit now, for the pairs the predictions answer (an answer about another is stale)."""
        from cfkit.store import edits

        self.selected_edits = {pair: None if (e := edits.selected(store, pair)) is None else e.id
                               for pair in {p.pair for p in self.preds if p.pair}}

    def note_captions(self, ws: Workspace) -> None:
        """Compare each modality run's captions as asked with the caption files now.

        A caption condition whose texts changed since the run (or whose file is
        gone or unreadable) is stale; a case whose caption, unchanged, is still
        a model's draft no person reviewed is listed in ``unreviewed_captions``.
        Runs that recorded no captions (made before cfkit recorded them) are
        compared only for drafts they recorded as unreviewed.
        """
        from cfkit.caption_digests import CAPTION_CONDITIONS, CaptionNow, caption_now

        read: dict[str, CaptionNow] = {}  # each file read once, however many models' runs asked its case
        for run in (r for r in self.runs.values() if r.suite == "modality"):
            for case, then in (run.captions or dict.fromkeys(run.unreviewed)).items():
                name = f"{ws.config.workspace.captions}/{case}.yaml"
                if (now := read.get(case)) is None:
                    now = read[case] = caption_now(ws.captions_dir / f"{case}.yaml")
                changed = [c for c in CAPTION_CONDITIONS if then and (now.digests or {}).get(c) != then.get(c)]
                for condition in changed:
                    self.stale_captions[(run.id, case, condition)] = "answered an older caption: " + (
                        f"{name} {now.problem}; fix it and run the modality suite again" if now.problem else
                        f"{name} has another {condition} text than when run {run.id} asked it; run the modality "
                        "suite again (unchanged requests come from the cache)")
                if now.unreviewed_draft and not changed:
                    self.unreviewed_captions.setdefault(run.id, []).append(case)

    def note_cases(self, cases: CaseSet) -> None:
        """Compare what each run was shown of each case (its question, options and image names) with the cases
        file now: every answer a run gave about a case changed since is stale (``stale_cases``). Runs that
        recorded nothing (made before cfkit recorded it, or imported from a peer's file) are not compared."""
        from cfkit.cases import asked_digests

        asked = [run for run in self.runs.values() if run.asked]
        wanted = {case_id for run in asked for case_id in run.asked if case_id in cases}  # a case no longer in
        now = asked_digests(cases.get(case_id) for case_id in wanted)  # the file is said where its answers are read
        for run in asked:
            for case_id, then in run.asked.items():
                if case_id in now and now[case_id] != then:
                    self.stale_cases[(run.id, case_id)] = (
                        f"answered an earlier version of case {case_id}: its question, options or images in "
                        f"{cases.path} have changed since run {run.id} asked it; run the {run.suite} suite again "
                        "(unchanged requests come from the cache)")

    def note_images(self, store: Store, cases: CaseSet) -> None:
        """Compare the image each stored reply records (its SHA-256) with the case's image file now: an answer about
        an earlier file is stale (``stale_images``). One look at the replies' distinct digests, one ``stat`` per
        image (a file is read only where the digest table no longer holds it)."""
        from cfkit.store import digests, runs

        run_ids = [r.id for r in self.runs.values()]
        self.note_recorded_images(cases, runs.image_digests(store, run_ids),
                                  lambda paths: digests.sha256_now(store, paths),
                                  lambda changed: runs.image_replies(store, run_ids, changed))

    def note_recorded_images(self, cases: CaseSet, recorded: Iterable[tuple[str, str]],
                             sha256_now: Callable[[list[str]], Mapping[str, str | None]],
                             replies_of: Callable[[list[str]], Iterable[tuple[str, str, str, str]]]) -> None:
        """Images asked about, against the cases' image files now: ``recorded``, the distinct (case, image
        SHA-256) the replies record; ``sha256_now``, each path's digest now; ``replies_of``, the (run, case,
        condition, SHA-256) of the replies about the cases given (those whose image changed)."""
        recorded = list(recorded)
        paths, root = {}, cases.image_root
        for case_id in {case for case, _ in recorded if case in cases}:
            shown = cases.get(case_id).images
            if len(shown) == 1:  # two images are sent as one sheet, whose digest is not a file's
                paths[case_id] = str(root / shown[0])
        now = sha256_now(list(paths.values())) if paths else {}
        changed = sorted({case for case, digest in recorded if case in paths and now[paths[case]] != digest})
        for run_id, case_id, condition, digest in replies_of(changed) if changed else ():
            if now[paths[case_id]] != digest:
                self.stale_images[(run_id, case_id, condition)] = (
                    f"answered an earlier file of case {case_id}'s image: {paths[case_id]} "
                    + ("cannot be read now" if now[paths[case_id]] is None else "has changed")
                    + f" since run {run_id} asked it (sha256 {digest[:12]}… then); run the suite again")

    @property
    def any_stale(self) -> bool:
        """Whether an answer may be stale for another reason than its edit (a caption, a case, an image or a
        probe template changed since)."""
        return bool(self.stale_captions or self.stale_cases or self.stale_images or self.stale_prompts)

    def unreviewed_of(self, model: str) -> frozenset[str]:
        """The cases whose caption, as the model's modality run asked it, is still a draft no person has reviewed."""
        run = self.runs.get((model, "modality"))
        return frozenset(self.unreviewed_captions.get(run.id, ())) if run is not None else frozenset()

    def caption_notes(self, counted: Iterable[str] | None = None) -> list[str]:
        """A note per modality run that asked cases with a caption that is still an unreviewed draft, among the
        ``counted`` cases (the modality rows' cases; None: every case)."""
        notes, counted = [], None if counted is None else set(counted)
        for (model, _), run in self.runs.items():
            if cases := [c for c in self.unreviewed_captions.get(run.id, ()) if counted is None or c in counted]:
                shown = ", ".join(cases[:10]) + (f" and {len(cases) - 10} more" if len(cases) > 10 else "")
                notes.append(f"modality: {model} was asked {plural(len(cases), 'case')} with a caption a model "
                             f"drafted and no person has reviewed ({shown}); read each and set 'reviewed: true' (its "
                             "answers stand while its text is unchanged), or leave those cases out of the rows with "
                             f"{self.commands.reviewed_only}.")
        return notes

    def server_notes(self) -> list[str]:
        """A note per model whose replies came from servers that named different models, one per model whose
        replies came from several server builds, and one per model whose every reply named one model plainly not
        the one asked (:mod:`cfkit.servers`): each reply records what its server said."""
        from cfkit.servers import asked_name, servers_of

        by_model: dict[str, dict[tuple, int]] = {}
        for p in self.preds:
            if p.server_model or p.system_fingerprint:
                seen = by_model.setdefault(p.model, {})
                key = (p.server_model, p.system_fingerprint, p.endpoint)
                seen[key] = seen.get(key, 0) + 1
        notes = []
        for model, seen in by_model.items():
            runs = [r for (m, _), r in self.runs.items() if m == model]
            asked = asked_name(model, not runs or any(r.replayed for r in runs))  # a label may not be what was asked
            notes += servers_of((*k, n) for k, n in seen.items()).lines(model, runs[0].id if len(runs) == 1 else None,
                                                                         asked)
        return notes

    def stale(self, p: Prediction) -> str | None:
        """Why the answer ``p`` is not about the input as it is now (its case, its image, its caption or a
        template of its prompt changed since its run, or an edit no longer selected), or None."""
        if (self.stale_cases or self.stale_images or self.stale_prompts) \
                and (run := self.runs.get((p.model, p.suite))) is not None:
            if (why := self.stale_cases.get((run.id, p.case))
                    or self.stale_images.get((run.id, p.case, p.condition))
                    or self.stale_prompts.get((run.id, p.case, p.condition))) is not None:
                return why
        if self.stale_captions and p.suite == "modality" and (run := self.runs.get((p.model, p.suite))) is not None:
            if (why := self.stale_captions.get((run.id, p.case, p.condition))) is not None:
                return why
        selected = self.selected_edits
        if p.edit_id is None or selected is None or p.pair not in selected or selected[p.pair] == p.edit_id:
            return None
        now = selected[p.pair]
        return (f"answered about edit #{p.edit_id}; the pair's selected edit is now "
                + (f"#{now}" if now is not None else "none") + " (run the counterfactual suite again)")


def from_store(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
               reviewed_only: bool = False) -> Sources:
    """The predictions of the chosen runs, with their run records, failure details and the runs set aside
    (:func:`cfkit.report.choice.read_runs`); what is stale among them, :mod:`cfkit.report.standing` tells."""
    from cfkit.store import runs

    made, shown = read_runs(store, refs, mixed=mixed, only_named=only_named, reviewed_only=reviewed_only)
    chosen, aside = made.runs, made.set_aside
    if not chosen and not made.unanswered and aside:  # every model refused: nothing to show
        raise UsageError(" ".join(a.message for a in aside))
    if not chosen and not made.unanswered:
        raise NotFoundError(f"no stored runs in {store.path}. Run 'cfkit probe run' first, or pass --predictions FILE.")
    sources = Sources(preds=predictions_from_store(store, [r.id for r in chosen]), set_aside=aside,
                      others=made.others)
    for record in chosen:
        sources.runs[(record.model, record.suite)] = RunInfo.of(record, shown[record.id])
        for reply in runs.unanswered(store, record.id):
            if reply.detail:
                key = (record.model, record.suite, reply.case_id, reply.pair_id, reply.condition)
                sources.details[key] = reply.detail
    return sources
