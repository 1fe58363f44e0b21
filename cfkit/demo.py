"""``cfkit demo``: the whole research workflow on examples/mini, offline.

Copy the mini workspace, validate its specs, make the counterfactual edits
with the classical engine, check them, lint the captions, run the
contextcanvas, counterfactual and modality suites with the baseline backends,
report, and write the contact sheet. Needs no network, no keys and no model weights.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import cfkit
from cfkit.errors import CheckFailed, NotFoundError, OutputError
from cfkit.plural import plural
from cfkit.workspace import Workspace, load_workspace

#: The baseline backends the demo probes with; they need nothing installed.
DEMO_MODELS = ("baseline:always-no", "baseline:always-yes", "baseline:majority", "baseline:random")
DEMO_SUITES = ("contextcanvas", "counterfactual", "modality")


@dataclass
class DemoStep:
    name: str
    detail: str
    seconds: float


@dataclass
class DemoResult:
    workspace: Workspace
    steps: list[DemoStep] = field(default_factory=list)
    report: object | None = None  # cfkit.report.Report
    sheet_html: Path | None = None
    sheet_png: Path | None = None
    notes: list[str] = field(default_factory=list)


def find_mini() -> Path:
    """examples/mini of the checkout cfkit runs from (an editable install), or of the current folder."""
    for base in (Path(cfkit.__file__).resolve().parent.parent, Path.cwd()):
        candidate = base / "examples" / "mini"
        if (candidate / "cfkit.toml").is_file():
            return candidate
    raise NotFoundError(
        "the demo needs examples/mini, which is not next to this cfkit installation or in the current folder. "
        "Run it from a clone of the cfkit repository after 'pip install -e .'."
    )


def copy_mini(out: Path | None) -> Path:
    """A fresh copy of examples/mini at ``out`` (must be absent or empty) or in a temporary folder."""
    source = find_mini()
    if out is None:
        target = Path(tempfile.mkdtemp(prefix="cfkit-demo-")) / "mini"
    else:
        if out.exists() and any(out.iterdir()):
            raise OutputError(f"--output {out} is not empty; give a new or empty folder so nothing there is overwritten.")
        target = out
    shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".cfkit", "__pycache__"))
    return target


def run_demo(out: Path | None = None, *, on_step: Callable[[DemoStep], None] | None = None) -> DemoResult:
    """Run every step of the demo; raises at the first step that fails."""
    from cfkit.lint import lint_captions
    from cfkit.edit import make_edit
    from cfkit.probe import probe_suite
    from cfkit.report import make_report
    from cfkit.review.sheet import write_sheet
    from cfkit.spec_status import validate_specs
    from cfkit.store import Store

    result = DemoResult(workspace=load_workspace(copy_mini(out)))
    ws = result.workspace

    def step(name: str, detail: str, started: float) -> None:
        done = DemoStep(name, detail, time.perf_counter() - started)
        result.steps.append(done)
        if on_step:
            on_step(done)

    # 1. Specs: every one must be valid before anything is made.
    t = time.perf_counter()
    reports = validate_specs(ws, [])
    bad = [r for r in reports if not r.ok]
    if bad:
        raise CheckFailed(f"spec {bad[0].spec_id} is invalid: {bad[0].findings[0].message}")
    step("validate specs", f"{plural(len(reports), 'spec')} valid", t)

    # 2. Edits with the offline classical engine; each is checked as it is made.
    t = time.perf_counter()
    verdicts = []
    for r in reports:
        outcome = make_edit(ws, r.spec_id, engine="classical")
        verdicts.extend(f"{r.spec_id} {v}" for v in outcome.verdicts.values())
        result.notes.extend(outcome.notes)
        if outcome.check_error is not None:
            result.notes.append(f"the preservation check could not run on {outcome.plan.spec_id}: {outcome.check_error}")
        result.notes.extend(r.metrics["lpips_note"] for results in (outcome.checks or {}).values() for r in results
                            if r.metrics.get("lpips_note"))
    step("edit + check", ", ".join(verdicts) or "no verdicts", t)

    # 3. Captions must be clean for the modality conditions to mean anything.
    t = time.perf_counter()
    lint = lint_captions(ws)
    if not lint.ok:
        raise CheckFailed(f"caption lint failed: {lint.errors[0].message}")
    step("lint captions", f"{plural(lint.files, 'caption file')} clean, {plural(len(lint.warnings), 'warning')}", t)

    # 4. Probe runs: every suite with every baseline backend.
    t = time.perf_counter()
    sent = 0
    with Store(ws.db_path) as store:
        for suite in DEMO_SUITES:
            for model in DEMO_MODELS:
                summary = probe_suite(ws, store, model, suite)
                sent += summary.sent
                result.notes.extend(f"{suite}: pair {s.pair_id} skipped ({s.reason})" for s in summary.skipped)
    step("probe runs", f"{plural(len(DEMO_MODELS), 'baseline')} × {plural(len(DEMO_SUITES), 'suite')}, {plural(sent, 'request')}", t)

    # 5. Report and contact sheet.
    t = time.perf_counter()
    result.report = make_report(ws)
    files = write_sheet(ws, [r.spec_id for r in reports])
    result.sheet_html, result.sheet_png = files.html, files.png
    step("report + sheet", f"contact sheet {files.html.name}", t)
    return result


NEXT_STEPS = """\
The same workflow with real engines and models (in a workspace pointed at ContextCanvas):
  export OPENAI_API_KEY=...
  cfkit edit CF18 --engine openai                 # GPT Image 2 via the images API
  cfkit edit CF18 --engine diffusers              # local inpainting (weights in the HF cache)
  cfkit review CF18
  cfkit probe run --model openai:gpt-5.5 --suite counterfactual
  cfkit probe run --model openai:Qwen/Qwen3-VL-8B-Instruct --base-url http://localhost:8000/v1 \\
      --api-key-env VLLM_API_KEY --suite modality   # any OpenAI-compatible server (vLLM, Ollama, SGLang)
  cfkit probe run --model hf:Qwen/Qwen3-VL-8B-Instruct --suite contextcanvas   # local transformers
  cfkit report --reference"""

