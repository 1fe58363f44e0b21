"""The screening questions: what is asked about which picture, and the answer a good edit gets."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cfkit.errors import TemplateError
from cfkit.prompts import load_templates
from cfkit.workspace import Workspace

QUESTION_FILE = "judge-screen.yaml"
SYSTEM_FILE = "judge-system.txt"
IMAGES = ("original", "edit")
REGIONS = ("whole", "mask")
ANSWERS = ("Yes", "No")


@dataclass(frozen=True)
class Question:
    id: str
    image: str  # original | edit
    region: str  # whole | mask
    ask: str  # with {cue} and {replacement}
    expected: str  # Yes | No

    def text(self, cue: str, replacement: str) -> str:
        return self.ask.replace("{cue}", cue.strip().rstrip(".")).replace("{replacement}", replacement.strip().rstrip("."))


@dataclass(frozen=True)
class QuestionSet:
    system: str
    questions: tuple[Question, ...]
    version: str  # the digest of the system text and the question file: part of every stored answer's identity


def load_questions(ws: Workspace) -> QuestionSet:
    """The workspace's questions (``probes/templates/judge-screen.yaml``) or the packaged ones, checked."""
    import yaml

    templates = load_templates(ws, (SYSTEM_FILE, QUESTION_FILE))
    source = templates.sources[QUESTION_FILE]
    try:
        document = yaml.safe_load(templates[QUESTION_FILE])
    except yaml.YAMLError as exc:
        raise TemplateError(f"{source}: not valid YAML ({str(exc).splitlines()[0]}); fix the file.") from exc
    items = document.get("questions") if isinstance(document, dict) else None
    if not isinstance(items, list) or not items:
        raise TemplateError(f"{source}: no 'questions' list; see the packaged {QUESTION_FILE} for the layout.")
    questions, seen = [], set()
    for number, item in enumerate(items, 1):
        where = f"{source}: question {number}"
        if not isinstance(item, dict):
            raise TemplateError(f"{where} is not a mapping of id, image, region, ask and expected.")
        missing = [k for k in ("id", "image", "region", "ask", "expected") if not isinstance(item.get(k), str)]
        if missing:
            raise TemplateError(f"{where} lacks {', '.join(missing)} (each a string).")
        for key, allowed in (("image", IMAGES), ("region", REGIONS), ("expected", ANSWERS)):
            if item[key] not in allowed:
                raise TemplateError(f"{where}: {key} {item[key]!r} is not one of {', '.join(allowed)}.")
        if item["id"] in seen:
            raise TemplateError(f"{where}: id {item['id']!r} is used twice; give each question its own id.")
        if "{cue}" not in item["ask"] and "{replacement}" not in item["ask"] and item["region"] == "mask":
            raise TemplateError(f"{where} asks about the mask region without naming {{cue}} or {{replacement}}.")
        seen.add(item["id"])
        questions.append(Question(item["id"], item["image"], item["region"], item["ask"], item["expected"]))
    digest = hashlib.sha256((templates[SYSTEM_FILE] + "\x00" + templates[QUESTION_FILE]).encode("utf-8")).hexdigest()
    return QuestionSet(templates[SYSTEM_FILE].strip(), tuple(questions), digest[:12])
