"""The judge model's audit questions and which of its stored labels count (``cfkit audit prelabel`` asks them).

A judge's label is one of the questions it was asked with: the prompt version
(the digest of ``judge-system.txt`` and ``judge-audit.yaml``) is part of it.
Only the labels asked with the questions as they are now count, in the
agreement and in the EGA section alike; those of an edited question file are
stale, never mixed with the new ones item by item.
"""

from __future__ import annotations

from dataclasses import dataclass

from cfkit.errors import TemplateError, UsageError
from cfkit.prompts import load_judge_templates
from cfkit.store import Store, prelabels
from cfkit.workspace import Workspace

QUESTION_FILE = "judge-audit.yaml"
SYSTEM_FILE = "judge-system.txt"
CRITERIA = ("cue", "link")


@dataclass(frozen=True)
class AuditQuestions:
    system: str
    intro: str
    criteria: dict[str, str]
    version: str


def load_audit_questions(ws: Workspace) -> AuditQuestions:
    read = load_judge_templates(ws, SYSTEM_FILE, QUESTION_FILE)
    document = read.document
    if not isinstance(document, dict) or not isinstance(document.get("intro"), str) \
            or not isinstance(document.get("criteria"), dict) \
            or sorted(document["criteria"]) != sorted(CRITERIA) \
            or not all(isinstance(v, str) for v in document["criteria"].values()):
        raise TemplateError(f"{read.source}: give 'intro' (text) and 'criteria' with the texts of cue and link.")
    return AuditQuestions(read.system, document["intro"], dict(document["criteria"]), read.version)


def current_labels(ws: Workspace, store: Store, audit_id: str, judge: str) -> dict[str, dict[str, bool | None]]:
    """The judge's labels by item and criterion, of the questions as they are now ('prelabel' asks the rest)."""
    version = load_audit_questions(ws).version
    mine = prelabels.latest(store, audit_id, judge, version)
    if not mine:
        others = prelabels.prompt_versions(store, audit_id, judge)
        stale = (f" with the questions as they are now ({version}); its labels of questions {', '.join(others)} are "
                 "stale (the question file or system text changed since)") if others else ""
        raise UsageError(f"judge {judge} has no labels in audit {audit_id}{stale}; run 'cfkit audit prelabel --judge "
                         f"{judge}'.")
    return mine
