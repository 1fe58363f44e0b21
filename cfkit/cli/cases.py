"""``cfkit cases``: validate and import the dataset's case records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, error, out, print_json

if TYPE_CHECKING:
    from cfkit.cases import CaseCheck, CaseProblem, DatasetSummary


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def render_problems(problems: tuple[CaseProblem, ...] | list[CaseProblem]) -> None:
    """Every problem on stderr: a table on a terminal, otherwise one ``error:`` line each."""
    if not err.is_terminal:
        for problem in problems:
            error(str(problem))
        return
    table = Table(title=f"{_plural(len(problems), 'problem')}", title_justify="left", title_style="bold red")
    for name in ("where", "case", "field", "problem and fix"):
        table.add_column(name, overflow="fold")
    for p in problems:
        table.add_row(escape(p.where), escape(p.case_id or ""), escape(p.field or ""), escape(p.message))
    err.print(table)


def summary_rows(summary: DatasetSummary, check: CaseCheck) -> list[tuple[str, str]]:
    """The dataset summary shown by ``cases validate``, ``cases import`` and ``init``, as (label, markup) rows."""
    s = summary
    options = [_plural(s.two_option, "two-option case"), _plural(s.three_option, "three-option case")]
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
        ("gold Yes", f"{rate} ({s.gold_yes} of {_plural(s.binary, 'Yes/No case')})"),
        ("paired images", _plural(s.paired_image, "case") + " with two images"),
        ("images", images),
        ("domains", escape(", ".join(f"{d} {n}" for d, n in s.domains)) or "—"),
        ("result", "[green]ok[/]" if check.ok else f"[red]{_plural(len(check.problems), 'problem')}[/]"),
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


@click.group(short_help="Validate the dataset's case records.")
def cases() -> None:
    """The dataset's cases: validate cases.jsonl."""


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
    the image root) and image files that are missing. With --cases and no
    --images, image files are not checked.

    \b
    Examples:
      cfkit cases validate
      cfkit cases validate --cases export/cases.jsonl --images export/images --json
    """
    from cfkit.cases import check_cases

    if cases_file is None:
        from cfkit.workspace import find_workspace

        root = click.get_current_context().find_root().obj or {}
        ws = find_workspace(workspace_dir or root.get("workspace"))
        cases_file, image_root = ws.cases_path, image_root or ws.image_root
    check = check_cases(cases_file, image_root, images=image_root is not None)
    if as_json:
        print_json(check.to_dict())
    else:
        render_check(check)
    if not check.ok:
        raise SystemExit(2)
