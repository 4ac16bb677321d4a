"""The GPU data plane's parts that need no GPU: the NCCL binding (loading, errors, argument
building), the NCCL transport's calls, and the typed errors GPU operands raise before any work.
The exchange logic itself runs on host memory in ``mpi_worker.py``'s ``planner`` group; the GPU
runs are test_mpi.py's ``gpu``/``multi_gpu`` tests."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

import cuweave.distributed as dist
from cuweave import CuweaveError, InvalidOperandError, InvalidOptionError
from cuweave._bindings import nccl
from cuweave._internal import packages
from cuweave._internal.errors import CudaUnavailableError, LibraryNotFoundError, NcclError
from cuweave._internal.streams import Stream
from cuweave.distributed import _gpu, _runtime
from cuweave.distributed.distribution import Slab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Group(dist.ProcessGroup):
    """``nranks`` processes where every other process says what this one says."""

    def __init__(self, rank=0, nranks=1):
        self.rank, self.nranks = rank, nranks

    def allgather_object(self, obj):
        return [obj] * self.nranks


@pytest.fixture
def started():
    def start(device_id=None, nranks=1, backends=None):
        dist.initialize(device_id, Group(0, nranks), backends=backends)
        return dist.get_context()
    yield start
    dist.finalize()


def test_imports_load_no_array_package_mpi_or_nccl():
    code = ("import sys, cuweave, cuweave.distributed, cuweave.distributed.fft, "
            "cuweave.distributed._gpu, cuweave._bindings.nccl as n; "
            "print([m for m in ('torch', 'cupy', 'mpi4py') if m in sys.modules], "
            "n.library_path())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), check=True)
    assert out.stdout.strip() == "[] None"


def test_nccl_loads_or_raises_a_typed_error_saying_how_to_get_it():
    try:
        version = nccl.get_version()
    except LibraryNotFoundError as e:
        assert "NCCL" in str(e) and "nvidia-nccl-cu13" in str(e) and "libnccl2" in str(e)
    else:
        assert version >= 20000 and nccl.library_path()


def test_every_place_searched_is_named(monkeypatch, tmp_path):
    lib = tmp_path / "nvidia" / "nccl" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnccl.so.2").write_bytes(b"not a library")
    monkeypatch.setattr(nccl, "_state", {})
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])

    def refuse(*args, **kwargs):
        raise OSError("refused by the test")

    monkeypatch.setattr(nccl.ctypes, "CDLL", refuse)
    with pytest.raises(LibraryNotFoundError) as info:
        nccl.library()
    text = str(info.value)
    assert "cuda.pathfinder" in text and str(lib / "libnccl.so.2") in text
    assert "libnccl.so.2: refused" in text and info.value.library == "NCCL"


def test_errors_name_the_function_the_status_and_a_hint():
    with pytest.raises(NcclError) as info:
        nccl.check(5, "ncclSend")
    e = info.value
    assert isinstance(e, CuweaveError) and isinstance(e, RuntimeError)
    assert (e.function, e.status, e.status_name) == ("ncclSend", 5, "ncclInvalidUsage")
    assert "ncclSend" in str(e) and "one GPU each" in str(e)
    assert NcclError(42).status_name == "UNKNOWN_STATUS_42"
    nccl.check(0, "ncclSend")


def test_unique_id_is_128_bytes_passed_by_value():
    assert ctypes.sizeof(nccl.UniqueId) == nccl.UNIQUE_ID_BYTES == 128
    data = bytes(range(128))
    uid = nccl.unique_id_from_bytes(data)
    assert ctypes.string_at(ctypes.addressof(uid), 128) == data
    with pytest.raises(InvalidOperandError, match="unique_id must be 128 bytes, got 3 bytes"):
        nccl.unique_id_from_bytes(b"abc")
    restype, argtypes = nccl.SIGNATURES["ncclCommInitRank"]
    assert argtypes[2] is nccl.UniqueId and argtypes[1] is ctypes.c_int
    assert nccl.SIGNATURES["ncclSend"][1][1] is ctypes.c_size_t


class Recorder:
    """A function table standing for libnccl: records calls, returns ``status``."""

    def __init__(self, status=0):
        self.calls, self.status = [], status

    def __getitem__(self, name):
        def fn(*args):
            self.calls.append((name, args))
            return self.status
        return fn

    def get(self, name, default=None):
        return self[name]


def test_wrappers_build_the_arguments(monkeypatch):
    table = Recorder()
    monkeypatch.setattr(nccl, "library", lambda: table)
    nccl.send(0x1000, 64, 1, 0xC0, 0x5)
    nccl.recv(0x2000, 32, 0, 0xC0, 0x0)
    nccl.group_start()
    nccl.group_end(0xC0)
    comm = nccl.comm_init_rank(2, bytes(range(128)), 1)
    assert comm == 0  # the recorder writes no communicator
    assert table.calls[0] == ("ncclSend", (0x1000, 64, int(nccl.DataType.UINT8), 1, 0xC0, 0x5))
    assert table.calls[1] == ("ncclRecv", (0x2000, 32, 1, 0, 0xC0, 0x0))
    assert [c[0] for c in table.calls[2:4]] == ["ncclGroupStart", "ncclGroupEnd"]
    name, (_, nranks, uid, rank) = table.calls[4]
    assert (name, nranks, rank) == ("ncclCommInitRank", 2, 1)
    assert ctypes.string_at(ctypes.addressof(uid), 128) == bytes(range(128))
    c = nccl.Communicator(0xC0, 0, 2, 0)
    c.close()
    assert [n for n, _ in table.calls[-2:]] == ["ncclCommFinalize", "ncclCommDestroy"]
    assert c.ptr == 0
    failing = Recorder(status=4)
    monkeypatch.setattr(nccl, "library", lambda: failing)
    with pytest.raises(NcclError, match="ncclRecv failed with ncclInvalidArgument"):
        nccl.recv(0x2000, 32, 0, 0xC0, 0)


class ByteOps:
    @staticmethod
    def pointer(x):
        return x.ctypes.data

    @staticmethod
    def nbytes(x):
        return x.nbytes


def test_transport_groups_every_send_and_receive():
    api = SimpleNamespace(calls=[])
    api.group_start = lambda: api.calls.append(("start",))
    api.group_end = lambda comm: api.calls.append(("end", comm))
    api.send = lambda *a: api.calls.append(("send",) + a)
    api.recv = lambda *a: api.calls.append(("recv",) + a)
    t = _gpu.nccl_transport(SimpleNamespace(ptr=0xAB), 0x77, ByteOps, api)
    a, b, r = np.zeros(4, np.complex64), np.zeros(0, np.float32), np.zeros((2, 3), np.int16)
    t(None, [(1, a), (2, b)], [(3, r)])
    assert api.calls == [("start",), ("send", a.ctypes.data, 32, 1, 0xAB, 0x77),
                         ("recv", r.ctypes.data, 12, 3, 0xAB, 0x77), ("end", 0xAB)]
    api.calls.clear()
    t(None, [(1, b)], [])
    assert api.calls == []  # nothing to move: no NCCL call at all


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in ``cupy`` module (no GPU): enough for the checks made before any work."""
    mod = types.ModuleType("cupy")
    runtime = SimpleNamespace(getDeviceCount=lambda: 0)
    mod.cuda = SimpleNamespace(runtime=runtime)
    mod.complex64 = np.complex64
    monkeypatch.setitem(sys.modules, "cupy", mod)

    class ndarray:
        __module__ = "cupy"

        def __init__(self, shape, dtype, device):
            self.shape, self.dtype = shape, np.dtype(dtype)
            self.device = SimpleNamespace(id=device)
            self.data = SimpleNamespace(ptr=0)
            self.__cuda_array_interface__ = {"shape": shape, "typestr": self.dtype.str,
                                             "data": (0, False), "version": 3}

    mod.ndarray = ndarray
    return mod


