"""The raw SQL that tests hold, in one place.

Tests read and write the store through its owner modules (``cfkit/store/``). The few statements here
cannot go through them, because they do what cfkit itself never does: turn a store back into one an
older cfkit left (to test the migration steps), or damage a store on purpose (to test that cfkit
refuses it in one line and loses nothing). ``tests/package/test_architecture.py`` checks that no other
test module holds SQL.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path


def store_as_of(path: Path, version: int) -> None:
    """Turn a store just made at the current schema into one as an older cfkit left it at ``version``: the
    columns that later migration steps add are dropped again and ``user_version`` is set back, so that the
    next open runs those steps, as it would on a user's old workspace."""
    from cfkit.store import _migrations

    conn = sqlite3.connect(path)
    for step, statements in sorted(_migrations().items(), reverse=True):
        if step <= version:
            continue
        for sql in statements:
            added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", sql)
            if added:
                conn.execute(f"ALTER TABLE {added[1]} DROP COLUMN {added[2]}")
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
