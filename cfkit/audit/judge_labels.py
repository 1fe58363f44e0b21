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


#: Why an audit item is left out of the judge's agreement with a person on one criterion, in the order the reasons
#: are tried (an item is counted once, under the first that holds): the judge's reply gave no valid Yes/No; its only
#: label was asked with an older wording of the questions; it was not asked, or its request failed; the annotator
#: has not labelled the item.
LEFT_OUT = ("no_valid_answer", "stale", "not_asked", "no_person_label")


@dataclass(frozen=True)
class JudgeLabels:
    """A judge's labels of one audit under the questions as they are now, and which others it has of older ones."""

    version: str
    labels: dict[str, dict[str, bool | None]]  # by item id and criterion; None: stored with no valid Yes/No
    stale: frozenset[tuple[str, str]]  # (item, criterion) labelled only with an older wording of the questions
    served: tuple[str, ...] = ()  # the models the judge's server said answered the labels that count, sorted

    def mixed(self, judge: str) -> str | None:
        """One line when the labels that count were answered by more than one model (one judge name served by two
        servers, or a server whose model was swapped between runs): the figures built on them mix the two."""
        if len(self.served) < 2:
            return None
        return (f"judge {judge}'s labels were answered by {len(self.served)} models its server named "
                f"({', '.join(self.served)}), so the figures built on them mix those models; give each model its own "
                "--judge name when you run 'cfkit audit prelabel'.")

    def missing(self, item_id: str, criterion: str) -> str | None:
        """Why the judge has no label that counts of the item on the criterion (a LEFT_OUT key), or None."""
        mine = self.labels.get(item_id, {})
        if criterion in mine:
            return None if mine[criterion] is not None else "no_valid_answer"
        return "stale" if (item_id, criterion) in self.stale else "not_asked"


def judge_labels(ws: Workspace, store: Store, audit_id: str, judge: str) -> JudgeLabels:
    """The judge's labels, of the questions as they are now ('prelabel' asks the rest); refused when it has none."""
    version = load_audit_questions(ws).version
    mine: dict[str, dict[str, bool | None]] = {}
    older: set[tuple[str, str]] = set()
    served: set[str] = set()
    for label in prelabels.prelabels(store, audit_id, judge=judge):
        if label.prompt_version == version:
            mine.setdefault(label.item_id, {})[label.criterion] = label.value
            served |= {label.server_model} if label.server_model else set()
        else:
            older.add((label.item_id, label.criterion))
    if not mine:
        others = prelabels.prompt_versions(store, audit_id, judge)
        stale = (f" with the questions as they are now ({version}); its labels of questions {', '.join(others)} are "
                 "stale (the question file or system text changed since)") if others else ""
        raise UsageError(f"judge {judge} has no labels in audit {audit_id}{stale}; run 'cfkit audit prelabel --judge "
                         f"{judge}'.")
    return JudgeLabels(version, mine, frozenset((i, c) for i, c in older if c not in mine.get(i, {})),
                       tuple(sorted(served)))

