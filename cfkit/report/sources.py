"""Where a report's predictions come from: files, or stored runs chosen so that nothing is merged silently.

From the store, :func:`choose_runs` takes one run per model and suite: the
runs named with ``--run`` for their model and suite, and by default the newest
run of each model and suite. Rows of one model label must come from one set
of settings (endpoint, generation settings, options, protocol), so a smoke
test (a ``--limit`` or ``--cases`` run) whose settings differ from the
model's full runs is left out, and a model whose full runs differ is refused
alone until ``--run`` says which (or ``--mixed-settings`` reports it anyway);
either way one line says which runs and what differs, and every other model
is reported. Among runs with the same settings the newest run of the whole
suite stands for it (a smoke test only when there is no other). With the
predictions come what the report needs to say why a unit has no answer: the
run it came from and whether that run was complete, what it skipped and why,
what the server said for a failed request, and each pair's selected edit now.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cfkit.errors import NotFoundError, UsageError
from cfkit.plural import plural
from cfkit.predictions import Prediction, predictions_from_store
from cfkit.report.commands import SINGLE, Commands
from cfkit.report.reviewed import partial_run, reviewed_only_run

if TYPE_CHECKING:  # the store's owners load only for a report from the store, not from predictions files
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
    max_tokens: int | None = None  # the run's token limit
    skipped: tuple[tuple[str, str], ...] = ()  # (pair or case, why the run did not ask it)
    imported: str | None = None  # the file a run imported from another harness was read from
    captions: Mapping[str, Mapping[str, str]] | None = None  # modality: case -> condition -> digest of its caption
    #                                                          texts as asked (None: not recorded, older runs)
    unreviewed: tuple[str, ...] = ()  # cases (pairs) asked with a caption (edit) no person had reviewed
    templates_sha256: str = ""  # the probe templates the run was asked with ("": not known, an imported run)
    asked: Mapping[str, str] | None = None  # case -> digest of what the run was shown of it (cfkit.cases.asked_digests;
    #                                         None: not recorded, older runs and peers' files)
    replayed: bool = False  # its replies were read from a file made elsewhere (a replay, an import): cut off there
    left_out: tuple[str, ...] | None = None  # units its selection left out (None: not recorded)
    selection: Mapping[str, Any] | None = None  # how it chose part of the suite (--limit, --cases, --reviewed-only)
    asked_pairs: frozenset[str] | None = None  # the pairs it planned (counterfactual; None: not recorded)

    @classmethod
    def of(cls, record: RunRecord, status: str | None = None) -> "RunInfo":
        """``status``: the run's status as shown (:func:`cfkit.store.leases.statuses`), else the stored one."""
        skipped = tuple((s.get("pair_id", ""), s.get("reason", "")) for s in record.notes.get("skipped") or ()
                        if isinstance(s, dict))
        source = (record.imported or {}).get("from")
        return cls(record.id, record.model, record.suite, status or record.status, record.complete, record.subset,
                   record.n_requests, record.n_done, record.notes.get("stopped"),
                   (record.settings.get("generation") or {}).get("max_tokens"), skipped,
                   str(source) if source else None, record.notes.get("captions"),
                   tuple(record.notes.get("unreviewed") or ()), record.templates_sha256 or "",
                   record.notes.get("asked"), record.replayed,
                   tuple(record.notes["left_out"]) if "left_out" in record.notes else None, record.selection,
                   frozenset(record.notes["asked_pairs"]) if "asked_pairs" in record.notes else None)


