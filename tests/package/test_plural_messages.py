"""Counts in messages go through ``cfkit.plural.plural`` ("1 run", "3 runs"), never "3 run(s)"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from support.workspace import REPO

PACKAGE = REPO / "cfkit"

#: A noun (or a placeholder standing for one, as in ``f"{unit}(s)"``) written with "(s)".
PLURAL_S = re.compile(r"[\w}]\((?:s|es)\)")

#: (module path under cfkit/, the text as this test reads it) -> why "(s)" is right there. A count is at hand in
#: nearly every message, and where none is, a rewording reads better; add an entry only with its reason.
ALLOWED: dict[tuple[str, str], str] = {}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes (prose for readers of the code, not a message)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _text(node: ast.AST) -> str | None:
    """A string literal's text, with ``{}`` where an f-string puts a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    return None


def plural_s_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each string literal in ``path`` that writes a noun with "(s)", docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inside_fstrings:
            continue
        text = _text(node)
        if text is not None and PLURAL_S.search(text):
            found.append((node.lineno, text))
    return found


def test_no_message_counts_with_parenthesised_s():
    found = {(str(path.relative_to(PACKAGE)), text): line
             for path in sorted(PACKAGE.rglob("*.py")) for line, text in plural_s_literals(path)}
    wrong = [f"cfkit/{where}:{line}: {text!r}" for (where, text), line in found.items()
             if (where, text) not in ALLOWED]
    assert not wrong, ("write counts with cfkit.plural.plural (plural(n, 'run') -> '1 run' / '3 runs'), not "
                       "'run(s)'; where no count is at hand, reword or allow it in ALLOWED with a reason:\n"
                       + "\n".join(wrong))
    stale = [key for key in ALLOWED if key not in found]
    assert not stale, f"ALLOWED names texts no longer in cfkit; remove them: {stale}"


def test_the_scan_sees_the_ways_a_message_is_written(tmp_path):
    """The check reads f-strings, implicit concatenations and placeholders, and passes over docstrings."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""A module of run(s)."""\n'
                      'def f(n, unit):\n'
                      '    """Docstring about case(s)."""\n'
                      '    a = f"{n} request(s) failed"\n'
                      '    b = (f"{n} of the "\n'
                      '         "item(s) left")\n'
                      '    c = f"{n} {unit}(s) skipped"\n'
                      '    d = "no count: file(s)"\n'
                      '    e = f"{n} runs"\n', encoding="utf-8")
    assert [line for line, _ in sorted(plural_s_literals(sample))] == [4, 5, 7, 8]


# ── a count written by hand before its noun: f"{n} requests" reads "1 requests" when n is 1 ──────────────

#: Words ending in "s" that follow a placeholder without being a plural noun: verbs whose subject is the
#: placeholder (f"{path} is missing", f"{model} holds …") and other small words.
NOT_NOUNS = frozenset("""
    as is was has does its this his thus plus us yes vs less unless across always perhaps whereas wants
    appears answers asks belongs carries counts declares defines does doubts exists gives holds lacks lists matches
    names needs reads records rejects reports resolves says scores sets splits stays takes unpacks verifies waits writes
""".split())
#: Words that, right after a placeholder, show that what follows is not the placeholder's noun.
NOT_MODIFIERS = frozenset("""
    a an the and or nor but of in on at to for from with by as into onto than that this these those its their his
    her our your is was are were be been has have had not no so if then when where which who whose while
""".split())
#: A placeholder's text, then one optional modifier ("new", "planned", "more"), then a plural noun.
COUNTED = re.compile(r"^ (?:([a-z][a-z-]*) )?([a-z][a-z-]*s)(?![\w'-])")
#: In a plain string (a str.format or %-template): the placeholder, then the same.
TEMPLATE = re.compile(r"(\{[^{}]*\}|%[-+ #0-9.]*[dis])(?= )")

