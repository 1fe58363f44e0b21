"""Python's cycle collector held off while cfkit builds many long-lived objects at once.

CPython's cycle collector runs a pass every 700 or so objects made, and each
pass walks the young objects, now and then the older ones with them. Work that
builds a large structure in one go (a study's predictions, a report's units, a
probe run's plan) makes hundreds of passes that find nothing: those objects hold
no cycle and live until the work ends. Before a probe run of 1,204 requests sent
its first one, a hundred passes took 7-10 ms of the 0.2 s; a study's report
spent about a seventh of its reading there. While a run sends, the objects made
before it are frozen out of the passes instead (``cfkit.probe.sending``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collection() -> Iterator[None]:
    """The cycle collector held off while the body runs; memory is still freed as each object is dropped.

    When the collector comes back, the objects the body made and kept are
    counted as old (moved to the oldest generation, as surviving passes would
    have moved them): else the first pass after the pause walks every one of
    them at once, about a millisecond a model of a report. Skipped when
    something else holds objects frozen (``gc.freeze``): moving them is
    theirs to decide. A caller that held the collector off keeps it off.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            if not gc.get_freeze_count():
                gc.freeze()  # every generation's objects to the permanent one, and back into the oldest
                gc.unfreeze()
            gc.enable()
