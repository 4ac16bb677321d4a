"""Stream resolution, memory_limit parsing, options and execution (the allocator protocol:
tests/test_memory.py)."""

from __future__ import annotations

import pytest

from cuweave._internal import memory
from cuweave._internal.cache import PlanCache
from cuweave._internal.errors import CudaUnavailableError, InvalidOptionError, InvalidStateError
from cuweave._internal.lifecycle import StatefulObject
from cuweave._internal.options import (
    ExecutionCPU,
    ExecutionCUDA,
    check_enum,
    coerce_options,
    resolve_execution,
)
from cuweave._internal.packages import resolve_stream
from cuweave._internal.streams import Stream


class CoreLikeStream:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


def test_stream_forms():
    assert resolve_stream(None).ptr == 0
    assert resolve_stream(1234).ptr == 1234
    s = CoreLikeStream(0xABC)
    r = resolve_stream(s)
    assert r.ptr == 0xABC and r.obj is s
    assert resolve_stream(r) is r
    assert Stream(5) == Stream(5) and hash(Stream(5)) == hash(Stream(5))


@pytest.mark.parametrize("bad", [-1, "stream", 1.5, True, object()])
def test_stream_bad(bad):
    with pytest.raises(InvalidOptionError, match="stream must be"):
        resolve_stream(bad)


@pytest.mark.parametrize("value,total,expected", [
    (0, None, 0), (4096, None, 4096), ("1GiB", None, 2**30), ("1.5 MB", None, 1_500_000),
    ("512kib", None, 512 * 1024), ("80%", 1000, 800), ("100%", 2**30, 2**30), (0.5, 100, 50),
    ("123", None, 123),
])
def test_memory_limit(value, total, expected):
    assert memory.parse_memory_limit(value, total) == expected


@pytest.mark.parametrize("value", ["lots", "-1GiB", "0%", "150%", -5, True, None, [1], "1 XB"])
def test_memory_limit_bad(value):
    with pytest.raises(InvalidOptionError, match="memory_limit"):
        memory.parse_memory_limit(value, 1000)


def test_memory_limit_percentage_needs_total():
    with pytest.raises(InvalidOptionError, match="device memory size"):
        memory.parse_memory_limit("50%")


def test_coerce_options_and_enums():
    assert coerce_options(None, ExecutionCPU) == ExecutionCPU()
    assert coerce_options({"num_threads": 3}, ExecutionCPU).num_threads == 3
    with pytest.raises(InvalidOptionError, match=r"options keys must be among"):
        coerce_options({"threads": 3}, ExecutionCPU)
    with pytest.raises(InvalidOptionError, match="options must be a ExecutionCPU"):
        coerce_options(3, ExecutionCPU)
    from cuweave import ComputeType

    assert check_enum("compute_32f", ComputeType, "compute_type") is ComputeType.COMPUTE_32F
    assert check_enum(68, ComputeType, "compute_type") is ComputeType.COMPUTE_32F
    assert check_enum("32F_FAST_TF32", ComputeType, "x") is ComputeType.COMPUTE_32F_FAST_TF32
    with pytest.raises(InvalidOptionError, match="compute_type must be a ComputeType"):
        check_enum("fast", ComputeType, "compute_type")


@pytest.mark.parametrize("bad", [{"num_threads": 0}, {"num_threads": 1.5}])
def test_execution_cpu_bad(bad):
    with pytest.raises(InvalidOptionError, match="num_threads must be"):
        ExecutionCPU(**bad)


def test_execution_cuda_bad():
    with pytest.raises(InvalidOptionError, match="device_id must be"):
        ExecutionCUDA(device_id=-1)


def test_resolve_execution_host_defaults(monkeypatch):
    from cuweave._internal import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "test")
    assert resolve_execution(None, operand_device="cpu", operand_device_id=None) == ExecutionCPU()
    assert resolve_execution("CPU", operand_device="cpu", operand_device_id=None) == ExecutionCPU()
    assert resolve_execution({"name": "cpu", "num_threads": 2}, operand_device="cpu",
                             operand_device_id=None) == ExecutionCPU(2)
    with pytest.raises(CudaUnavailableError, match="use execution='cpu'"):
        resolve_execution("cuda", operand_device="cpu", operand_device_id=None)
    with pytest.raises(InvalidOptionError, match="execution must be"):
        resolve_execution("tpu", operand_device="cpu", operand_device_id=None)
    with pytest.raises(InvalidOptionError, match="execution must be 'cuda' for operands"):
        resolve_execution("cpu", operand_device="cuda", operand_device_id=0)


def test_resolve_execution_engine_choices(monkeypatch):
    """FFT's choices (as nvmath-python): device operands may run on the CPU, and a dict without
    'name' names the operands' memory space; matmul keeps refusing both."""
    from cuweave._internal import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "test")
    fft = {"cpu_for_device": True, "name_from_operands": True}
    assert resolve_execution("cpu", operand_device="cuda", operand_device_id=0,
                             **fft) == ExecutionCPU()
    assert resolve_execution({"num_threads": 2}, operand_device="cpu", operand_device_id=None,
                             **fft) == ExecutionCPU(2)
    with pytest.raises(InvalidOptionError, match="execution keys must be among") as e:
        resolve_execution({"num_threads": 2}, operand_device="cuda", operand_device_id=0, **fft)
    assert isinstance(e.value, TypeError)  # ExecutionCUDA has no num_threads
    with pytest.raises(InvalidOptionError, match="execution must be 'cuda' for operands"):
        resolve_execution("cpu", operand_device="cuda", operand_device_id=0)
    with pytest.raises(InvalidOptionError, match="execution must be"):
        resolve_execution({"num_threads": 2}, operand_device="cpu", operand_device_id=None)
    with pytest.raises(InvalidOptionError, match="execution must be"):
        resolve_execution({"name": 5}, operand_device="cpu", operand_device_id=None, **fft)