#: (module path under cfkit/, the placeholder's code, the noun) -> why the count there is never 1 or the
#: placeholder is no count. Add an entry only with its reason; a count that can be 1 goes through plural().
COUNT_ALLOWED: dict[tuple[str, str, str], str] = {
    ("backends/anthropic_messages.py", "MAX_STORED_CHARS", "characters"): "a constant in the tens of thousands",
    ("backends/openai_wire.py", "MAX_STORED_CHARS", "characters"): "a constant in the tens of thousands",
    ("images.py", "MAX_PIXELS", "pixels"): "a constant in the millions",
    ("parse/decision.py", "GRADED_CAP // 2", "characters"): "half a constant in the thousands",
    ("weights/reading.py", "MAX_MEMBERS", "members"): "a constant in the thousands",
    ("edit_import.py", "MAX_CANDIDATES", "candidates"): "a constant (100)",
    ("files.py", "csv.field_size_limit()", "characters"): "cfkit raises the csv module's limit to megabytes",
    ("audit/plan.py", "AUDIT_SUITE", "replies"): "a suite's name ('the contextcanvas replies'), not a count",
    ("report/tables.py", "audit['labels']", "labels"): "whose labels ('judge', 'people'), not a count",
    ("cli/probe_plan.py", "preview.model", "runs"): "a verb: 'MODEL runs here'",
    ("cli/probe_replies.py", "ws.root", "runs"): "the command 'cfkit -w ROOT runs unparsed'",
    ("edit_arguments.py", "spec.id", "engines"): "the key 'spec ID engines.ENGINE'",
    ("spec_status.py", "spec.id", "engines"): "the key 'spec ID engines.ENGINE'",
}


def _words_only(node: ast.AST) -> bool:
    """A placeholder that writes words, not a number: ``{'has' if n == 1 else 'have'}``, ``{plural(n, 'run')}`` or
    ``{agree(n, 'their')}``."""
    if isinstance(node, ast.IfExp):
        return all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in (node.body, node.orelse))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("plural", "agree")


def _noun_after(text: str) -> str | None:
    """The plural noun ``text`` (what follows a placeholder) starts with, if it starts with one."""
    match = COUNTED.match(text)
    if match is None:
        return None
    modifier, noun = match.groups()
    if modifier in NOT_MODIFIERS or modifier in NOT_NOUNS or noun in NOT_NOUNS or len(noun) < 3:
        return None
    return noun


def hand_counted(path: Path) -> list[tuple[int, str, str]]:
    """(line, placeholder, noun) of each placeholder in ``path`` that a plural noun follows, docstrings aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            for value, after in zip(node.values, node.values[1:]):
                if (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)
                        and not _words_only(value.value) and (noun := _noun_after(after.value))):
                    found.append((after.lineno, ast.unparse(value.value), noun))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
              and id(node) not in inside_fstrings):
            for match in TEMPLATE.finditer(node.value):
                if noun := _noun_after(node.value[match.end():]):
                    found.append((node.lineno, match.group(1), noun))
    return found


def test_no_count_is_written_by_hand_before_its_noun():
    found = {(str(path.relative_to(PACKAGE)), code, noun): line
             for path in sorted(PACKAGE.rglob("*.py")) for line, code, noun in hand_counted(path)}
    wrong = [f"cfkit/{where}:{line}: {{{code}}} {noun}" for (where, code, noun), line in sorted(found.items())
             if (where, code, noun) not in COUNT_ALLOWED]
    assert not wrong, ("a count written as f'{n} requests' reads '1 requests' when n is 1: write it with "
                       "cfkit.plural.plural (plural(n, 'request')); where the value is never 1 or is no count, "
                       "allow it in COUNT_ALLOWED with a reason:\n" + "\n".join(wrong))
    stale = [key for key in COUNT_ALLOWED if key not in found]
    assert not stale, f"COUNT_ALLOWED names placeholders no longer in cfkit; remove them: {stale}"


def test_the_count_scan_sees_hand_written_plurals(tmp_path):
    """f-strings, a modifier before the noun, str.format and %-templates; not verbs, words or plural() itself."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""About {n} requests."""\n'
                      'def f(n, path, x):\n'
                      '    a = f"{n} requests failed"\n'
                      '    b = f"{len(x)} new edits"\n'
                      '    c = "{} cases".format(n)\n'
                      '    d = "%d pairs" % n\n'
                      '    e = f"{path} is missing; {path} holds nothing"\n'
                      '    g = f"{plural(n, \'run\')} runs"\n'
                      '    h = f"{\'has\' if n == 1 else \'have\'} questions"\n'
                      '    i = f"{n} of them; took {n} s; {n} in this"\n'
                      '    j = f"{n:,} bytes"\n'
                      '    k = f"collect {agree(n, \'their\')} results"\n', encoding="utf-8")
    assert [(line, noun) for line, _, noun in sorted(hand_counted(sample))] == [
        (3, "requests"), (4, "edits"), (5, "cases"), (6, "pairs"), (11, "bytes")]


# ── the verb after a count: "1 of 3 replies have" reads wrong when the count is 1 ─────────────────────────

