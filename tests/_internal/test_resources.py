"""The stream-ordered buffers matmul and FFT share (``_internal/resources.py``), rule by rule,
with the CUDA calls recorded (no GPU)."""

from __future__ import annotations

import pytest

from cuweave._internal import cuda, resources
from cuweave._internal.memory import MemoryPointer
from cuweave._internal.resources import StreamResources


@pytest.fixture
def log(monkeypatch):
    calls = []
    count = iter(range(1, 1000))

    class Event:
        def __init__(self, timing=True):
            self._h = next(count)

        def record(self, stream=0):
            calls.append(("record", self._h, stream))
            return self

        def synchronize(self):
            calls.append(("event_sync", self._h))

    ptrs = iter(range(0x1000, 0x100000, 0x1000))

    def allocate(nbytes, *, package, device_id, stream, allocator=None):
        ptr = next(ptrs)
        calls.append(("alloc", ptr, nbytes, stream))
        return MemoryPointer(ptr, nbytes, lambda: calls.append(("free", ptr)))

    class Driver:
        @staticmethod
        def cuCtxSynchronize():
            calls.append(("sync", "device"))
            return (0,)

    monkeypatch.setattr(cuda, "Event", Event)
    monkeypatch.setattr(cuda, "stream_wait_event",
                        lambda s, ev: calls.append(("wait", s, ev._h)))
    monkeypatch.setattr(cuda, "synchronize", lambda s: calls.append(("sync", s)))
    monkeypatch.setattr(cuda, "set_device", lambda d: None)
    monkeypatch.setattr(cuda, "driver", lambda: Driver)
    monkeypatch.setattr(resources, "allocate", allocate)
    monkeypatch.setattr(cuda, "is_capturing", lambda s: s in CAPTURING)
    CAPTURING.clear()
    return calls


CAPTURING = set()  # streams capturing a CUDA graph in the test (cuda.is_capturing)


def _kinds(log, since=0):
    return [e[0] for e in log[since:]]


# ---- rule 1: a new stream waits for the last one ------------------------------------------------
def test_enter_orders_a_new_stream_after_the_last(log):
    res = StreamResources(0, None)
    res.enter(5)
    assert log == []  # no buffers yet: nothing to order
    ptr = res.get("work", 64, 5)
    assert res.get("work", 32, 5) == ptr and _kinds(log) == ["alloc"]  # big enough: kept
    res.enter(5)
    res.enter(7)
    assert log[1:] == [("record", 1, 5), ("wait", 7, 1)] and res.last == 7


def test_the_first_allocation_is_work_on_its_stream(log):
    res = StreamResources(0, None)
    res.get("work", 64, 0)  # at plan time, on stream 0
    res.enter(9)
    assert log[1:] == [("record", 1, 0), ("wait", 9, 1)]


# ---- rule 2: a mark stands for a stream that may be destroyed -----------------------------------
def test_mark_replaces_the_stream_handle(log):
    res = StreamResources(0, None)
    res.get("work", 64, 3)
    assert res.mark() and log[-1] == ("record", 1, 3)
    assert not res.mark()  # already marked
    n = len(log)
    res.enter(0)
    assert log[n:] == [("wait", 0, 1)]  # waits on the mark, records nothing on 3
    assert not res.mark()  # stream 0 always exists: nothing to record


# ---- rule 3: replacing a buffer waits for its last user unless the free is ordered --------------
def test_replacement_waits_only_when_the_free_is_not_ordered(log):
    res = StreamResources(0, None)
    res.get("work", 64, 0)
    res.get("work", 128, 0)  # same stream, stream-ordered pool: no wait
    assert _kinds(log) == ["alloc", "free", "alloc"]
    res.enter(4)
    n = len(log)
    res.release("work")  # allocated on 0, last used on 4 (alive: a run is on it)
    assert _kinds(log, n) == ["sync", "free"] and log[n] == ("sync", 4)


def test_a_synchronous_allocator_always_waits(log):
    class Sync:
        def memalloc(self, size):  # pragma: no cover - allocate is faked
            raise AssertionError

    res = StreamResources(0, None, allocator=Sync())
    res.get("work", 64, 2)
    res.get("work", 128, 2)
    assert _kinds(log) == ["alloc", "sync", "free", "alloc"]


# ---- rule 4: closing cannot trust the last stream -----------------------------------------------
@pytest.mark.parametrize("last, marked, expect", [
    (0, False, ["free"]),  # allocated and last used on 0: ordered free
    (6, False, ["sync", "free"]),  # 6 may be gone: the whole device
    (6, True, ["event_sync", "free"]),  # the mark stands for 6
])
def test_close(log, last, marked, expect):
    res = StreamResources(0, None)
    res.get("work", 64, 0)
    res.enter(last)
    if marked:
        res.mark()
    n = len(log)
    res.close()
    got = [e for e in log[n:] if e[0] != "record"]
    assert [e[0] for e in got] == expect
    if expect[0] == "sync":
        assert got[0] == ("sync", "device")
    assert res.last is None and not res.has("work")


# ---- graph capture: nothing recorded or waited on a capturing stream ----------------------------
def test_a_capturing_stream_records_and_waits_on_nothing(log):
    res = StreamResources(0, None)
    res.get("work", 64, 0)  # at plan time, on stream 0 (the legacy stream)
    res.enter(5)
    n = len(log)
    CAPTURING.add(9)
    assert res.enter(9) is False  # no event on 0 or 5, no wait in the capture
    assert not res.mark(9)
    assert log[n:] == [] and res.last == 5  # the eager order is left as it was
    CAPTURING.clear()  # the capture ended: the next eager run on 9 is ordered after 5
    assert res.enter(9) is True
    assert log[n:] == [("record", 1, 5), ("wait", 9, 1)] and res.last == 9
