"""The ``leases`` table: which process is sending which request of a run, until when.

Its SQL lives here and nowhere else (the DDL and migrations:
:mod:`cfkit.store.tables.leases`). Two ``cfkit probe run`` processes on the
same run (the same command started twice, or a resume while the first still
runs) share the work through it: a process sends a request only while it holds
the request's lease, and gives the lease up when the reply is stored. A lease
names its owner (host, process id, start time and a random token) and expires, so the
requests of a killed process are taken over by another one; the caller decides
when a lease may be taken (:mod:`cfkit.probe.sharing`). Every function takes
the caller's transaction, so a claim and the check that the request has no
reply yet happen at once.

Whether a run the store marks ``running`` is still being sent, and by whom,
is read from them too: the one rule every view uses (:func:`sending_of`,
:func:`statuses`). A run's status says ``running`` from the moment a ``cfkit
probe run`` (or ``cfkit study run``) opens it until that invocation records how
it ended; a process killed in between (SIGKILL, a crash, the machine turned
off) never records it, so the status alone cannot tell a run being sent from
one whose sender is gone. The leases can: a sending process holds one on the
run from the moment it opens it until it ends
(:data:`cfkit.probe.sharing.SENDING`), renews its leases while it runs, and
names itself as their owner: host, process id, the process's start time where
the system tells it (Linux ``/proc``), and a random token. :func:`sending_of`
reads them into a :class:`Sending`:

* a lease owned by a process on this host counts while that process exists
  and started when the owner says (a process id reused by another program
  does not count; an owner without a start time, written by an older cfkit or
  on a system without ``/proc``, counts only until its lease expires);
* a lease owned by a process on another host cannot be checked from here: it
  counts until it expires, and the run is shown as running on that host;
* with no lease that counts, the run's sender is gone: it is shown as
  interrupted, and the same command resumes it.

Several processes may send the same run at once (they share its requests), so
any one of them that counts makes the run live.
"""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from cfkit.store.tables.leases import DDL as DDL, MIGRATIONS as MIGRATIONS  # the schema (cfkit.store.tables)


#: A request's place in its run: (case id, pair id or '', condition).
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Lease:
    """Who is sending one request, and until when (seconds since the epoch)."""

    key: Key
    owner: str
    expires_at: float
    state: str = "sending"  # "failed": the owner stored a transport failure for it in this invocation


def held(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key]) -> dict[Key, Lease]:
    """The leases on ``keys`` of run ``run_id`` (expired ones too), by key.

    A run's leases are few (the requests in flight, or about to be, in each
    process), so they are read whole and filtered here.
    """
    wanted = set(keys)
    rows = tx.execute("SELECT case_id, pair_id, condition, owner, expires_at, state FROM leases WHERE run_id = ?",
                      (run_id,)).fetchall()
    return {key: Lease(key, owner, expires_at, state) for case_id, pair_id, condition, owner, expires_at, state
            in rows if (key := (case_id, pair_id, condition)) in wanted}


def take(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str, expires_at: float) -> None:
    """Give ``owner`` the leases on ``keys`` until ``expires_at``, whoever held them before."""
    tx.executemany("INSERT OR REPLACE INTO leases (run_id, case_id, pair_id, condition, owner, expires_at, state) "
                   "VALUES (?, ?, ?, ?, ?, ?, 'sending')", [(run_id, *key, owner, expires_at) for key in keys])


def release(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str) -> None:
    """Give up ``owner``'s leases on ``keys`` (a lease another process took over stays its own)."""
    tx.executemany("DELETE FROM leases WHERE run_id = ? AND case_id = ? AND pair_id = ? AND condition = ? "
                   "AND owner = ?", [(run_id, *key, owner) for key in keys])


def mark_failed(tx: sqlite3.Connection, run_id: str, keys: Iterable[Key], owner: str) -> None:
    """Keep ``owner``'s leases on ``keys`` as failed: tried in this invocation, not to be sent again by another."""
    tx.executemany("UPDATE leases SET state = 'failed' WHERE run_id = ? AND case_id = ? AND pair_id = ? "
                   "AND condition = ? AND owner = ?", [(run_id, *key, owner) for key in keys])


def release_all(tx: sqlite3.Connection, run_id: str, owner: str) -> int:
    """Give up every lease ``owner`` holds on the run; returns how many."""
    return tx.execute("DELETE FROM leases WHERE run_id = ? AND owner = ?", (run_id, owner)).rowcount


def renew(tx: sqlite3.Connection, run_id: str, owner: str, expires_at: float) -> int:
    """Extend every lease ``owner`` holds on the run to ``expires_at``; returns how many."""
    return tx.execute("UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ?",
                      (expires_at, run_id, owner)).rowcount


def owners(store, run_id: str) -> dict[str, float]:
    """Each owner holding leases on the run, with the latest expiry among them (:mod:`cfkit.store.leases`)."""
    return owners_of(store, [run_id]).get(run_id, {})