def test_gpu_operand_on_a_cpu_only_process_raises_before_any_work(started, fake_cupy):
    started(None)
    x = fake_cupy.ndarray((4, 4), np.complex64, 0)
    with pytest.raises(InvalidOperandError, match="operand must be a host array on a CPU-only"):
        dist.fft.fft(x, distribution=Slab.X)
    with pytest.raises(InvalidOperandError, match="^a must be a host array"):
        dist.linalg.advanced.matmul(x, x, distributions=[Slab.X, Slab.Y, Slab.X])


def test_gpu_operand_on_another_device_raises(started, fake_cupy):
    started(0)
    x = fake_cupy.ndarray((4, 4), np.complex64, 1)
    with pytest.raises(InvalidOperandError, match="operand must be on device 0 .* got device 1"):
        dist.fft.fft(x, distribution=Slab.X)
    with pytest.raises(InvalidOperandError, match="operand must be on device 0"):
        dist.distribution.redistribute(x, Slab.X, Slab.Y)
    y = fake_cupy.ndarray((4, 4), np.float32, 0)
    with pytest.raises(InvalidOperandError, match="one memory space"):
        dist.linalg.advanced.matmul(y, np.ones((4, 4), np.float32),
                                    distributions=[Slab.X, Slab.Y, Slab.X])


