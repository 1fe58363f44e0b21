"""``cfkit specs``: list, show, scaffold and validate edit specs."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, warn, workspace_option
from cfkit.errors import InputRejected
from cfkit.plural import plural


@click.group()
def specs() -> None:
    """Edit specs: one YAML file per counterfactual pair in interventions/."""


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


@specs.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@workspace_option
def list_(ws, as_json: bool) -> None:
    """List the specs with mask coverage and edit, check and review status."""
    from cfkit.spec_status import authored_summary, list_spec_rows
    from cfkit.specs import compress_ids

    rows, cases = list_spec_rows(ws)
    summary = authored_summary(ws, [r.id for r in rows if r.problem is None])
    without = [r.id for r in rows if r.problem is None and r.mask in ("missing", "none")]
    unreviewed = [r.id for r in rows if r.mask_derived and r.mask_derived.endswith("not reviewed")]
    no_case = [r for r in rows if r.case_missing]
    unfit = [r for r in rows if r.case_unfit and not r.case_missing]  # there, but 'specs validate' refuses it
    if as_json:
        print_json({
            "specs": [r.__dict__ | {"coverage": None if r.coverage is None else round(100 * r.coverage, 2)} for r in rows],
            "pairs": ws.pairs,
            "summary": summary,
            "without_mask": without,
            "derived_mask_unreviewed": unreviewed,
            "case_missing": [r.id for r in no_case],
            "case_unfit": [r.id for r in unfit],
            "cases_file": None if cases is None else str(cases.path),
        })
        return
    table = Table(title=f"Edit specs in {ws.interventions_dir}", title_justify="left")
    for name, justify in (("id", "left"), ("case", "left"), ("title", "left"), ("mask", "right"),
                          ("edit", "left"), ("check", "left"), ("review", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        if r.problem:
            table.add_row(r.id, "", f"[red]invalid:[/] {escape(r.problem)}", "", "", "", "")
        else:
            case = f"[red]{escape(r.case or '')} ({escape(r.case_unfit)})[/]" if r.case_unfit else escape(r.case or "")
            table.add_row(r.id, case, escape(r.title or ""), _mask_cell(r), _edit_cell(r), r.check, r.review)
    out.print(table)
    out.print(summary)
    if without:
        out.print(f"[yellow]{len(without)} spec{'s' if len(without) != 1 else ''} without a mask:[/] "
                  f"{compress_ids(without)}. Draw interventions/masks/ID.png (white = edit), or derive one from an "
                  f"edit made elsewhere: 'cfkit specs mask {without[0]} --from-edit EDITED.png', or for a folder "
                  "of edits named by spec id: 'cfkit edits import DIR --derive-masks'.")
    if unreviewed:
        out.print(f"[yellow]derived masks not reviewed yet:[/] {compress_ids(unreviewed)}; look at them with "
                  f"'cfkit review {unreviewed[0]}' and accept an edit made with them.")
    # On stderr, so that a listing piped elsewhere still says it: 'specs validate' refuses these specs.
    if no_case:
        named = ", ".join(f"{r.id} (case {r.case})" for r in no_case)
        warn(f"{len(no_case)} spec{'s name' if len(no_case) != 1 else ' names'} a case that is not in "
             f"{cases.path}: {named}. Fix the spec's 'case' field or add the case to the cases file; until then "
             "it cannot be edited or probed ('cfkit specs validate' checks every spec).")
    if unfit:
        named = ", ".join(f"{r.id} (case {r.case}: {r.case_unfit})" for r in unfit)
        warn(f"{len(unfit)} spec{'s' if len(unfit) != 1 else ''} cannot make a counterfactual pair from "
             f"{'their' if len(unfit) != 1 else 'its'} case: {named}. Choose a Yes/No case whose gold is the spec's "
             "'labels.original', or fix the labels; 'cfkit specs validate' refuses it until then.")
    if cases is None and rows:
        warn(f"cases file {ws.cases_path} is missing, so the specs' cases were not checked; set [dataset] in "
             "cfkit.toml.")


def _mask_cell(row) -> str:
    """``5.2%``, ``missing``, ``3.1% derived*``: the mask's coverage and whether a person still has to look at it."""
    if row.mask in ("missing", "none"):
        return "[yellow]missing[/]"
    text = _pct(row.coverage)
    if row.mask_derived:
        text += " derived" + ("[yellow]*[/]" if row.mask_derived.endswith("not reviewed") else "")
    return text


def _edit_cell(row) -> str:
    """``#12 selected (of 3)`` / ``#14 none selected``: which edit the row's check and review belong to."""
    if row.edit_id is None:
        return row.edit
    text = f"#{row.edit_id}" if row.edit == "made" else f"#{row.edit_id} {row.edit}"
    text += " [green]selected[/]" if row.selected else " [yellow]none selected[/]"
    if row.candidates > 1:
        text += f" (of {row.candidates})"
    return text


