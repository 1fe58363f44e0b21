"""The cycle collector held off while cfkit builds many long-lived objects, and brought back as it was."""

from __future__ import annotations

import gc
import weakref

import pytest

from cfkit.collector import paused_collection


class Node:
    pass


def test_what_a_pause_made_is_counted_old_so_the_next_pass_does_not_walk_it():
    """The objects made during a pause are moved to the oldest generation when it ends (the first pass after it
    would walk them all at once); garbage in a cycle is still collected, and objects someone froze stay frozen."""
    with paused_collection():
        kept = [[n] for n in range(5000)]
        looped = Node()
        looped.me = looped  # a cycle: only the collector frees it
    assert gc.isenabled() and gc.get_count()[0] < 100  # not five thousand young objects waiting for a pass
    assert any(obj is kept[0] for obj in gc.get_objects(generation=2))
    ref = weakref.ref(looped)
    del looped
    gc.collect()
    assert ref() is None
    held = Node()  # an object someone froze: frozen objects are in no generation
    gc.freeze()
    try:
        with paused_collection():
            more = [[n] for n in range(100)]
        # What was frozen stays frozen: not back in a generation. (The frozen count itself can drop meanwhile:
        # another thread of a busy process may free frozen objects.)
        assert gc.get_freeze_count() and more and not any(obj is held for obj in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(obj is held for obj in gc.get_objects())  # the check above can fail: unfrozen, it is found


def test_a_caller_that_held_the_collector_off_keeps_it_off_and_an_error_brings_it_back():
    gc.disable()
    try:
        with paused_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(KeyError), paused_collection():
        assert not gc.isenabled()
        raise KeyError("x")
    assert gc.isenabled()