def test_symmetric_memory_on_the_gpu_checks_its_device(started, fake_cupy):
    started(0)
    with pytest.raises(CudaUnavailableError, match="device_id must name a CUDA device"):
        dist.allocate_symmetric_memory((2, 2), fake_cupy, dtype=np.complex64)
    with pytest.raises(InvalidOptionError, match="memory_space must be cuda for cupy"):
        dist.allocate_symmetric_memory((2, 2), fake_cupy, memory_space="cpu")
    with pytest.raises(InvalidOptionError, match="shape must be non-negative ints"):
        dist.allocate_symmetric_memory((2, -1), fake_cupy)
    dist.finalize()
    started(None)
    with pytest.raises(InvalidOptionError, match="device_id must be a non-negative int"):
        dist.allocate_symmetric_memory((2, 2), fake_cupy)
    dist.free_symmetric_memory(np.zeros(2), fake_cupy.ndarray((2,), np.float32, 0))


def test_context_holds_and_finalize_releases_the_communicator(started):
    ctx = started(None)
    assert ctx.nccl_comm is None and ctx.nvshmem_available is False
    closed = []
    ctx._gpu["nccl"] = SimpleNamespace(ptr=0xBEEF, close=lambda: closed.append(True))
    assert ctx.nccl_comm == 0xBEEF
    dist.finalize()
    assert closed == [True] and dist.get_context() is None


def test_nccl_backend_starts_at_initialize_only_with_a_gpu_everywhere(started, monkeypatch):
    made = []
    monkeypatch.setattr(_runtime, "communicator", lambda ctx: made.append(ctx.device_id))
    monkeypatch.setattr(_runtime, "_gpu_ready", lambda device_id: False)
    started(0, nranks=2, backends=["nccl"])
    assert made == [] and dist.get_context().nccl_comm is None
    dist.finalize()
    monkeypatch.setattr(_runtime, "_gpu_ready", lambda device_id: True)
    started(0, nranks=2, backends=["nccl"])
    assert made == [0]
    dist.finalize()
    started(0, nranks=1, backends=["nccl"])  # one process: NCCL is never needed
    assert made == [0]


class CpuTorch(packages.TorchAdapter):
    """torch's adapter on CPU tensors: no device to make current, a fixed current stream."""

    device_type = "cpu"

    def device_scope(self, device_id):
        return contextlib.nullcontext()

    def current_stream(self, device_id):
        return Stream(0x77)

    def stream_context(self, stream, device_id):
        return None


@pytest.fixture
def cpu_torch(monkeypatch):
    """The GPU plane's adapter of torch is :class:`CpuTorch` (CPU tensors stand for CUDA ones)."""
    torch = pytest.importorskip("torch")
    ad = CpuTorch()
    monkeypatch.setattr(_gpu, "adapter", lambda package: ad if package == "torch" else
                        packages.adapter(package))
    return torch


