"""``cfkit specs``: list, show, scaffold and validate edit specs."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, out, print_json, workspace_option


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

    rows, _ = list_spec_rows(ws)
    summary = authored_summary(ws, [r.id for r in rows if r.problem is None])
    if as_json:
        print_json({
            "specs": [r.__dict__ | {"coverage": None if r.coverage is None else round(100 * r.coverage, 2)} for r in rows],
            "pairs": ws.pairs,
            "summary": summary,
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
            table.add_row(r.id, r.case or "", escape(r.title or ""), _pct(r.coverage), _edit_cell(r), r.check, r.review)
    out.print(table)
    out.print(summary)


def _edit_cell(row) -> str:
    """``#12 selected`` / ``#14 (of 3)``: which edit the row's check and review belong to."""
    if row.edit_id is None:
        return row.edit
    text = f"#{row.edit_id}" if row.edit == "made" else f"#{row.edit_id} {row.edit}"
    if row.selected:
        text += " [green]selected[/]"
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
            "case": None if case is None else {"question": case.question, "options": [o.model_dump() for o in case.options],
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
@click.option("--id", "spec_id", required=True, help="Pair id, e.g. CF07.")
@click.option("--case", required=True, help="Source case id (its gold answer should be No).")
@click.option("--title", required=True, help="Short name of the intervention.")
@click.option("--cue", required=True, help="The decisive incompatible cue to replace.")
@click.option("--replacement", required=True, help="What replaces it.")
@click.option("--prompt", default=None, help="Instruction for the image editor (default: built from cue and replacement).")
@click.option("--mask", default=None, help="Mask PNG relative to interventions/ (default: masks/ID.png).")
@click.option("--source", default=None, help="Where the intervention is described.")
@click.option("--force", is_flag=True, help="Replace an existing spec file of that id.")
@workspace_option
def new(ws, spec_id: str, case: str, title: str, cue: str, replacement: str, prompt: str | None,
        mask: str | None, source: str | None, force: bool) -> None:
    """Scaffold a new spec file; an existing one is kept unless --force.

    \b
    Example:
      cfkit specs new --id CF07 --case HB120 --title "Winter to summer" \\
        --cue "snow on the roofs" --replacement "green summer foliage"
    """
    from cfkit.specs import create_spec

    path = create_spec(ws, spec_id=spec_id, case=case, title=title, cue=cue, replacement=replacement,
                       prompt=prompt, mask=mask, source=source, overwrite=force)
    out.print(f"Wrote {path}")
    out.print(f"Next: draw the mask (white = edit) and run 'cfkit specs validate {spec_id}'.")


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
        print_json([{"spec": r.spec_id, "ok": r.ok, "coverage": r.coverage,
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
        out.print(f"{len(reports) - bad} of {len(reports)} specs valid.")
    if any(not r.ok for r in reports):
        raise SystemExit(2)