@dataclass
class Sources:
    """Predictions and what is known about where they came from."""

    preds: list[Prediction]
    runs: dict[tuple[str, str], RunInfo] = field(default_factory=dict)  # (model, suite) -> its run
    details: dict[UnitKey, str] = field(default_factory=dict)  # why a stored reply has no answer
    selected_edits: dict[str, int | None] | None = None  # pair -> its selected edit now; None without a store
    set_aside: list["SetAside"] = field(default_factory=list)  # runs left out, and models refused, with why
    stale_captions: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (run, case, condition) -> why
    stale_cases: dict[tuple[str, str], str] = field(default_factory=dict)  # (run, case) -> why: the case was changed
    stale_images: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (run, case, condition) -> why
    unreviewed_captions: dict[str, list[str]] = field(default_factory=dict)  # run -> cases whose caption, as asked,
    #                                                                          is still a draft no person reviewed
    reviewed_view: bool = False  # the modality rows count only cases whose captions are reviewed (report --reviewed-only)
    commands: Commands = SINGLE  # the commands its notes recommend: cfkit report's, or a study report's

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
        """Whether an answer may be stale for another reason than its edit (a caption, a case or an image changed
        since)."""
        return bool(self.stale_captions or self.stale_cases or self.stale_images)

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

    def template_notes(self, ws: Workspace) -> list[str]:
        """A note per suite whose runs were asked with other probe templates than those in force now."""
        from cfkit.errors import TemplateError
        from cfkit.prompts import templates_sha256

        try:
            now = templates_sha256(ws)
        except TemplateError:
            now = None
        older: dict[str, list[str]] = {}
        for run in self.runs.values():
            if run.templates_sha256 and run.templates_sha256 != now:
                older.setdefault(run.suite, []).append(run.id)
        return [f"{suite}: {plural(len(ids), 'run')} ({', '.join(ids[:5])}{' …' if len(ids) > 5 else ''}) "
                f"{'was' if len(ids) == 1 else 'were'} asked with other probe templates than "
                f"{'those in force now' if now else 'can be read now'} ({ws.probes_dir / 'templates'}, else cfkit's "
                "defaults): the answers are to the older prompts; run the suite again, or restore the templates "
                "it was asked with." for suite, ids in older.items()]

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
        """Why the answer ``p`` is not about the input as it is now (its case, its image or its caption changed
        since its run, or an edit no longer selected), or None."""
        if (self.stale_cases or self.stale_images) and (run := self.runs.get((p.model, p.suite))) is not None:
            if (why := self.stale_cases.get((run.id, p.case))
                    or self.stale_images.get((run.id, p.case, p.condition))) is not None:
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