def test_gpu_plane_matrix_operations_go_through_the_adapter(cpu_torch):
    torch, gpu = cpu_torch, _gpu.GPU
    x = torch.arange(6.0).reshape(2, 3).to(torch.complex64) * (1 + 1j)
    y = gpu.op(x, True, True)
    assert not y.is_conj() and torch.equal(y, x.conj().T) and gpu.op(x, False, True) is x
    z = gpu.zeros_like_result(x, x, (2, 4))
    assert z.dtype == torch.complex64 and z.shape == (2, 4) and z.mT.is_contiguous()
    assert not z.any()
    f = gpu.fortran(x)
    assert f.mT.is_contiguous() and torch.equal(f, x)
    assert gpu.fortran(f).data_ptr() == f.data_ptr()  # already Fortran-ordered: no copy
    assert gpu.dtype_str(x) == "<c8" and gpu.dtype_str(x.real.to(torch.bfloat16)) == "bfloat16"
    assert gpu.zeros(x, (2,), np.float32).dtype == torch.float32
    assert gpu.fft_local("fft", x[:0], [0], (0, 3), np.complex128).dtype == torch.complex128


def test_gpu_exchange_on_one_process_needs_no_nccl(cpu_torch, started):
    from cuweave.distributed._backend import ExchangePlan
    from cuweave.distributed._distributions import Layout

    started(None)
    torch = cpu_torch
    layout = Layout.of(Slab.X, (5, 4), 1)
    plan = ExchangePlan(layout, Layout.of(Slab.Y, (5, 4), 1), 0)
    x = torch.arange(20.0).reshape(5, 4).T.contiguous().T  # Fortran-ordered: packed
    got = _gpu.GPU.exchange(Group(0, 1), plan, x)
    assert torch.equal(got, x) and got.is_contiguous()


def test_gpu_allreduce_is_one_nccl_sum_on_the_current_stream(cpu_torch, started, monkeypatch):
    torch = cpu_torch
    started(0, nranks=2)
    calls = []
    monkeypatch.setattr(_gpu, "communicator", lambda ctx: SimpleNamespace(ptr=0xC0))
    monkeypatch.setattr(nccl, "all_reduce", lambda *a: calls.append(a))
    x = torch.zeros(5, dtype=torch.bfloat16)
    _gpu.GPU.allreduce_sum(Group(0, 2), x)
    assert calls == [(x.data_ptr(), x.data_ptr(), 5, "bfloat16", 0xC0, 0x77)]
    _gpu.GPU.allreduce_sum(Group(0, 1), x)  # one process: nothing to sum
    assert len(calls) == 1


def test_all_reduce_binding_builds_the_arguments(monkeypatch):
    table = Recorder()
    monkeypatch.setattr(nccl, "library", lambda: table)
    for name, code in (("float16", 6), ("float32", 7), ("float64", 8), ("bfloat16", 9)):
        nccl.all_reduce(0x10, 0x10, 7, name, 0xC0, 0x5)
        assert table.calls[-1] == ("ncclAllReduce", (0x10, 0x10, 7, code, 0, 0xC0, 0x5))
    nccl.all_reduce(0x10, 0x20, 3, nccl.DataType.INT32, 0xC0, 0)
    assert table.calls[-1][1][3] == 2
    restype, argtypes = nccl.SIGNATURES["ncclAllReduce"]
    assert argtypes[2] is ctypes.c_size_t and len(argtypes) == 7
    with pytest.raises(InvalidOperandError, match=r"^dtype must be one of \['bfloat16', "
                                                  r"'float16', 'float32', 'float64'\] for "
                                                  r"ncclAllReduce, got 'complex64'"):
        nccl.all_reduce(0x10, 0x10, 7, "complex64", 0xC0, 0x5)
    failing = Recorder(status=2)
    monkeypatch.setattr(nccl, "library", lambda: failing)
    with pytest.raises(NcclError, match="ncclAllReduce failed with ncclSystemError"):
        nccl.all_reduce(0x10, 0x10, 7, "float32", 0xC0, 0x5)


def test_torch_bfloat16_keeps_its_name_when_ml_dtypes_registers_it_with_numpy():
    # With ml_dtypes imported (jax, or the GPU machine's image) np.dtype("bfloat16") is a 'V2'
    # type: the operand description must still say bfloat16 (it said 'void16' on the H200).
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    assert np.dtype("bfloat16").kind == "V"
    assert _gpu.dtype_str(torch.zeros(2, dtype=torch.bfloat16)) == "bfloat16"
    assert _gpu.dtype_str(torch.zeros(2, dtype=torch.float16)) == "<f2"
