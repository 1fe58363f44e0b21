"""``cfkit check``: non-target preservation checks of edits."""

from __future__ import annotations

from pathlib import Path

import click
from rich import box
from rich.markup import escape
from rich.table import Table

from cfkit.cli import params
from cfkit.cli.console import err, out, print_json, status, warn, workspace_option
from cfkit.errors import ImageError, InputRejected, NotFoundError, SpecError, UsageError
from cfkit.plural import agree, plural


def _num(value: float | None, fmt: str, none: str = "—") -> str:
    return none if value is None else format(value, fmt)


@click.command()
@click.argument("spec_ids", nargs=-1)
@click.option("--all", "all_specs", is_flag=True, help="Check the newest edit of every spec that has one.")
@click.option("--edit", "edit_id", type=params.positive(), default=None, help="Check this edit id instead of a spec's newest.")
@click.option("--lpips-weights", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="torchvision's alexnet-owt-7be5be79.pth (default: $CFKIT_LPIPS_BACKBONE, "
                   "[check] lpips_backbone, or torch's hub cache).")
@click.option("--json", "as_json", is_flag=True, help="Print the stored results as JSON.")
@workspace_option
def check(ws, spec_ids: tuple[str, ...], all_specs: bool, edit_id: int | None, lpips_weights: Path | None,
          as_json: bool) -> None:
    """Measure how well edits keep everything outside their masks.

    SSIM, PSNR/MSE and LPIPS over the keep region, the change inside the mask,
    and leaks; the verdict and its reasons are stored. Exits 1 when an edit's
    composite (or its only output) fails, 2 when an edit cannot be checked (its
    source image or its spec's mask changed since it was made: the others are
    still checked).

    \b
    Examples:
      cfkit check CF18
      cfkit check --all --lpips-weights ~/weights/alexnet-owt-7be5be79.pth
    """
    from cfkit.errors import CheckFailed
    from cfkit.edit_files import check_edit, check_spec
    from cfkit.specs import try_load_cases
    from cfkit.store import Store, edits

    if sum([bool(spec_ids), all_specs, edit_id is not None]) != 1:
        raise UsageError("give spec ids, --all or --edit ID (exactly one of them). Example: 'cfkit check CF18'.")
    with Store(ws.db_path) as store:
        if edit_id is not None:
            groups = [check_edit(ws, store, edit_id, lpips_weights=lpips_weights)]
        else:
            ids = edits.specs_with_edits(store) if all_specs else list(spec_ids)
            if not ids:
                raise NotFoundError(f"no spec in {ws.root} has an edit yet; make one with 'cfkit edit CF01'.")
            cases = try_load_cases(ws)  # read once for every spec
            groups, unchecked = [], []
            for spec_id in ids:
                try:
                    groups.append(check_spec(ws, store, spec_id, lpips_weights=lpips_weights, cases=cases))
                except (ImageError, SpecError) as exc:  # one spec's stale edit does not stop the others' checks
                    if len(ids) == 1:
                        raise
                    unchecked.append((spec_id, exc))
    results = [r for group in groups for r in group]
    note = results[0].metrics.get("lpips_note") if results else None
    if note:
        (warn if note.startswith("LPIPS unavailable") else status)(note)
    if as_json:
        print_json([r.to_dict() for r in results])
    else:
        _render(results)
    failed = [g[-1].spec_id for g in groups if _decisive(g).verdict != "pass"]
    if edit_id is None and unchecked:
        for _, exc in unchecked:
            err.print(f"[red]error:[/] {escape(str(exc))}")
        raise InputRejected(f"{len(unchecked)} of {plural(len(ids), 'spec')} not checked "
                            f"({', '.join(spec_id for spec_id, _ in unchecked)}), see above"
                            + (f"; {len(failed)} failed the preservation check ({', '.join(failed)})." if failed
                               else "."))
    if failed:
        raise CheckFailed(f"{len(failed)} of {plural(len(groups), 'edit')} failed the preservation check "
                          f"({', '.join(failed)}); see the reasons above, then re-edit or review "
                          f"{agree(len(failed), 'them')}.")


def _decisive(group):
    """The composite's result when there is one, else the only output's."""
    by_variant = {r.variant: r for r in group}
    return by_variant.get("composite") or group[-1]


def _render(results) -> None:
    table = Table(title="Preservation checks", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    for name in ("spec", "edit", "output", "SSIM", "PSNR", "LPIPS", "LPIPS in", "Δ in", "leaks", "verdict"):
        table.add_column(name, justify="left" if name in ("spec", "output", "verdict") else "right")
    for r in results:
        m = r.metrics
        psnr = "∞" if m["psnr_out"] is None and m["mse_out"] == 0 else _num(m["psnr_out"], ".1f")
        colour = "green" if r.verdict == "pass" else "red"
        table.add_row(r.spec_id, str(r.edit_id), r.variant, _num(m["ssim_out"], ".4f"), psnr,
                      _num(m["lpips_out"], ".3f", "n/a"), _num(m["lpips_in"], ".3f", "n/a"),
                      _num(m["mad_in"], ".3f"), f"{100 * m['leak_share']:.2f}%",
                      f"[{colour}]{r.verdict}{'' if r.lpips_measured else '*'}[/]")
    if not all(r.lpips_measured for r in results):
        table.caption = "* verdict decided without LPIPS (LPIPS unavailable)"
        table.caption_justify = "left"
    out.print(table)
    for r in results:
        for reason in r.reasons:
            err.print(f"  {r.spec_id} {r.variant}: {escape(reason)}")