def setting_values(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A run's recorded settings (:func:`cfkit.probe.identity.run_settings`) as one flat mapping of the names a
    line shows them by: ``endpoint``, ``protocol``, each generation setting, ``option NAME``."""
    values = {"endpoint": settings.get("endpoint"), "protocol": settings.get("protocol") or "default"}
    values.update({k: v for k, v in (settings.get("generation") or {}).items()})
    values.update({f"option {k}": v for k, v in (settings.get("identity") or {}).items()})
    return values


def _differences(records: Sequence[RunRecord]) -> list[str]:
    """Per run, the settings in which it differs from the others (what the refusal shows)."""
    def flat(record: RunRecord) -> dict[str, Any]:
        if record.settings_sha256 is None:
            return {"settings": "not recorded (a run from before cfkit recorded them)"}
        return setting_values(record.settings)

    flats = [flat(r) for r in records]
    keys = sorted({k for f in flats for k in f})
    differing = [k for k in keys if len({repr(f.get(k)) for f in flats}) > 1]
    return [f"{r.id} ({', '.join(f'{k} {f.get(k)}' for k in differing)})" for r, f in zip(records, flats)]


@dataclass(frozen=True)
class SetAside:
    """Runs of one model that the report leaves out, and why, in one line."""

    model: str
    runs: tuple[str, ...]
    refused: bool  # True: the model has no row at all (its full runs differ); False: only these runs are left out
    message: str
    empty: bool = False  # the run has no reply yet: nothing of it to report
    why: str = ""  # the reason in a few words, where a page marks the left-out runs' answers (``cfkit view``)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "runs": list(self.runs), "refused": self.refused, "message": self.message}


def _per_suite(records: Sequence[RunRecord], pinned: Mapping[str, RunRecord] | None = None,
               reviewed_only: bool = False) -> list[RunRecord]:
    """One run per suite: the pinned one, else the newest run of the whole suite, else (``reviewed_only``) the
    newest modality ``--reviewed-only`` run, else the newest run. A full run comes before a ``--reviewed-only``
    one even in that view: it answered every case the view counts, also those whose captions were reviewed since."""
    chosen = dict(pinned or {})
    for suite in dict.fromkeys(r.suite for r in records):
        if suite not in chosen:
            of_suite = [r for r in records if r.suite == suite]
            chosen[suite] = next((r for r in of_suite if not r.subset),
                                 next((r for r in of_suite if not partial_run(r, reviewed_only)), of_suite[0]))
    return list(chosen.values())


def _newer_reviewed_runs(records: Sequence[RunRecord], chosen: Sequence[RunRecord]) -> list[SetAside]:
    """A line for a model whose newest modality run is a ``--reviewed-only`` run the report does not read (it
    reads an older run of the whole suite): what shows it."""
    modality = next((r for r in chosen if r.suite == "modality"), None)
    newer = next((r for r in records if r.suite == "modality"), None)
    if modality is None or newer is None or newer is modality or not reviewed_only_run(newer):
        return []
    return [SetAside(newer.model, (newer.id,), False, (
        f"{newer.model}: its newest modality run {newer.id} asked only the cases whose captions a person wrote or "
        f"reviewed (--reviewed-only); the rows read its run of the whole suite, {modality.id}, which answered those "
        "cases too: 'cfkit report --reviewed-only' reports them alone."),
        why="a --reviewed-only run, read by 'cfkit report --reviewed-only'")]


def _newest_of_each_settings(records: Sequence[RunRecord]) -> list[RunRecord]:
    newest: dict[str | None, RunRecord] = {}
    for r in records:
        newest.setdefault(r.settings_sha256, r)
    return list(newest.values())


def choose_runs(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
                reviewed_only: bool = False) -> tuple[list[RunRecord], list[SetAside]]:
    """The runs a report reads, one per model and suite, and the runs it leaves out with why.

    Per model: the runs named in ``refs`` stand for their suites (two of one
    model and suite are refused), its other suites take runs with the same
    settings; a model none names takes, by default, the newest run of each
    suite when all its runs share their settings. When they do not, a subset
    run (``--limit``, ``--cases``: a smoke test) whose settings differ from the
    model's full runs is left out with a line; a model whose full runs differ
    is refused alone (or, with ``mixed``, reported from the newest run of each
    suite, with a line). Other models are never dropped, unless
    ``only_named``: then the runs named in ``refs`` are all there is (a
    study's report). With ``reviewed_only`` a modality run made with
    ``--reviewed-only`` stands for the suite where the model has no run of the
    whole suite; without it, a line names such a run where it is newer than
    the run read.
    """
    from cfkit.store import runs

    pinned: dict[tuple[str, str], RunRecord] = {}
    for record in (runs.find_run(store, ref) for ref in refs):
        key = (record.model, record.suite)
        if key in pinned and pinned[key].id != record.id:
            raise UsageError(f"--run {pinned[key].id} and --run {record.id} are both {record.model} on the "
                             f"{record.suite} suite; a report shows one run per model and suite. Keep one.")
        pinned[key] = record
    if only_named and pinned:
        return list(pinned.values()), []
    # The run used last first: a run resumed after a newer one stands for its settings again.
    every = sorted(runs.list_runs(store), key=lambda r: r.last_active, reverse=True)
    by_model: dict[str, list[RunRecord]] = {}
    for record in every:
        by_model.setdefault(record.model, []).append(record)
    chosen: list[RunRecord] = []
    aside: list[SetAside] = []
    for model, records in by_model.items():
        pins = {suite: r for (m, suite), r in pinned.items() if m == model}
        if pins:
            same = {r.settings_sha256 for r in pins.values()}
            picked = _per_suite([r for r in records if r.settings_sha256 in same], pins)
            chosen += picked
            left = [r for r in records if r.suite not in {p.suite for p in picked}]
            if left:
                shown = _newest_of_each_settings(left)
                aside.append(SetAside(model, tuple(r.id for r in shown), False, (
                    f"{model}: left out its {', '.join(dict.fromkeys(r.suite for r in left))} run(s), whose settings "
                    f"differ from the --run one(s): {'; '.join(_differences([*pins.values(), *shown]))}. Name one "
                    "with --run to report it."), why="settings other than the --run run(s)"))
            continue
        if len({r.settings_sha256 for r in records}) == 1:
            chosen += (picked := _per_suite(records, reviewed_only=reviewed_only))
            aside += [] if reviewed_only else _newer_reviewed_runs(records, picked)
            continue
        full = [r for r in records if not partial_run(r, reviewed_only)]
        if full and len({r.settings_sha256 for r in full}) == 1:
            keep = full[0].settings_sha256
            chosen += _per_suite([r for r in records if r.settings_sha256 == keep], reviewed_only=reviewed_only)
            left = _newest_of_each_settings([r for r in records if r.settings_sha256 != keep])
            aside.append(SetAside(model, tuple(r.id for r in left), False, (
                f"{model}: left out smoke-test run(s) of part of a suite whose settings differ from its full runs: "
                f"{'; '.join(_differences([full[0], *left]))}. Report one with --run RUN, or remove it with "
                "'cfkit runs rm RUN'."), why="a smoke test with other settings than the full runs"))
            continue
        listing = "; ".join(_differences(_newest_of_each_settings(records)))
        if mixed:
            picked = _per_suite(records)
            chosen += picked
            aside.append(SetAside(model, tuple(r.id for r in picked), False, (
                f"{model}: its rows mix runs of different settings (--mixed-settings): {listing}."),
                why="runs of different settings, reported anyway (--mixed-settings)"))
            continue
        aside.append(SetAside(model, tuple(r.id for r in _newest_of_each_settings(records)), True, (
            f"model {model} has runs with different settings in {store.path}: {listing}. A report shows one set "
            f"of settings per model, so it leaves this model out. Choose with --run RUN (repeatable; 'cfkit runs "
            f"list' shows them), report it anyway with --mixed-settings, or remove the runs you do not want with "
            f"'cfkit runs rm RUN'."), why="runs of different settings"))
    return chosen, aside


def from_store(store: Store, refs: Sequence[str] = (), *, mixed: bool = False, only_named: bool = False,
               reviewed_only: bool = False) -> Sources:
    """The predictions of the chosen runs, with their run records, failure details, the selected edits and the
    runs set aside (:func:`choose_runs`)."""
    from cfkit.store import runs

    from cfkit.store.leases import statuses

    chosen, aside = choose_runs(store, refs, mixed=mixed, only_named=only_named, reviewed_only=reviewed_only)
    shown = statuses(store, chosen)  # a run marked running whose process is gone is said to be interrupted
    if not chosen and aside:  # every model refused: nothing to show
        raise UsageError(" ".join(a.message for a in aside))
    if not chosen:
        raise NotFoundError(f"no stored runs in {store.path}. Run 'cfkit probe run' first, or pass --predictions FILE.")
    answered = runs.with_replies(store, [r.id for r in chosen])
    for record in (r for r in chosen if r.id not in answered):  # nothing to count: said, and left out
        aside.append(SetAside(record.model, (record.id,), False, (
            f"{record.model}: its {record.suite} run {record.id} has no reply yet ({shown[record.id]}"
            + (f": {record.notes['stopped']}" if record.notes.get("stopped") else "")
            + "); the report leaves it out until it has one."), empty=True, why="no reply yet"))
    chosen = [r for r in chosen if r.id in answered]
    sources = Sources(preds=predictions_from_store(store, [r.id for r in chosen]), set_aside=aside)
    for record in chosen:
        sources.runs[(record.model, record.suite)] = RunInfo.of(record, shown[record.id])
        for reply in runs.unanswered(store, record.id):
            if reply.detail:
                key = (record.model, record.suite, reply.case_id, reply.pair_id, reply.condition)
                sources.details[key] = reply.detail
    sources.note_selected_edits(store)
    return sources
