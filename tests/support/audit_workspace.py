"""A workspace for the audit tests: nine cases with images, two models answering over a loopback chat server.

The models are reached through the real openai backend (``openai:gpt-5.5`` and
``openai:qwen3-vl-8b``) and identify themselves in their reasons, as real
models do, so blindness is tested on text that needs masking.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from PIL import Image

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, user_text
from support.workspace import gradient_image, run_cli

YES_NO = [{"id": "A", "text": "Yes"}, {"id": "B", "text": "No"}]
#: case id -> (gold, the decisive cue of the rationale)
CASES = {
    "AU01": ("A", "a lantern parade under a full moon"),
    "AU02": ("A", "children reading together at a long table"),
    "AU03": ("A", "a bride in a red qipao"),
    "AU04": ("A", "a lifeguard tower flying a green flag"),
    "AU05": ("B", "a wilted bouquet on the hospital tray"),
    "AU06": ("B", "a skull half hidden under the fruit"),
    "AU07": ("B", "a funeral wreath on the shop door"),
    "AU08": ("B", "storm clouds over the picnic"),
}
THREE = {"id": "AU09", "gold": "C", "cue": "runners crossing a finish line"}
GPT, QWEN = "openai:gpt-5.5", "openai:qwen3-vl-8b"
MODELS = (GPT, QWEN)
#: Words that would name an audited model or run: never in what an annotator (or a judge) is shown.
FORBIDDEN = ("gpt", "qwen", "openai", "alibaba", "contextcanvas-")
#: What each model answers (option ids) per case.
ANSWERS = {
    GPT: {"AU01": "A", "AU02": "A", "AU03": "A", "AU04": "B", "AU05": "B", "AU06": "B", "AU07": "A", "AU08": "B",
          "AU09": "C"},
    QWEN: {"AU01": "A", "AU02": "B", "AU03": "A", "AU04": "A", "AU05": "A", "AU06": "B", "AU07": "B", "AU08": "A",
           "AU09": "A"},
}
#: Self-identifying openings of each model's reasons.
INTRO = {GPT: "As GPT-5.5, a model developed by OpenAI, I judge the scene.",
         QWEN: "I am Qwen3-VL-8B from Alibaba Cloud. I'm a large language model trained by Alibaba Cloud."}
#: A reply given as free text instead of JSON (the parser reads its opening "A" as option A).
FREE_TEXT = {(GPT, "AU03"): "A Serene Moment in a Chinese Landscape, painted in soft ink."}


def question(case_id: str) -> str:
    return f"Scenario {case_id}: is this picture suitable for the event's poster?"


def build(root: Path) -> Path:
    """Write the workspace (cases, images, cfkit.toml) and return its folder."""
    (root / "data" / "images").mkdir(parents=True)
    records = []
    for n, (case_id, (gold, cue)) in enumerate(CASES.items()):
        Image.fromarray(gradient_image(96, 64, n)).save(root / "data" / "images" / f"{case_id}.png")
        records.append({"id": case_id, "images": [f"{case_id}.png"], "question": question(case_id),
                        "options": YES_NO, "gold": gold, "yes_option": "A",
                        "rationale": f"The decisive cue is {cue}."})
    Image.fromarray(gradient_image(96, 64, 99)).save(root / "data" / "images" / "AU09.png")
    records.append({"id": "AU09", "images": ["AU09.png"], "question": "Scenario AU09: which event fits this picture?",
                    "options": [{"id": "A", "text": "A wedding"}, {"id": "B", "text": "A funeral"},
                                {"id": "C", "text": "A race"}], "gold": "C",
                    "rationale": f"The decisive cue is {THREE['cue']}."})
    (root / "data" / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (root / "cfkit.toml").write_text('[dataset]\ncases = "data/cases.jsonl"\nimages = "data/images"\n'
                                     '\n[workspace]\npairs = 1\n')
    return root


def _cue(case_id: str) -> str:
    return THREE["cue"] if case_id == "AU09" else CASES[case_id][1]


def script(body: dict, n: int) -> Scripted:
    """Answer as the model the request names, for the case its question names."""
    model = f"openai:{body['model']}"
    case_id = re.search(r"Scenario (AU\d\d)", user_text(body)).group(1)
    if (model, case_id) in FREE_TEXT:
        return Scripted(body=completion(FREE_TEXT[model, case_id], model=body["model"]))
    reason = f"{INTRO[model]} The picture shows {_cue(case_id)}, which decides it."
    return Scripted(body=completion(answer_json(ANSWERS[model][case_id], reason), model=body["model"]))


def run_models(ws: Path) -> dict[str, str]:
    """Run both models on the contextcanvas suite; their run ids by model."""
    ids = {}
    with ChatServer(script) as server:
        for model in MODELS:
            result = run_cli(["-w", str(ws), "probe", "run", "-m", model, "-s", "contextcanvas", "--base-url",
                              server.url, "-o", "backoff=0.01", "-o", "max_retries=2", "--json"])
            assert result.exit_code == 0, result.stderr
            ids[model] = json.loads(result.stdout)["run_id"]
    return ids
