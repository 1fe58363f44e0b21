"""``cfkit init``: make a workspace."""

from __future__ import annotations

from pathlib import Path

import click

from cfkit.cli.console import out


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--cases", default="data/cases.jsonl", show_default=True, help="ContextCanvas cases file, relative to DIR or absolute.")
@click.option("--images", default="data/images", show_default=True, help="Folder the cases' image paths are relative to.")
@click.option("--pairs", default=36, show_default=True, type=click.IntRange(min=1), help="How many counterfactual pairs the study expects.")
def init(directory: Path, cases: str, images: str, pairs: int) -> None:
    """Make a workspace in DIRECTORY: cfkit.toml plus interventions/, captions/, probes/.

    \b
    Example:
      cfkit init my-study --cases /data/contextcanvas/cases.jsonl --images /data/contextcanvas/images
    """
    from cfkit.workspace import init_workspace

    ws = init_workspace(directory, cases=cases, images=images, pairs=pairs)
    out.print(f"Workspace ready: {ws.config_path}")
    out.print(f"Next: put edit specs in {ws.interventions_dir}/ and run 'cfkit specs list -w {directory}'.")
