"""What a run says of the endpoints of a replica set (:mod:`cfkit.backends.replicas`): the one line for each
endpoint the start-up check left out (:func:`start_notes`), and at the end of the run the one line for each
endpoint left out during it, put back in use, or that failed attempts (:func:`end_notes`). Each line begins with
:data:`~cfkit.backends.replicas.NOTE_START` (``runs show`` finds them among a run's notes)."""

from __future__ import annotations

from collections.abc import Sequence

from cfkit.backends.replicas import NOTE_START, RECHECK_S, Replica
from cfkit.plural import plural


def end_notes(replicas: Sequence[Replica], recheck_s: float = RECHECK_S) -> list[str]:
    """What to say at the end of a run of the endpoints left out during it and of those that failed attempts
    (each in one line)."""
    said = []
    every = f"asked again every {recheck_s:g} s or less often"
    for r in replicas:
        if r.times_out and r.left_out is None:
            times = f"left out {plural(r.times_out, 'time')}; " if r.times_out > 1 else ""
            said.append(f"{NOTE_START}{r.shown} was left out during the run ({r.first_left_out}) and put back in "
                        f"use {r.back_after or 0:.0f} s into the run, when it served the model again "
                        f"({times}{every}); it answered "
                        f"{plural(r.answered, 'request')}")
        elif r.times_out:
            how = (f"put back in use {plural(r.returns, 'time')} when it listed the model again, and left out "
                   f"again each time; {every}" if r.returns else f"{every}, it did not serve the model again"
                   if r.recheck else "not asked again: an account without credit gets none while the run sends"
                   if r.unpaid else "not asked again: the run's key does not change while it sends")
            said.append(f"{NOTE_START}{r.shown} was left out during the run ({r.left_out}) after answering "
                        f"{plural(r.answered, 'request')} ({how}); the other replicas answered the rest")
        elif r.back_after is not None:
            said.append(f"{NOTE_START}{r.shown} was left out at start and put back in use "
                        f"{r.back_after:.0f} s into the run, when it served the model; it answered "
                        f"{plural(r.answered, 'request')}")
        elif r.failed and not r.at_start:
            said.append(f"{NOTE_START}{r.shown} failed {plural(r.failed, 'attempt')} (last: {r.last_failure or '?'}) "
                        f"and answered {r.answered}; each failed attempt was sent again")
    return said


def start_notes(replicas: Sequence[Replica], recheck_s: float = RECHECK_S) -> list[str]:
    """One line for each endpoint the start-up check left out: which, why, and who does its work."""
    others = plural(sum(r.left_out is None for r in replicas), "other replica", "other replicas")
    return [f"{NOTE_START}{r.shown} is left out of this run ({r.left_out}); its requests go to the {others}"
            f" until it serves the model (asked again every {recheck_s:g} s)"
            for r in replicas if r.at_start]