@specs.command()
@click.argument("spec_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@workspace_option
def show(ws, spec_id: str, as_json: bool) -> None:
    """Show every field of a spec, its case's question and options, and mask coverage.

    \b
    Example:
      cfkit specs show CF18
    """
    from cfkit.masks import mask_coverage_standalone
    from cfkit.specs import load_spec, try_load_cases

    spec_file = load_spec(ws, spec_id)
    spec = spec_file.spec
    cases = try_load_cases(ws)
    coverage = mask_coverage_standalone(ws, spec, cases)
    case = cases.get(spec.case) if cases is not None and spec.case in cases else None
    if as_json:
        print_json({
            "spec": spec.model_dump(mode="json", exclude_none=True),
            "path": str(spec_file.path),
            "sha256": spec_file.sha256,
            "mask_coverage": None if coverage is None else round(100 * coverage, 2),
            "case": None if case is None else {"question": case.question, "options": [{"id": o.id, "text": o.text} for o in case.options],
                                               "gold": case.gold, "images": case.images},
        })
        return
    fields = spec.model_dump(mode="json", exclude_none=True)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for key, value in fields.items():
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items())
        table.add_row(key, escape(str(value)))
    table.add_row("mask coverage", _pct(coverage) + ("" if coverage is not None else " (mask or image not available)"))
    table.add_row("file", str(spec_file.path))
    out.print(table)
    out.print()
    if case is None:
        where = ws.cases_path if cases is None else cases.path
        out.print(f"[yellow]case {escape(spec.case)} is not available[/] (cases file: {escape(str(where))}); "
                  "set \\[dataset] in cfkit.toml to see its question and options.")
        return
    out.print(f"[bold]Case {case.id}[/] ({', '.join(case.images)})")
    out.print(escape(case.question))
    for option in case.options:
        mark = "  ← gold" if option.id == case.gold else ""
        out.print(f"  {option.id}. {escape(option.text)}{mark}")


@specs.command()
@click.option("--id", "spec_id", default=None, help="Pair id, e.g. CF07.")
@click.option("--case", default=None, help="Source case id (its gold answer must be the spec's original label, No).")
@click.option("--title", default=None, help="Short name of the intervention.")
@click.option("--cue", default=None, help="The decisive incompatible cue to replace.")
@click.option("--replacement", default=None, help="What replaces it.")
@click.option("--prompt", default=None, help="Instruction for the image editor (default: built from cue and replacement).")
@click.option("--mask", default=None, help="Mask PNG relative to interventions/ (default: masks/ID.png).")
@click.option("--source", default=None, help="Where the intervention is described.")
@click.option("--from", "from_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Several specs at once: a YAML list of specs, or a CSV with the spec format's fields as columns.")
@click.option("--force", is_flag=True, help="Replace existing spec files of those ids.")
@workspace_option
def new(ws, spec_id: str | None, case: str | None, title: str | None, cue: str | None, replacement: str | None,
        prompt: str | None, mask: str | None, source: str | None, from_file: Path | None, force: bool) -> None:
    """Write new spec files, checked against their cases; existing ones are kept unless --force.

    Each spec's case must exist and be answered No (its labels.original).
    Nothing is written unless every spec is valid.

    \b
    Examples:
      cfkit specs new --id CF07 --case HB120 --title "Winter to summer" \\
        --cue "snow on the roofs" --replacement "green summer foliage"
      cfkit specs new --from pairs.yaml        a YAML list of specs
      cfkit specs new --from pairs.csv         columns id, case, title, cue, replacement, …
    """
    from cfkit.errors import UsageError
    from cfkit.spec_authoring import new_specs, read_spec_rows

    flags = {"--id": spec_id, "--case": case, "--title": title, "--cue": cue, "--replacement": replacement}
    optional = {"--prompt": prompt, "--mask": mask, "--source": source}
    if from_file is not None:
        given = [name for name, value in (flags | optional).items() if value is not None]
        if given:
            raise UsageError(f"--from reads every field from {from_file}; leave out {', '.join(given)}.")
        rows = read_spec_rows(from_file)
    else:
        missing = [name for name, value in flags.items() if value is None]
        if missing:
            raise UsageError(f"specs new needs {', '.join(missing)} (or --from FILE for several specs). "
                             "See 'cfkit specs new --help'.")
        rows = [("specs new", {"id": spec_id, "case": case, "title": title, "cue": cue, "replacement": replacement,
                               "prompt": prompt, "mask": mask, "source": source})]
    written = new_specs(ws, rows, overwrite=force)
    for note in written.notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    for path in written.paths:
        out.print(f"Wrote {escape(str(path))}" + (" (replaced)" if path in written.replaced else ""))
    out.print(_next_step([p.stem for p in written.paths], written.masks_to_draw))


