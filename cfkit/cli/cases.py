"""``cfkit cases``: validate and import the dataset's case records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, error, out, print_json, status, warn
from cfkit.errors import InputRejected
from cfkit.plural import plural

if TYPE_CHECKING:
    from cfkit.dataset import CaseCheck, CaseProblem, DatasetSummary


def render_problems(problems: tuple[CaseProblem, ...] | list[CaseProblem]) -> None:
    """Every problem on stderr: a table on a terminal, otherwise one ``error:`` line each."""
    if not err.is_terminal:
        for problem in problems:
            error(str(problem))
        return
    table = Table(title=f"{plural(len(problems), 'problem')}", title_justify="left", title_style="bold red")
    for name in ("where", "case", "field", "problem and fix"):
        table.add_column(name, overflow="fold")
    for p in problems:
        table.add_row(escape(p.where), escape(p.case_id or ""), escape(p.field or ""), escape(p.message))
    err.print(table)


def summary_rows(summary: DatasetSummary, check: CaseCheck) -> list[tuple[str, str]]:
    """The dataset summary shown by ``cases validate``, ``cases import`` and ``init``, as (label, markup) rows."""
    s = summary
    options = [plural(s.two_option, "two-option case"), plural(s.three_option, "three-option case")]
    if s.more_options:
        options.append(f"{s.more_options} with four or more options")
    rate = "—" if s.gold_yes_rate is None else f"{s.gold_yes_rate:.2f}%"
    if check.images_checked:
        images = f"{s.images_found} of {s.images} found in {escape(str(check.image_root))}"
        if s.images_missing:
            images += f", [red]{s.images_missing} missing[/]"
    else:
        images = f"{s.images} named, not checked (give --images DIR)"
    return [
        ("cases", f"{s.cases} in {escape(str(check.path))}"),
        ("options", ", ".join(options)),
        ("gold Yes", f"{rate} ({s.gold_yes} of {plural(s.binary, 'Yes/No case')})"),
        ("paired images", plural(s.paired_image, "case") + " with two images"),
        ("images", images),
        ("domains", escape(", ".join(f"{d} {n}" for d, n in s.domains)) or "—"),
        ("result", "[green]ok[/]" if check.ok else f"[red]{plural(len(check.problems), 'problem')}[/]"),
    ]


def render_summary(check: CaseCheck) -> None:
    """The summary on stdout: a table on a terminal, otherwise one ``label  value`` line each."""
    rows = summary_rows(check.summary, check)
    if not out.is_terminal:
        for label, value in rows:
            out.print(f"{label:<14} {value}")
        return
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for label, value in rows:
        table.add_row(label, value)
    out.print(table)


def render_check(check: CaseCheck) -> None:
    """Problems on stderr, then the summary on stdout."""
    if check.problems:
        render_problems(check.problems)
    render_summary(check)


@click.group(short_help="Validate or import the dataset's case records.")
def cases() -> None:
    """The dataset's cases: validate cases.jsonl, or import it from CSV, JSON, Parquet or datasets."""


@cases.command(short_help="Check every case in one pass and summarise the dataset.")
@click.option("--cases", "cases_file", type=click.Path(path_type=Path), default=None,
              help="Cases file to check instead of the workspace's [dataset] cases (no workspace needed).")
@click.option("--images", "image_root", type=click.Path(path_type=Path), default=None,
              help="Image folder instead of the workspace's [dataset] images.")
@click.option("--json", "as_json", is_flag=True, help="Print the problems and summary as JSON.")
@click.option("-w", "--workspace", "workspace_dir", metavar="DIR", default=None,
              help="Workspace folder (default: $CFKIT_WORKSPACE, or the nearest folder with cfkit.toml).")
def validate(cases_file: Path | None, image_root: Path | None, as_json: bool, workspace_dir: str | None) -> None:
    """Check every case in one pass and summarise the dataset; exit 2 on any problem.

    Each problem is reported with its file:line, field and fix: JSON, UTF-8,
    schema, duplicate ids, the case id pattern, image paths (relative, inside
    the image root) and image files that are missing, unreadable, cut short
    or over the pixel limit (what a probe run would refuse to send). With
    --cases and no --images, image files are not checked.

    \b
    Examples:
      cfkit cases validate
      cfkit cases validate --cases export/cases.jsonl --images export/images --json
    """
    from cfkit.dataset import check_cases

    if cases_file is None:
        from cfkit.workspace import find_workspace

        root = click.get_current_context().find_root().obj or {}
        ws = find_workspace(workspace_dir or root.get("workspace"))
        cases_file, image_root = ws.cases_path, image_root or ws.image_root
    check = check_cases(cases_file, image_root, images=image_root is not None, keep=False)  # counted, not kept
    if as_json:
        print_json(check.to_dict())
    else:
        render_check(check)
    if not check.ok:
        raise InputRejected("")  # each problem is listed above


@cases.command("import", short_help="Convert CSV, JSON, Parquet, a datasets folder or hf:// dataset to cases.jsonl.")
@click.argument("source", type=click.Path())
@click.option("--to", "target", type=click.Path(path_type=Path), default=None,
              help="The cases.jsonl to write (refused if it exists, unless --force); with -w and no --to, the "
                   "workspace's [dataset] cases.")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=COLUMN",
              help="Fill FIELD from COLUMN (repeatable); FIELD=COL1,COL2 for options or images spread over "
                   "columns; FIELD= leaves a field out; gold_index=COLUMN reads the gold as the option's 0-based "
                   "position (as Hugging Face tables give it). Default mapping: docs/formats.md.")
