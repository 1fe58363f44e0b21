"""Sharing a run's requests between processes: each request is sent by the one process holding its lease.

The same ``cfkit probe run`` started twice at once (or a resume while the
first process still runs) used to send every request twice. Now a process
claims the requests it is about to send a few at a time
(:data:`CLAIM` per worker), in one transaction that also checks that no reply
settled them meanwhile (:func:`cfkit.store.runs.answered`): a request whose
lease another live process holds is left to it, and one another process
answered is counted as done. The leases are renewed while the process runs
and given up as soon as their replies are stored (one whose transport
failure was stored is kept, marked failed, until its owner ends, so the
other process does not try it again in the same breath); a lease whose owner was
killed is taken over once it expires (:data:`LEASE_S`), or at once when its
owner was a process on this machine that no longer exists. When nothing else
is left, a process waits for the requests other processes hold, so each
process ends with the whole run stored; it says so once (``on_wait``): how
many requests, whose leases (host and process id), when they expire, and that
a gone process's leases are taken over then (Ctrl-C stops waiting, keeping
what is stored).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from cfkit.probe.plan import ProbeItem
from cfkit.store import Store, leases, runs
from cfkit.store.leases import owner_id as owner_id
from cfkit.store.leases import Lease

#: Seconds a lease lasts without renewal; renewed every third of it while its process runs.
LEASE_S = 60.0
#: Seconds between looks at the requests another process holds.
POLL_S = 0.25
#: Requests claimed at once for each request allowed in flight.
CLAIM = 2


def owner_alive(owner: str) -> bool:
    """False only when ``owner`` was a process on this machine that no longer runs (:mod:`cfkit.store.leases`)."""
    return leases.owner_alive(owner) is not False


def _takeable(lease: Lease | None, owner: str, at: float) -> bool:
    return lease is None or lease.owner == owner or lease.expires_at <= at or not owner_alive(lease.owner)


#: The case and condition of the lease a process holds on a run for as long as it sends it (its pair is the
#: owner), so that ``cfkit study status`` sees the run as running even between two claims, when every request
#: the process claimed is stored and its next claim not yet made. No request has this key.
SENDING = "*sending*"


class SharedQueue:
    """The requests this process sends, in plan order, claimed through leases (see the module docstring).

    ``keys`` maps each item's place to its cache key; ``claim`` is how many
    requests are claimed in one transaction; ``on_elsewhere`` is called for a
    request another process settled.
    """

    def __init__(self, store: Store, run_id: str, items: list[ProbeItem], keys: dict, *, claim: int,
                 on_elsewhere: Callable[[ProbeItem], None] | None = None, owner: str | None = None,
                 on_wait: Callable[[str], None] | None = None):
        self.store = store
        self.run_id = run_id
        self.keys = keys
        self.owner = owner or owner_id()
        self.claim_size = max(1, claim)
        self.on_elsewhere = on_elsewhere
        self._pending = deque(items)
        self._ready: deque[ProbeItem] = deque()
        self._deferred: dict[tuple, ProbeItem] = {}  # held by another live process
        self._waiting = asyncio.Lock()
        self.elsewhere = 0  # requests another process settled while this one ran
        self.on_wait = on_wait  # told, once for each set of holders, what this process waits for
        self._holders: dict[tuple, tuple[str, float]] = {}  # deferred request -> (its lease's owner, expiry)
        self._said: frozenset[str] = frozenset()

    async def next(self) -> ProbeItem | None:
        """The next request to send (its lease held), or None when every request is settled."""
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._pending:
                self._claim([self._pending.popleft() for _ in range(min(self.claim_size, len(self._pending)))])
                continue
            if not self._deferred:
                return None
            async with self._waiting:  # one worker looks; the others wait for what it finds
                if self._ready or not self._deferred:
                    continue
                self._say_waiting()
                await asyncio.sleep(POLL_S)
                self._claim(list(self._deferred.values()))

    def _claim(self, items: list[ProbeItem]) -> None:
        """In one transaction: drop what a reply settled, lease what is free, defer what another process holds."""
        at = time.time()
        with self.store.transaction() as tx:
            settled = runs.answered(tx, self.run_id, {i.key: self.keys[i.key] for i in items})
            held = leases.held(tx, self.run_id, [i.key for i in items if i.key not in settled])
            free = []
            for item in items:
                lease = held.get(item.key)
                if item.key in settled:
                    continue
                if lease is not None and lease.state == "failed" and lease.owner != self.owner \
                        and lease.expires_at > at and owner_alive(lease.owner):
                    settled.add(item.key)  # another process just tried it and stored why it failed
                elif _takeable(lease, self.owner, at):
                    free.append(item)
            leases.take(tx, self.run_id, [i.key for i in free], self.owner, at + LEASE_S)
        free_keys = {i.key for i in free}
        for item in items:
            self._deferred.pop(item.key, None)
            if item.key in settled:
                self.elsewhere += 1
                if self.on_elsewhere:
                    self.on_elsewhere(item)
            elif item.key in free_keys:
                self._ready.append(item)
            else:
                self._deferred[item.key] = item
                lease = held.get(item.key)
                if lease is not None:
                    self._holders[item.key] = (lease.owner, lease.expires_at)
        for key in [k for k in self._holders if k not in self._deferred]:
            del self._holders[key]

    def _say_waiting(self) -> None:
        """Tell ``on_wait`` what this process waits for, once for each set of processes holding the leases."""
        owners = frozenset(owner for owner, _ in self._holders.values())
        if self.on_wait is None or not owners or owners <= self._said:
            return
        self._said |= owners
        from datetime import datetime, timezone

        from cfkit.plural import plural

        until = max(expires for _, expires in self._holders.values())
        left = max(0.0, until - time.time())
        at = datetime.fromtimestamp(until, timezone.utc).strftime("%H:%M:%S UTC")
        who = " and ".join(leases.owner_words(owner) for owner in sorted(owners))
        self.on_wait(f"waiting for {plural(len(self._deferred), 'request')} of run {self.run_id} leased by {who}: "
                     f"it is sending them; this process takes over those still unanswered when the leases expire "
                     f"(in {left:.0f} s, at {at}; later if that process renews them, as a running one does). If "
                     "that process is gone, they are taken over then; Ctrl-C stops waiting and keeps what is stored.")

    def announce(self) -> None:
        """Say, until :meth:`close`, that this process sends the run (a lease on no request)."""
        announce(self.store, self.run_id, self.owner)

    async def keep_alive(self) -> None:
        """Renew this process's leases every third of :data:`LEASE_S` until cancelled."""
        while True:
            await asyncio.sleep(LEASE_S / 3)
            with self.store.transaction() as tx:
                leases.renew(tx, self.run_id, self.owner, time.time() + LEASE_S)

    def close(self) -> None:
        """Give up every lease still held (a budget stop, an interruption), so another process can go on at once."""
        withdraw(self.store, self.run_id, self.owner)


def announce(store: Store, run_id: str, owner: str) -> None:
    """Say that ``owner`` sends the run (the :data:`SENDING` lease), from the moment it opens the run: the views
    tell a run being sent from one whose sender is gone by it (:mod:`cfkit.store.leases`)."""
    with store.transaction() as tx:
        leases.take(tx, run_id, [(SENDING, owner, SENDING)], owner, time.time() + LEASE_S)


def withdraw(store: Store, run_id: str, owner: str) -> None:
    """Give up every lease ``owner`` holds on the run, :data:`SENDING` with them."""
    with store.transaction() as tx:
        leases.release_all(tx, run_id, owner)
