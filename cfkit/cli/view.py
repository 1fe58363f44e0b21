"""``cfkit view``: browse a workspace in a web browser, or write the same pages as a static site."""

from __future__ import annotations

from pathlib import Path

import click

from cfkit.cli.console import status, workspace_option
from cfkit.plural import plural


@click.command()
@workspace_option
@click.option("--export", "export_dir", metavar="DIR", default=None, type=click.Path(file_okay=False),
              help="Write every page into DIR as a self-contained static site (no server, no network) and exit.")
@click.option("--force", is_flag=True, help="With --export: write into a folder that is not empty.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. The view is read-only but shows every reply: keep it on loopback.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: a free one).")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; print the address only.")
@click.option("--study", "study_files", metavar="FILE", multiple=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Add a study page: where each run of the study FILE stands (as 'cfkit study status') and its "
                   "report (as 'cfkit study report'). Repeatable.")
def view(ws, export_dir: str | None, force: bool, host: str, port: int, no_browser: bool,
         study_files: tuple[Path, ...]) -> None:
    """Browse the workspace: runs, the report tables, every case with each model's reply, the counterfactual pairs.

    Pages: runs with their settings, cost and whether the report reads them
    (if not, why); the report with the paper's rows and the runs they come from;
    cases filtered (wrong, invalid, truncated, swap-inconsistent) with each
    model's reply, parsed answer, parse rule and reasoning; pairs as original |
    edit | difference with each model's answer before and after; a complete
    audit's results (an audit still being labelled shows only its progress);
    with --study, each study's runs and its report.

    \b
    Examples:
      cfkit view                       # serve on 127.0.0.1 and open the browser
      cfkit view --no-browser --port 8765
      cfkit view --export site/        # the same pages as files; open site/index.html
      cfkit view --study study.toml    # also a page of the study: its runs' states and its report
    """
    from cfkit.errors import MissingExtra, UsageError
    from cfkit.hints import install_hint

    if export_dir is None and force:
        raise UsageError("--force is an option of --export; give --export DIR too.")
    try:
        import jinja2  # noqa: F401
    except ImportError as exc:
        raise MissingExtra(f"cfkit view needs Jinja2, which is not installed here. Run: {install_hint('view')}") from exc
    from cfkit.view.data import ViewData
    from cfkit.view.site import Site, export

    studies = ()
    if study_files:
        from cfkit.study import load_study

        studies = tuple(load_study(f, ws.root) for f in study_files)  # a bad file stops here, nothing written
    if export_dir is not None:
        count = export(Site(ViewData(ws), studies), export_dir, overwrite=force)
        status(f"Wrote {plural(count, 'file')} to {export_dir}; open {export_dir.rstrip('/')}/index.html in a browser.")
        return
    from cfkit.view.server import make_server

    server = make_server(ws, studies, host, port)
    address = f"http://{host}:{server.server_address[1]}/"
    status(f"Serving {ws.root} at {address} (read-only; Ctrl-C to stop).")
    if not no_browser:
        import webbrowser

        webbrowser.open(address)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        status("Stopped.")
    finally:
        server.server_close()