@click.option("--images", "image_root", type=click.Path(path_type=Path), default=None,
              help="Image root: embedded images are written here (named by case id), image paths must be here; "
                   "with -w and no --to, the workspace's [dataset] images.")
@click.option("--format", "kind", type=click.Choice(["csv", "tsv", "json", "jsonl", "parquet", "datasets"]),
              default=None, help="Source format (default: from the file ending; a folder is a datasets folder).")
@click.option("--split", default=None, help="Split of a datasets folder holding several.")
@click.option("--max-cell", "max_cell", type=click.IntRange(1, 2_000_000_000), default=None, metavar="CHARS",
              help="The most characters one value (a CSV cell, a field) may hold; default 10,000,000.")
@click.option("--force", is_flag=True, help="Replace an existing --to file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-w", "--workspace", "workspace_dir", metavar="DIR", default=None,
              help="Workspace whose [dataset] cases (and images) are written when --to is not given.")
def import_(source: str, target: Path | None, mapping: tuple[str, ...], image_root: Path | None, kind: str | None,
            split: str | None, max_cell: int | None, force: bool, as_json: bool, workspace_dir: str | None) -> None:
    """Convert SOURCE (CSV, JSON, JSON Lines, Parquet or a datasets folder) to a cases file.

    Columns are matched to case fields by name (the supplement's record fields
    and cfkit's own); a field that several columns could fill is refused with
    the candidates. Yes/No options set yes_option. The result is validated
    exactly as 'cfkit cases validate' does; nothing is written when any row
    has a problem. CSV, TSV and JSON Lines are read a row at a time, so a
    table of millions of cases imports in little memory.

    \b
    Examples:
      cfkit cases import release.csv --to data/cases.jsonl --images data/images
      cfkit cases import release.csv -w my-study            # the workspace's [dataset] cases and images
      cfkit cases import hf-export/ --split test --to data/cases.jsonl --images data/images
      cfkit cases import table.parquet --to cases.jsonl --map id=eval_id --map options=opt1,opt2,opt3
      cfkit cases import hf://datasets/OWNER/NAME:test --to data/cases.jsonl --images data/images

    A hub dataset (hf://datasets/OWNER/NAME[:SPLIT]) is loaded by datasets.load_dataset: its cache and offline
    mode (HF_HUB_OFFLINE=1) are respected.
    """
    from cfkit.files import CSV_CELL_LIMIT

    root = click.get_current_context().find_root().obj or {}
    named = workspace_dir or root.get("workspace")
    if target is None:
        if not named:
            raise click.UsageError("give --to FILE (the cases.jsonl to write), or -w DIR to write the workspace's "
                                   "[dataset] cases.")
        from cfkit.workspace import find_workspace

        ws = find_workspace(named)
        target, image_root = ws.cases_path, image_root or ws.image_root
    from cfkit.cases_import import import_cases

    result = import_cases(source if source.startswith("hf://") else Path(source), target, mapping=mapping,
                          image_root=image_root, kind=kind, split=split, force=force,
                          max_cell=max_cell or CSV_CELL_LIMIT)
    if as_json:
        print_json({"source": str(result.source), "format": result.kind, "to": str(result.target),
                    "ok": result.ok, "written": result.check is not None,
                    "mapping": {f: list(cols) for f, cols in result.mapping},
                    "ignored_columns": list(result.ignored_columns),
                    "images_written": [str(p) for p in result.images_written],
                    "images_kept": [str(p) for p in result.images_kept],
                    "problems": [{"line": p.line, "unit": p.unit, "field": p.field, "case": p.case_id,
                                  "message": p.message} for p in result.problems],
                    "more_problems": result.more_problems,
                    "check": None if result.check is None else result.check.to_dict()})
    else:
        if result.check is None:
            if len(result.problems) == 1:
                error(f"{result.problems[0]} Nothing was written.")
            else:
                render_problems(result.problems)
                count = plural(len(result.problems) + result.more_problems, 'problem')
                shown = f" (the first {len(result.problems)} shown)" if result.more_problems else ""
                error(f"{count} in {result.source}{shown}; nothing was written. "
                      "Fix the source, or map columns with --map FIELD=COLUMN.")
        else:
            status(f"Read {result.source} ({result.kind}): " + "; ".join(
                f"{f} <- {', '.join(cols)}" for f, cols in result.mapping))
            if result.ignored_columns:
                warn(f"columns not imported: {', '.join(result.ignored_columns)} (map them with --map FIELD=COLUMN).")
            render_check(result.check)
            written = f"Wrote {plural(result.check.summary.cases, 'case')} to {result.target}"
            if result.images_written or result.images_kept:
                written += (f" and {plural(len(result.images_written), 'image')} under {image_root}"
                            + (f" ({len(result.images_kept)} already there)" if result.images_kept else ""))
            status(written + ".")
            if result.ok:
                images = image_root.resolve() if image_root else "IMAGES"
                status(f"Next: 'cfkit init DIR --cases {result.target.resolve()} --images {images}', "
                       "or point [dataset] in cfkit.toml at it.")
    if not result.ok:
        raise InputRejected("")  # each problem is listed above