def owners_of(store, run_ids: list[str]) -> dict[str, dict[str, float]]:
    """:func:`owners` of each of ``run_ids`` that has leases, by run id, in one query."""
    rows = store.query_in("SELECT run_id, owner, MAX(expires_at) AS until FROM leases WHERE run_id IN ({}) "
                          "GROUP BY run_id, owner", run_ids)
    found: dict[str, dict[str, float]] = {}
    for row in rows:
        found.setdefault(row["run_id"], {})[row["owner"]] = row["until"]
    return found


#: How a run whose sender is gone is shown (``runs list``, ``runs show``, ``study status``, the report's notes).
GONE = "interrupted (its process is gone)"
#: What resumes a run whose sender is gone.
RESUME = ("run the same 'cfkit probe run' (or 'cfkit study run') command again to resume it; "
          "every reply stored is kept")


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, in the system's own clock ticks since boot, or None where not known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()  # the command name, in parentheses, may hold spaces
    return fields[19].decode() if len(fields) > 19 else None  # field 22 of the line: starttime


def owner_id() -> str:
    """This process as a lease owner: ``host:pid:start:token`` (start empty where not known)."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{process_started(pid) or ''}:{secrets.token_hex(4)}"


def _parts(owner: str) -> tuple[str, str, str | None]:
    """(host, pid text, start time or None) of an owner; ``host:pid:token`` is the form older cfkit wrote."""
    parts = owner.split(":")
    host, pid = parts[0], parts[1] if len(parts) > 1 else ""
    start = parts[2] if len(parts) > 3 and parts[2] else None
    return host, pid, start


def owner_host(owner: str) -> str:
    return _parts(owner)[0]


def owner_words(owner: str) -> str:
    """``owner`` as a person reads it: ``process 4242 on gpu-node-7 (cannot be checked from here)``."""
    host, pid, _ = _parts(owner)
    where = "this machine" if host == socket.gethostname() else f"{host} (cannot be checked from here)"
    return f"process {pid or '?'} on {where}"


def owner_alive(owner: str) -> bool | None:
    """Whether ``owner``'s process still runs: None where that cannot be told from here (another host, or an
    owner without a start time whose process id exists: it may have been reused)."""
    host, pid_text, start = _parts(owner)
    if host != socket.gethostname() or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # it exists, under another user
    if start is None:
        return None
    now_started = process_started(pid)
    return None if now_started is None else now_started == start


def owner_counts(owner: str, expires_at: float, at: float) -> bool:
    """Whether a lease of ``owner`` expiring at ``expires_at`` still stands for a live sender at ``at``."""
    alive = owner_alive(owner)
    return alive if alive is not None else expires_at > at


@dataclass(frozen=True)
class Sending:
    """Who is sending a run marked running: processes here that run, hosts that cannot be checked, or nobody."""

    here: tuple[str, ...] = ()  # process ids on this host
    hosts: tuple[str, ...] = ()  # other hosts holding unexpired leases

    @property
    def live(self) -> bool:
        return bool(self.here or self.hosts)

    @property
    def state(self) -> str:
        """``running`` (checked here), ``running elsewhere`` (cannot be checked) or ``interrupted``."""
        return "running" if self.here else "running elsewhere" if self.hosts else "interrupted"

    def shown(self) -> str:
        """The status as shown to a person."""
        if self.here:
            return "running"
        if self.hosts:
            return f"running on {', '.join(self.hosts)} (cannot be checked from here)"
        return GONE

    def who(self) -> str:
        """Which process sends it, in words."""
        parts = []
        if self.here:
            parts.append(f"process {', '.join(self.here)} on this machine")
        if self.hosts:
            parts.append(f"a process on {', '.join(self.hosts)} (cannot be checked from here)")
        return " and ".join(parts) or "no process"


def judge(owners: dict[str, float], at: float | None = None) -> Sending:
    """The :class:`Sending` of a run whose leases are held by ``owners`` (owner -> latest expiry)."""
    at = time.time() if at is None else at
    here, hosts = [], []
    for owner, until in sorted(owners.items()):
        if not owner_counts(owner, until, at):
            continue
        host, pid, _ = _parts(owner)
        if host == socket.gethostname():
            here.append(pid)
        elif host not in hosts:
            hosts.append(host)
    return Sending(tuple(dict.fromkeys(here)), tuple(hosts))


def sending_of(store, run_ids) -> dict[str, Sending]:
    """The :class:`Sending` of each of ``run_ids`` (runs marked running), read in one query."""
    held = owners_of(store, list(run_ids))
    at = time.time()
    return {run_id: judge(held.get(run_id, {}), at) for run_id in run_ids}


def shown_status(record, sending: dict[str, Sending]) -> str:
    """A run's status as shown: its stored one, but for a run marked running, who sends it (:class:`Sending`)."""
    if record.status != "running":
        return record.status
    return sending.get(record.id, Sending()).shown()


def statuses(store, records) -> dict[str, str]:
    """Each record's status as shown (:func:`shown_status`), by run id."""
    sending = sending_of(store, [r.id for r in records if r.status == "running"])
    return {r.id: shown_status(r, sending) for r in records}
