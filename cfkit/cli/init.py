"""``cfkit init``: make a workspace."""

from __future__ import annotations

from pathlib import Path

import click

from cfkit.cli import params
from cfkit.cli.console import out, status


@click.command(short_help="Make a workspace and check the dataset it points at.")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--cases", default="data/cases.jsonl", show_default=True, help="ContextCanvas cases file, relative to DIR or absolute (one inside DIR is written relative to it).")
@click.option("--images", default="data/images", show_default=True, help="Folder the cases' image paths are relative to.")
@click.option("--pairs", default=36, show_default=True, type=params.positive(10_000), help="How many counterfactual pairs the study expects.")
@click.option("--no-check", "no_check", is_flag=True,
              help="Make the workspace without checking the dataset (e.g. before the data is copied).")
def init(directory: Path, cases: str, images: str, pairs: int, no_check: bool) -> None:
    """Make a workspace in DIRECTORY (cfkit.toml, interventions/, captions/, probes/).

    The cases file and image folder are checked first, exactly as 'cfkit cases
    validate' does, and the dataset summary is printed. If the dataset cannot be
    read or has problems, init exits 2 and writes nothing. To make the workspace
    before the data is in place, pass --no-check and run 'cfkit cases validate'
    once it is.

    \b
    Examples:
      cfkit init my-study --cases /data/contextcanvas/cases.jsonl --images /data/contextcanvas/images
      cfkit init my-study --no-check        # data/cases.jsonl and data/images to be copied in later
    """
    from cfkit.dataset import check_cases
    from cfkit.cli.cases import render_check
    from cfkit.errors import CaseError
    from cfkit.workspace import plan_workspace, write_workspace

    plan = plan_workspace(directory, cases=cases, images=images, pairs=pairs)
    ws = plan.workspace
    if not no_check:
        if not ws.cases_path.exists():
            raise CaseError(f"--cases: {ws.cases_path} not found; nothing was written. Copy the cases file there, "
                            "fix --cases, or pass --no-check to make the workspace now and check the data later.")
        try:
            check = check_cases(ws.cases_path, ws.image_root)
        except CaseError as exc:
            raise CaseError(f"{exc} Nothing was written; fix --cases, or pass --no-check to make the "
                            "workspace now and check the data later.") from exc
        render_check(check)
        if not check.ok:
            raise CaseError(f"the dataset has problems; nothing was written. Fix them, or pass --no-check to make "
                            f"the workspace now and run 'cfkit cases validate -w {directory}' later.")
    write_workspace(plan)
    if no_check:
        out.print(f"Workspace made (dataset not checked): {ws.config_path}")
        status(f"When {ws.cases_path} and {ws.image_root} are in place, run 'cfkit cases validate -w {directory}'.")
    else:
        out.print(f"Workspace ready: {ws.config_path}")
    out.print(f"Next: put edit specs in {ws.interventions_dir}/ and run 'cfkit specs list -w {directory}'.")
