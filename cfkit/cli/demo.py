"""``cfkit demo``: the offline walkthrough on examples/mini."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape

from cfkit.cli.console import err, out


@click.command()
@click.option("--output", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the demo workspace (new or empty; default: a temporary folder).")
def demo(out_dir: Path | None) -> None:
    """Run the whole workflow offline on examples/mini, in about a minute.

    Copies the mini workspace, validates its specs, makes the counterfactual
    edits with the classical engine, checks them (LPIPS is marked unavailable
    when its weights are absent), lints the captions, probes the
    counterfactual and modality suites with the baseline backends, prints the
    report and writes a contact sheet. No network, keys or weights needed.
    """
    from cfkit.demo import NEXT_STEPS, run_demo
    from cfkit.report import ReportView

    started = time.perf_counter()

    def show(step) -> None:
        err.print(f"[green]✓[/] {step.name:<16} {escape(step.detail)} [dim]({step.seconds:.1f} s)[/]")

    result = run_demo(out_dir, on_step=show)
    for note in dict.fromkeys(result.notes):
        err.print(f"[dim]  note: {escape(note)}[/]")
    out.print()
    out.print(ReportView(result.report))
    out.print()
    out.print(f"Workspace: {result.workspace.root}")
    out.print(f"Contact sheet: {result.sheet_html} (and {result.sheet_png.name})")
    out.print(f"Finished in {time.perf_counter() - started:.1f} s.")
    out.print()
    out.print(escape(NEXT_STEPS))