def test_coerce_options_type_errors_are_type_errors():
    for bad in (3, "cpu", [("num_threads", 2)], {"threads": 3}):
        with pytest.raises(InvalidOptionError, match="options") as e:
            coerce_options(bad, ExecutionCPU)
        assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)


def test_resolve_execution_logs_cpu_fallback(monkeypatch, caplog):
    from cuweave._internal import cuda

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "unavailable_reason", lambda: "no GPU here")
    with caplog.at_level("INFO", logger="cuweave"):
        resolve_execution(None, operand_device="cpu", operand_device_id=None)
    assert [r.name for r in caplog.records] == ["cuweave.execution"]
    assert "running on the CPU" in caplog.records[0].getMessage()


class Thing(StatefulObject):
    def __init__(self):
        self.released = 0

    def _release(self):
        self.released += 1


def test_lifecycle():
    t = Thing()
    with pytest.raises(InvalidStateError, match=r"Thing.execute\(\) requires plan\(\)"):
        t._require_planned("execute")
    t._mark_planned()
    t._require_planned("execute")
    with t:
        pass
    assert t.released == 1 and t.is_freed
    t.free()
    assert t.released == 1
    with pytest.raises(InvalidStateError, match="after free"):
        t._require_planned("execute")


def test_plan_cache_lru_and_workspace_bound():
    freed = []

    class Obj:
        def __init__(self, n):
            self.n = n

        def free(self):
            freed.append(self.n)

    c = PlanCache(maxsize=3, max_workspace_bytes=100)
    objs = {n: Obj(n) for n in range(1, 7)}
    for k, n in (("a", 1), ("b", 2), ("c", 3)):
        c.put(k, objs[n], 10)
    assert len(c) == 3 and freed == []
    assert c.pop("a").n == 1  # exclusive: a second pop misses
    assert c.pop("a") is None
    c.put("a", objs[1], 10)  # back as the most recently used: b, c, a
    c.put("d", objs[4], 10)  # a fourth object: the least recently used, "b", is freed
    assert freed == [2] and len(c) == 3
    assert c.pop("c").n == 3  # in use: counted, never evicted
    c.put("e", objs[5], 85)  # count 4 > 3: "a" goes; bytes 10 + 10 + 85 > 100: "d" too
    assert freed == [2, 1, 4] and len(c) == 1
    c.put("c", objs[3], 10)  # known, same bytes: nothing to count
    assert freed == [2, 1, 4] and len(c) == 2
    c.put("c2", objs[6], 10)  # 85 + 10 + 10 > 100: the least recent, "e", goes
    assert freed == [2, 1, 4, 5]
    assert (c.hits, c.misses) == (2, 1)
    c.clear()
    assert sorted(freed) == [1, 2, 3, 4, 5, 6] and len(c) == 0 and c._bytes == 0


def test_plan_cache_hits_take_no_lock_for_rotating_keys():
    c = PlanCache(maxsize=8)
    objs = [object.__new__(type("O", (), {"free": lambda self: None})) for _ in range(5)]
    for i, o in enumerate(objs):
        c.put(i, o)
    c._lock = None  # a hit and the put-back of a known object never take the lock
    for _ in range(3):
        for i, o in enumerate(objs):  # several problems in turn, as in an MLP step
            assert c.pop(i) is o
            c.put(i, o)
    assert c.hits == 15 and list(c._idle) + [s[0] for s in c._front] == [0, 1, 2, 3, 4]


def test_plan_cache_keeps_a_second_object_of_a_key_as_a_spare():
    freed = []
    mk = type("O", (), {"free": lambda self: freed.append(self)})
    c = PlanCache(maxsize=3)
    first, second = mk(), mk()
    c.put("k", first)
    taken = c.pop("k")  # thread 1 runs it; thread 2 missed and planned its own
    c.put("k", second)
    c.put("k", taken)  # both back: one idle, one spare, both found again
    assert len(c) == 2 and {id(c.pop("k")), id(c.pop("k"))} == {id(first), id(second)}
    assert c.pop("k") is None
    c.put("k", first)
    c.put("k", second)
    c.put("x", mk())
    c.put("y", mk())  # over the count: the spare goes first
    assert len(freed) == 1 and freed[0] in (first, second)


def test_plan_cache_objects_in_use_survive_clear_and_come_back():
    freed = []
    mk = type("O", (), {"free": lambda self: freed.append(self)})
    c = PlanCache(maxsize=4)
    a, b = mk(), mk()
    c.put("a", a)
    c.put("b", b)
    assert c.pop("a") is a
    c.clear()
    assert freed == [b] and len(c) == 0
    c.put("a", a)  # still counted: nothing evicted, and it is found again
    assert c.pop("a") is a and freed == [b]