#: A verb that agrees with its count: after "{plural(n, 'run')}" or "{done} of {total}", write it with
#: cfkit.plural.agree ("{agree(n, 'have')}"), or a conditional of two words.
VERB = re.compile(r"^ (have|has|are|is|were|was|do|does)(?![\w'-])")
PLURAL_VERBS = frozenset({"have", "are", "were", "do"})

#: (module path under cfkit/, the count's code, the verb) -> why the verb there needs no agreement. Add an entry
#: only with its reason.
VERB_ALLOWED: dict[tuple[str, str, str], str] = {}


def _is_plural_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "plural"


def fixed_verbs(path: Path) -> list[tuple[int, str, str]]:
    """(line, the count's code, verb) of each fixed verb written right after a count in an f-string of ``path``:
    after ``{plural(...)}``, or a plural verb after ``{N} of {M}`` (it agrees with N; "edit {id} of {spec} is" is
    no count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.JoinedStr):
            continue
        values = node.values
        for i, (value, after) in enumerate(zip(values, values[1:])):
            if not (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)):
                continue
            match = VERB.match(after.value)
            if match is None:
                continue
            counted = (i >= 2 and isinstance(values[i - 1], ast.Constant) and values[i - 1].value.endswith(" of ")
                       and isinstance(values[i - 2], ast.FormattedValue))
            if counted and match.group(1) in PLURAL_VERBS:
                found.append((after.lineno, ast.unparse(values[i - 2].value), match.group(1)))
            elif _is_plural_call(value.value):
                found.append((after.lineno, ast.unparse(value.value), match.group(1)))
    return found


def test_a_verb_after_a_count_agrees_with_it():
    found = {(str(path.relative_to(PACKAGE)), code, verb): line
             for path in sorted(PACKAGE.rglob("*.py")) for line, code, verb in fixed_verbs(path)}
    wrong = [f"cfkit/{where}:{line}: {{{code}}} {verb}" for (where, code, verb), line in sorted(found.items())
             if (where, code, verb) not in VERB_ALLOWED]
    assert not wrong, ("a verb after a count reads '1 of 3 replies have' when the count is 1: write it with "
                       "cfkit.plural.agree (f\"{done} of {plural(n, 'reply', 'replies')} {agree(done, 'have')}\"); "
                       "where it needs no agreement, allow it in VERB_ALLOWED with a reason:\n" + "\n".join(wrong))
    stale = [key for key in VERB_ALLOWED if key not in found]
    assert not stale, f"VERB_ALLOWED names verbs no longer in cfkit; remove them: {stale}"


def test_the_verb_scan_sees_a_fixed_verb_after_a_count(tmp_path):
    """After plural() and after "{N} of {M}", across implicit concatenation; not an agreed verb, nor a verb whose
    subject is not a count ("{path} is"), nor "have" as part of a longer word."""
    sample = tmp_path / "sample.py"
    sample.write_text('def f(n, done, path, x):\n'
                      '    a = f"{plural(n, \'run\')} have stale answers"\n'
                      '    b = (f"{done} of {plural(n, \'reply\', \'replies\')} "\n'
                      '         "were cut off")\n'
                      '    c = f"; {done} of {n} have no valid answer"\n'
                      '    d = f"{done} of {plural(n, \'item\')} {agree(done, \'are\')} in"\n'
                      '    e = f"{path} is missing; {x} have"\n'
                      '    g = f"{plural(n, \'run\')} haven\'t; {plural(n, \'run\')} isolated"\n'
                      '    h = f"{plural(n, \'case\')} is"\n'
                      '    i = f"edit {x} of {path} is gone"\n', encoding="utf-8")
    assert [(line, verb) for line, _, verb in sorted(fixed_verbs(sample))] == [
        (2, "have"), (3, "were"), (5, "have"), (9, "is")]


def test_agree():
    from cfkit.plural import agree, plural

    assert [f"{done} of {plural(3, 'reply', 'replies')} {agree(done, 'have')} no answer" for done in (1, 2)] == [
        "1 of 3 replies has no answer", "2 of 3 replies have no answer"]
    assert [agree(n, verb) for n in (0, 1) for verb in ("are", "were", "do")] == [
        "are", "were", "do", "is", "was", "does"]


def test_agree_gives_the_pronoun_for_one():
    from cfkit.plural import agree

    assert [agree(n, word) for n in (1, 2) for word in ("them", "they", "their", "use")] == [
        "it", "it", "its", "uses", "them", "they", "their", "use"]
