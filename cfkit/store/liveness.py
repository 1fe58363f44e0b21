"""Whether a run the store marks ``running`` is still being sent, and by whom: the one rule every view uses.

A run's status says ``running`` from the moment a ``cfkit probe run`` (or
``cfkit study run``) opens it until that invocation records how it ended. A
process killed in between (SIGKILL, a crash, the machine turned off) never
records it, so the status alone cannot tell a run being sent from one whose
sender is gone. The leases can (:mod:`cfkit.store.leases`): a sending process
holds one on the run from the moment it opens it until it ends
(:data:`cfkit.probe.sharing.SENDING`), renews its leases while it runs, and
names itself as their owner: host, process id, the process's start time where
the system tells it (Linux ``/proc``), and a random token.

:func:`sending_of` reads them into a :class:`Sending`:

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
import time
from dataclasses import dataclass

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
    from cfkit.store import leases

    held = leases.owners_of(store, list(run_ids))
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
