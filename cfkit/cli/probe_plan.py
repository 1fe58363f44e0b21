"""What ``cfkit probe run`` says before it sends: the dry-run plan and the warnings about unreviewed inputs."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from cfkit.cli.console import err, out, print_json, status, warn
from cfkit.money import usd
from cfkit.plural import agree, plural

#: Ids named in a warning before '… and N more'.
NAMES_SHOWN = 8


def names(ids) -> str:
    """The first few of ``ids``, and how many more."""
    ids = list(ids)
    more = f" and {len(ids) - NAMES_SHOWN} more" if len(ids) > NAMES_SHOWN else ""
    return ", ".join(ids[:NAMES_SHOWN]) + more


def unreviewed_lines(plan) -> list[str]:
    """Warnings for a plan that asks about inputs no person has reviewed (pairs' edits, drafted captions)."""
    if not plan.unreviewed:
        return []
    if plan.suite == "counterfactual":
        asked = len({i.pair_id for i in plan.items})
        n = len(plan.unreviewed)
        return [f"{n} of {plural(asked, 'pair')} {agree(n, 'use')} an edit no person has accepted (it passed its own "
                f"check only): {names(plan.unreviewed)}. Review {agree(n, 'them')} with 'cfkit review', or ask only "
                "accepted edits with --accepted-only."]
    asked = len({i.case.id for i in plan.items})
    return [f"{len(plan.unreviewed)} of {plural(asked, 'case')} "
            f"{agree(len(plan.unreviewed), 'have')} a caption a model drafted and no person has reviewed: "
            f"{names(plan.unreviewed)}. Read {agree(len(plan.unreviewed), 'them')} and set 'reviewed: true', or "
            f"leave {agree(len(plan.unreviewed), 'them')} out with --reviewed-only."]


def _unpriced(preview) -> str:
    """The cost row of a dry run without prices: not known, and how to give them."""
    if preview.endpoint is None:
        return f"none to a provider: {preview.model} runs here, without an endpoint"
    return (f"not known, since cfkit has no prices for {preview.model}: give them with -o price_in=… -o price_out=… "
            f"(USD per million tokens), or as input and output under [probe.prices.\"{preview.model}\"] in cfkit.toml")


def _prices(prices) -> str:
    cached = "" if prices.price_cached_in is None else f" / ${prices.price_cached_in:g} cached in"
    writes = "".join(f" / ${price:g} {what}" for price, what in zip(prices.cache_writes,
                                                                    ("cache write", "1-hour cache write"))
                     if price is not None)
    return (f"${prices.price_in:g} in / ${prices.price_out:g} out{cached}{writes} per million tokens "
            f"({prices.source})")


def render_preview(preview, max_cost: float | None, as_json: bool) -> None:
    """Print the plan of a dry run: what would be asked, sent and spent; nothing was sent or written."""
    plan, send, whole = preview.plan, preview.to_send, preview.all_requests
    if as_json:
        print_json({"dry_run": True, "run_id": preview.run_id, "model": preview.model, "suite": preview.suite,
                    "endpoint": preview.endpoint, "protocol": preview.protocol.record(),
                    "prices": preview.prices.record() if preview.prices else None,
                    "requests": whole.requests, "stored": preview.stored, "cached": preview.cached,
                    "to_send": {"requests": send.requests, "images": send.images,
                                "input_tokens_approx": send.input_tokens, "max_output_tokens": send.max_output_tokens,
                                "cost_in_usd_approx": send.cost_in, "cost_max_usd_approx": send.cost_max},
                    "selection": plan.selection.as_dict(), "left_out": list(plan.left_out),
                    "skipped": [{s.unit: s.pair_id, "reason": s.reason} for s in plan.skipped],
                    "unreviewed": list(plan.unreviewed)})
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold cyan", no_wrap=True)
    grid.add_column()
    protocol = preview.protocol
    generation = f"temperature {protocol.generation.temperature:g}, max tokens {protocol.generation.max_tokens}"
    rows = [("run", preview.run_id), ("model", preview.model), ("suite", preview.suite),
            ("endpoint", preview.endpoint or "local"),
            ("protocol", protocol.name + (f" ({', '.join(f'{k} {v:g}' for k, v in protocol.options.items())})"
                                          if protocol.options else "")),
            ("generation", generation),
            ("requests", f"{whole.requests} planned: {preview.stored} already stored, {preview.cached} in the "
                         f"response cache, {send.requests} to send"),
            ("images", f"{send.images} in the requests to send"),
            ("input tokens", f"about {send.input_tokens:,} (text at ~4 characters a token, images by OpenAI's "
                             "512-px tile rule; an approximation)"),
            ("output tokens", f"at most {send.max_output_tokens:,}"),
            ("prices", f"none known for {preview.model}" if preview.prices is None else _prices(preview.prices)),
            ("cost", _unpriced(preview) if send.cost_in is None or send.cost_max is None else
             f"about {usd(send.cost_in)} for the input (all of it at the input price); at most "
             f"{usd(send.cost_max)} if every reply used all its tokens (an estimate)")]
    if plan.left_out:
        rows.append(("left out", f"{len(plan.left_out)} by the selection ({names(plan.left_out)})"))
    for name, value in rows:
        grid.add_row(name, escape(str(value)))
    out.print(grid)
    for line in unreviewed_lines(plan):
        warn(line)
    if plan.skipped:
        warn(f"{plural(len(plan.skipped), plan.skipped[0].unit)} skipped:")
        for skip in plan.skipped:
            err.print(f"  {escape(skip.pair_id)}: {escape(skip.reason)}")
    if max_cost is not None and send.cost_max is not None and send.cost_max > max_cost:
        warn(f"--max-cost {max_cost:g} is below the most this could cost ({usd(send.cost_max)}); the run would stop "
             "when it reaches the limit and could be resumed.")
    if protocol.not_applicable:
        status(f"protocol {protocol.name}: {', '.join(protocol.not_applicable)} "
               f"{agree(len(protocol.not_applicable), 'do')} not apply to this backend.")
    status("dry run: nothing was sent and nothing was written.")
