"""Tables of ``cfkit audit agreement``: agreement per criterion, the 2×2 tables, the disagreements."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from cfkit.audit.agreement import AuditAgreement, LabelPair
from cfkit.plural import plural

CRITERION_NAMES = {"answer": "answer", "cue": "cue", "link": "link", "ega": "EGA"}


def _ci(values: list[float] | None) -> str:
    return "—" if values is None else f"[{values[0]:.3f}, {values[1]:.3f}]"  # as the coefficients, and the judge's


def _short(pair: LabelPair, which: int) -> str:
    label = pair.first if which == 1 else pair.second
    j = label.judgement
    flags = "".join(("A" if j.answer_ok else "a", "C" if j.cue else "c", "L" if j.link else "l"))
    return flags + (" unsure" if label.unsure else "") + (f" — {label.note}" if label.note else "")


def agreement_view(result: AuditAgreement) -> Group:
    data = result.to_dict()
    table = Table(title=f"Agreement before adjudication · audit {result.audit.id} · "
                        f"{plural(len(result.pairs), 'item')} labelled by both", title_justify="left",
                  caption="answer: the answer is correct; cue: the decisive cue is identified; link: the cue is "
                          "linked to the use; EGA: all three. 2×2: yes-yes yes-no / no-yes no-no (Annotator 1 "
                          "first). κ Cohen's, AC1 Gwet's; 95% percentile bootstrap over items.",
                  caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for name in ("criterion", "n", "raw %", "κ", "95% CI", "AC1", "95% CI ", "2×2"):
        table.add_column(name, justify="left" if name in ("criterion", "2×2") else "right", no_wrap=True)
    for name, row in data["criteria"].items():
        kappa = "undefined" if row["kappa"] is None else f"{row['kappa']:.3f}"
        (yy, yn), (ny, nn) = row["table"]
        table.add_row(CRITERION_NAMES.get(name, name), str(row["n"]), f"{row['raw']:.2f}", kappa,
                      _ci(row["kappa_ci"]), f"{row['ac1']:.3f}", _ci(row["ac1_ci"]), f"{yy}·{yn}/{ny}·{nn}")
    parts: list = [table]
    for name, row in data["criteria"].items():
        if row["kappa_undefined"]:
            parts.append(Text(f"{CRITERION_NAMES.get(name, name)}: {row['kappa_undefined']}", style="yellow"))
    listing = Table(title=f"Disagreements ({len(result.disagreements)}) and unsure marks ({len(result.unsure)})",
                    title_justify="left", caption="a/c/l: answer correct, cue, link; capital = yes.",
                    caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1, 0, 0))
    for name in ("item", "case", "differs on", "Annotator 1", "Annotator 2"):
        listing.add_column(name, overflow="fold")
    for pair in result.disagreements + result.unsure:
        listing.add_row(pair.item.id, escape(pair.item.case_id), ", ".join(pair.differs) or "unsure",
                        escape(_short(pair, 1)), escape(_short(pair, 2)))
    parts += [Text(""), listing]
    if result.disagreements or result.unsure:
        parts.append(Text("Resolve them with 'cfkit audit adjudicate --as NAME' (or 'cfkit audit resolve ITEM').",
                          style="dim"))
    return Group(*parts)