def _next_step(ids: list[str], to_draw: list[str]) -> str:
    """The line after ``specs new``: draw the masks the specs name and lack, else validate and edit."""
    validate = f"'cfkit specs validate{'' if len(ids) > 1 else ' ' + ids[0]}'"
    if to_draw:
        masks = "the masks" if len(to_draw) > 1 else "the mask"
        which = "" if to_draw == ids else f" of {', '.join(to_draw)}"
        return (f"Next: draw {masks}{which} (white = edit) or derive {'them' if len(to_draw) > 1 else 'it'} from "
                f"edited images made elsewhere ('cfkit edits import DIR --derive-masks'), then {validate}.")
    edit = f"'cfkit edit {' '.join(ids)}'" if len(ids) <= 3 else "'cfkit edit --pending'"
    given = "the specs give regions or their masks are" if len(ids) > 1 else "the spec gives regions or its mask is"
    return f"Next: no mask to draw ({given} there): run {validate}, then {edit}."


@specs.command()
@click.argument("spec_id")
@click.option("--from-edit", "from_edit", required=True, metavar="EDIT",
              help="A recorded edit's id (its raw output is compared) or an edited image file.")
@click.option("--threshold", type=params.Decimal(min=0.5, max=100), default=None,
              help="CIE76 ΔE that counts as a change (default: above the image's own noise, at least 6).")
@click.option("--margin", "margin_px", type=params.Integer(min=0, max=512), default=None,
              help="Pixels added around every changed region (default: 0.6% of the shorter side, at least 2).")
@click.option("--force", is_flag=True, help="Replace an existing mask file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@workspace_option
def mask(ws, spec_id: str, from_edit: str, threshold: float | None, margin_px: int | None, force: bool,
         as_json: bool) -> None:
    """Derive SPEC_ID's mask from where an edit changed the source image.

    The mask (white = changed, with a small margin) is written as the spec's
    mask PNG and flagged for review until you accept an edit made with it.
    An existing mask is kept unless --force.

    \b
    Examples:
      cfkit specs mask CF18 --from-edit 12
      cfkit specs mask CF18 --from-edit ~/edits/CF18.png
    """
    from cfkit.mask_derive import derive_spec_mask

    source: int | Path = int(from_edit) if from_edit.isascii() and from_edit.isdigit() else Path(from_edit).expanduser()
    written = derive_spec_mask(ws, spec_id, source, overwrite=force, threshold=threshold, margin_px=margin_px)
    if as_json:
        print_json(written.as_dict())
        return
    m = written.mask
    out.print(f"Wrote {escape(str(written.path))} ({'replaced; ' if written.replaced else ''}derived from "
              f"{escape(written.source)}: {100 * m.coverage:.2f}% of the image, {m.regions} region"
              f"{'s' if m.regions != 1 else ''}, ΔE ≥ {m.threshold:.1f}, margin {m.margin_px} px).")
    # An edit recorded before keeps the earlier mask's region (its check would be refused), so the edited
    # image is made into a new edit with this mask, whichever way it was given.
    edited = written.edited if isinstance(source, int) and written.edited is not None else source
    here = Path.cwd()
    shown = edited.relative_to(here) if isinstance(edited, Path) and edited.is_absolute() and \
        edited.is_relative_to(here) else edited
    nxt = f"cfkit edit {spec_id} --engine file --input {shown}, then 'cfkit review {spec_id}'"
    err.print(f"The mask is flagged for review until you accept an edit made with it. Next: {escape(nxt)}",
              style="dim")


@specs.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@workspace_option
def validate(ws, spec_ids: tuple[str, ...], as_json: bool) -> None:
    """Check specs against their cases, images and masks (all specs by default).

    Exits 2 when any spec has an error; notes and warnings do not fail.
    """
    from cfkit.spec_status import validate_specs

    reports = validate_specs(ws, list(spec_ids))
    if as_json:
        print_json([{"spec": r.spec_id, "ok": r.ok, "coverage": None if r.coverage is None else round(100 * r.coverage, 2),
                     "findings": [{"level": f.level, "message": f.message} for f in r.findings]} for r in reports])
    else:
        for r in reports:
            mark = "[green]ok[/]" if r.ok else "[red]error[/]"
            cov = "" if r.coverage is None else f" (mask {100 * r.coverage:.1f}%)"
            out.print(f"{r.spec_id}: {mark}{cov}")
            for f in r.findings:
                style = {"error": "red", "warning": "yellow", "note": "dim"}[f.level]
                err.print(f"  [{style}]{f.level}:[/] {escape(f.message)}")
        bad = sum(not r.ok for r in reports)
        out.print(f"{len(reports) - bad} of {plural(len(reports), 'spec')} valid.")
    if any(not r.ok for r in reports):
        raise InputRejected("")  # each problem is listed above
