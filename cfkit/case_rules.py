"""The rules a case's id, image paths and sendable texts follow, shared by both readers of a case.

:mod:`cfkit.cases` applies them in its plain reading and :mod:`cfkit.cases_schema`
in the full (pydantic) one, so the two cannot drift apart.
"""

from __future__ import annotations

import re

#: A case id: 1 to 64 ASCII letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit.
CASE_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
CASE_ID = re.compile(CASE_ID_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: A NUL is never sent to a model: it ends the string early in many servers' C code, or is refused by their JSON
#: parser. (Other control characters, terminal escapes included, are kept as data; every view escapes them.)
_NUL = re.compile(r"\x00")


def case_id_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable case id (see :data:`CASE_ID_PATTERN`), or None."""
    if CASE_ID.fullmatch(value):
        return None
    return (f"case id {value!r} is not allowed: ids are 1-64 ASCII letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, because they name files; rename the case")


def image_path_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable image path (relative to the image root), or None.

    This is the lexical rule; :func:`cfkit.dataset.check_cases` also resolves symlinks against the root.
    """
    if not value.strip():
        return "is empty; give the image's path relative to the image root"
    if _CONTROL.search(value):
        return "contains a control character; rename the file"
    if _URL.match(value):
        return ("is a URL; cfkit reads image files, never downloads them: download the image into the image root "
                "and give its path relative to it")
    if "\\" in value:
        return "contains '\\'; write paths with '/' relative to the image root"
    if value.startswith("/") or _DRIVE.match(value):
        return "is absolute; give the path relative to the image root ([dataset] images)"
    if ".." in value.split("/"):
        return "contains '..'; keep every image inside the image root"
    return None


def control_character_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent to a model as it is (a control character such as NUL), or None."""
    found = _NUL.search(value)
    if found is None:
        return None
    return (f"holds the control character U+{ord(found.group()):04X} (NUL) at position {found.start() + 1}; "
            "remove it (it is invisible, often left by a conversion from UTF-16 or a copy from a PDF)")
