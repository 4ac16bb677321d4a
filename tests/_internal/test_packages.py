"""The package adapters (``_internal/packages.py``) with a recording stand-in for CuPy: per-device
current streams and results, made current only when another device is."""

from __future__ import annotations

import sys
import types

import pytest

from cuweave._internal import packages
from cuweave._internal.errors import InvalidOperandError


class _FakeCupy:
    """What the CuPy adapter touches: devices, per-device current streams, ``empty``."""

    def __init__(self):
        self.current = 0
        self.entered = []
        fake = self

        class Device:
            def __init__(self, i):
                self.id = i

            def __enter__(self):
                fake.entered.append(self.id)
                self.prev, fake.current = fake.current, self.id
                return self

            def __exit__(self, *exc):
                fake.current = self.prev

        class Array:
            def __init__(self, shape, dtype, device):
                self.shape, self.dtype, self.device_id = tuple(shape), dtype, device
                self.data = types.SimpleNamespace(ptr=0x1000 * (device + 1))

            def transpose(self, axes):
                return ("transposed", self, tuple(axes))

        self.cuda = types.SimpleNamespace(
            Device=Device,
            get_current_stream=lambda: types.SimpleNamespace(ptr=0x500 + fake.current),
            runtime=types.SimpleNamespace(getDevice=lambda: fake.current))
        self.empty = lambda shape, dtype: Array(shape, dtype, fake.current)


@pytest.fixture
def cupy(monkeypatch):
    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return fake


def test_cupy_current_stream_is_the_operands_devices(cupy):
    get = packages.CUPY.stream_getter(1)
    assert get() == 0x501 and cupy.entered == [1]  # device 0 current: 1 made current
    cupy.current = 1
    assert get() == 0x501 and cupy.entered == [1]  # already current: no switch
    assert packages.CUPY.stream_getter(0)() == 0x500


def test_cupy_results_are_made_on_the_operands_device(cupy):
    alloc = packages.CUPY.result_allocator((4, 6), "float32", None, 1)
    x, ptr = alloc(0)
    assert x.device_id == 1 and ptr == 0x2000 and x.shape == (4, 6) and cupy.entered == [1]
    cupy.current = 1
    x, _ = alloc(0)
    assert x.device_id == 1 and cupy.entered == [1]
    kind, base, axes = packages.CUPY.result_allocator((4, 6), "float32", (1, 0), 1)(0)[0]
    assert kind == "transposed" and base.shape == (6, 4) and axes == (1, 0)


def _stream_classes(cupy, modern: bool):
    """CuPy's stream classes: CuPy 14's (``Stream.from_external``, the CUDA stream protocol)
    or older ones (``ExternalStream`` only); each records what made it."""
    made = []

    class Stream:
        null = "null stream"

    def external(ptr, device_id=-1):
        made.append(("ExternalStream", ptr, device_id, cupy.current))
        return "external"

    def from_external(obj):
        made.append(("from_external", obj.__cuda_stream__(), cupy.current))
        return "from_external"

    if modern:
        Stream.from_external = staticmethod(from_external)
    cupy.cuda.Stream, cupy.cuda.ExternalStream = Stream, external
    return made


def test_cupy_14_streams_come_through_the_stream_protocol(cupy):
    """CuPy 14 deprecates ExternalStream: a stream handle goes to Stream.from_external as an
    object whose __cuda_stream__ is (0, handle), on the stream's device."""
    made = _stream_classes(cupy, modern=True)
    assert packages.CUPY.stream_context(0x777, 1) == "from_external"
    assert made == [("from_external", (0, 0x777), 1)]
    assert packages.CUPY.stream_context(0x501, 1) is None  # already current there
    assert packages.CUPY.stream_context(0, 1) == "null stream"
    assert len(made) == 1


def test_older_cupy_streams_come_through_external_stream(cupy):
    made = _stream_classes(cupy, modern=False)
    assert packages.CUPY.stream_context(0x777, 1) == "external"
    assert made == [("ExternalStream", 0x777, 1, 1)]


def test_dtypes_cupy_lacks_come_back_as_device_arrays(cupy, monkeypatch):
    made = []

    class Made:
        def __init__(self, shape, dtype, **kw):
            made.append((shape, dtype, kw["device_id"]))
            self.ptr = 0x9000

    from cuweave._internal import adapters

    monkeypatch.setattr(adapters, "DeviceArray", Made)  # where the base adapter makes them
    obj, ptr = packages.CUPY.result_allocator((2, 3), "bfloat16", None, 0)(0)
    assert isinstance(obj, Made) and ptr == 0x9000 and made == [((2, 3), "bfloat16", 0)]


def test_generic_producers_cannot_broadcast_or_scale():
    assert packages.TORCH.can_broadcast and packages.CUPY.can_broadcast
    assert not packages.GENERIC.can_broadcast and not packages.NUMPY.can_broadcast
    with pytest.raises(ValueError, match="norm must be None for generic operands"):
        packages.GENERIC.scale_(object(), 2.0, 0, 0)


def test_probe_reads_only_device_arrays_of_torch_and_cupy(cupy):
    assert packages.probe(3.0) is None
    fake_torch_object = type("Size", (), {"__module__": "torch"})()
    assert packages.probe(fake_torch_object) is None  # not a tensor: wrapping reports it
    with pytest.raises(InvalidOperandError, match="a must be"):
        packages.wrap_operand(fake_torch_object, "a")


# ---- streams: 0 is the package's default stream, never torch's ExternalStream(0) -------------
class _FakeTorchStreams:
    """torch.cuda as the torch adapter's stream operations see it: the current stream, the
    default one, ExternalStream (recorded) and the ``stream`` context."""

    def __init__(self, current=0):
        fake = self
        self.external, self.entered = [], []

        class Stream:
            def __init__(self, handle):
                self.cuda_stream = handle

        class Ctx:
            def __init__(self, s):
                self.s = s

            def __enter__(self):
                fake.entered.append(self.s.cuda_stream)

            def __exit__(self, *exc):
                return False

        def external(handle, device=None):
            fake.external.append(handle)
            return Stream(handle)

        self.cuda = types.SimpleNamespace(
            current_stream=lambda device=None: Stream(current),
            default_stream=lambda device=None: Stream(0), ExternalStream=external,
            stream=Ctx)
        # the raw current-stream accessor (a pointer, no Stream object)
        self._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device=None: current)
        self.device = lambda kind, index: (kind, index)


@pytest.mark.parametrize("current", [0, 0x77])
def test_torch_stream_ops_take_0_as_the_default_stream(monkeypatch, current):
    """torch's ExternalStream(0) is a stream of its own (its cuda_stream was not 0 on the
    H200, 2026-12-01): a dense copy queued there raced cuBLASLt's call on stream 0. Copies,
    broadcasts and scalings on stream 0 run on torch's default stream; on the current stream,
    in no context at all; on another stream, on that stream."""
    fake = _FakeTorchStreams(current)
    monkeypatch.setitem(sys.modules, "torch", fake)

    class T:
        is_cuda = True

        def expand(self, shape):
            return self

        def contiguous(self):
            return "copy"

        def copy_(self, src):
            self.copied = src

        def mul_(self, v):
            self.scaled = v

    t = T()
    for stream in (0, current, 0x99):
        fake.entered.clear()
        assert packages.TORCH.dense_copy(t, (2, 2), "C", stream, 0) == "copy"
        packages.TORCH.broadcast_into(t, t, (2, 2), stream, 0)
        packages.TORCH.scale_(t, 2.0, stream, 0)
        want = [] if stream == current else [stream] * 3
        assert fake.entered == want
    assert 0 not in fake.external and t.scaled == 2.0


def test_new_axis_of_an_unindexable_object_names_the_parameter():
    from cuweave._internal.errors import UnsupportedLayoutError

    with pytest.raises(UnsupportedLayoutError, match=r"^c must be a matrix or a 1-D array "
                                                     r"viewable as one .* shape \(M, 1\)"):
        packages.GENERIC.new_axis(object(), 1, "c")
    assert packages.NUMPY.new_axis(__import__("numpy").arange(3), 0, "c").shape == (1, 3)


# ---- blocks (cuweave.distributed's GPU plane) on host stand-ins -------------------------------
# torch CPU tensors stand for CUDA ones, NumPy arrays posing as CuPy's for CuPy arrays: the
# adapters' block operations run unchanged on them.
@pytest.fixture(params=["torch", "cupy"])
def blocks(request):
    """``(adapter, to_package, to_numpy)`` of one GPU package, on the host."""
    np = pytest.importorskip("numpy")
    if request.param == "torch":
        torch = pytest.importorskip("torch")
        ad = packages.TorchAdapter()
        ad.device_type = "cpu"
        yield ad, lambda x: torch.from_numpy(np.array(x, order="K")), lambda y: y.numpy()
        return
    from tests.distributed import _fake_cupy

    with _fake_cupy.installed():
        yield packages.CUPY, _fake_cupy.to_cupy, np.asarray


_INDICES = [  # per axis of a (5, 6, 4) array: a slice or positions
    (slice(1, 3), slice(0, 6), slice(0, 4)),  # rows of a C-ordered array: contiguous
    (slice(0, 5), slice(2, 5), slice(1, 3)),  # a strided box
    (slice(1, 4), [0, 2, 5], slice(0, 4)),
    ([4, 0], [1, 3, 4], [3, 1]),
]


@pytest.mark.parametrize("where", _INDICES)
def test_blocks_take_region_and_put_like_numpy(blocks, where):
    import numpy as np

    ad, to_pkg, to_np = blocks
    x = np.arange(120.0).reshape(5, 6, 4)
    idx = [i if isinstance(i, slice) else np.asarray(i, np.int64) for i in where]
    ix = np.ix_(*[np.arange(i.start, i.stop) if isinstance(i, slice) else i for i in idx])
    px = to_pkg(x)
    bi = ad.block_index(idx, px)
    got = ad.take(px, bi)
    assert np.array_equal(to_np(got), x[ix]) and to_np(got).flags.c_contiguous
    view = ad.region(px, bi)
    assert (view is not None) == (where is _INDICES[0])
    out = to_pkg(np.zeros_like(x))
    block = np.arange(x[ix].size, dtype=float).reshape(x[ix].shape) + 1000
    ad.put(out, ad.block_index(idx, out), to_pkg(block))
    want = np.zeros_like(x)
    want[ix] = block
    assert np.array_equal(to_np(out), want)
    if view is not None:  # a view of the array itself: received data lands in place
        ad.put(view, (slice(None),) * 3, to_pkg(block))
        assert np.array_equal(to_np(px)[ix], block)


def test_blocks_new_arrays_pointer_and_nbytes(blocks):
    import numpy as np

    ad, to_pkg, to_np = blocks
    like = to_pkg(np.ones((2, 3), np.complex64))
    e = ad.new_block(like, (4, 5))
    assert to_np(e).dtype == np.complex64 and tuple(e.shape) == (4, 5)
    z = ad.new_block(like, (4, 5), np.float64, order="F", zeros=True)
    zn = to_np(z)
    assert zn.dtype == np.float64 and zn.flags.f_contiguous and not zn.any()
    assert ad.nbytes(z) == 160 and ad.nbytes(like) == 48
    assert ad.pointer(like) == to_np(like).ctypes.data
    assert ad.device_of(like) in (None, 0)


def test_blocks_matrix_op_transposes_and_resolves_the_conjugate(blocks):
    import numpy as np

    ad, to_pkg, to_np = blocks
    x = (np.arange(6.0) * (1 + 1j)).reshape(2, 3).astype(np.complex64)
    px = to_pkg(x)
    assert ad.matrix_op(px, False, True) is px
    assert np.array_equal(to_np(ad.matrix_op(px, True, False)), x.T)
    y = ad.matrix_op(px, True, True)
    assert np.array_equal(to_np(y), x.conj().T)
    assert not getattr(y, "is_conj", lambda: False)()  # torch: resolved, not a lazy view


def test_torch_new_array_takes_numpy_dtypes_and_orders():
    torch = pytest.importorskip("torch")
    import numpy as np

    ad = packages.TorchAdapter()
    ad.device_type = "cpu"
    t = ad.new_array((3, 4), np.float32, None, order="F")
    assert t.dtype == torch.float32 and t.mT.is_contiguous() and t.shape == (3, 4)
    assert ad.new_array((2,), torch.bfloat16, None, zeros=True).dtype == torch.bfloat16
    with pytest.raises(InvalidOperandError, match="dtype must be supported by torch"):
        ad.new_array((2,), np.dtype("U3"), None)


@pytest.mark.parametrize("first", ["_torch", "_cupy", "_jax", "packages", "wrapping"])
def test_any_adapter_module_can_be_imported_first(first):
    """A fresh interpreter importing one adapter module first gets every adapter registered
    (torch's and CuPy's modules import packages.py, which imports them back)."""
    import subprocess

    code = (f"import cuweave._internal.{first}\n"
            "from cuweave._internal import packages as p\n"
            "from cuweave._internal.packages import TORCH, CupyAdapter\n"
            "assert p.TORCH is TORCH and isinstance(p.CUPY, CupyAdapter)\n"
            "assert p.ADAPTERS['torch'] is TORCH and p.ADAPTERS['cupy'] is p.CUPY\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]


def test_unknown_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="NOPE"):
        packages.NOPE  # noqa: B018


# ---- the function forms' pair probes and the run's result makers ------------------------------
@pytest.fixture
def cuda_tensors(monkeypatch):
    """torch CPU tensors posing as CUDA tensors of device 0."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    return torch


def _alignment(ptr):
    return min(256, ptr & -ptr) if ptr else 256


def test_pair_probe_of_torch_tensors_is_both_probes_in_one_key(cuda_tensors):
    torch = cuda_tensors
    a, b = torch.randn(8, 4), torch.randn(4, 6).t()
    probe = packages.pair_prober(type(a), type(b))
    assert packages.PAIR_PROBERS[torch.Tensor] is probe
    key, pa, pb = probe(a, b, "extra")
    (ma, ra), (mb, rb) = packages.probe(a), packages.probe(b)
    assert (pa, pb) == (ra, rb) == (a.data_ptr(), b.data_ptr())
    assert key == ma + (_alignment(pa),) + mb[1:] + (_alignment(pb), "extra")  # flat
    # every part of the metadata and the pointers' alignments tells keys apart
    for other in (torch.randn(8, 4, dtype=torch.float64), torch.randn(8, 5),
                  torch.randn(4, 8).t(), torch.randn(8, 5)[:, 1:]):
        assert probe(other, b, "extra")[0] != key
    assert probe(a, b, "other")[0] != key
    # lazily conjugated or negated tensors and CPU tensors are left to wrapping
    z = torch.randn(8, 4, dtype=torch.complex64)
    assert probe(z.conj(), z, None) is None and probe(z, z.conj(), None) is None
    assert probe(a, z.conj().imag, None) is None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.Tensor, "get_device", lambda self: -1)
        assert probe(a, b, None) is None


def test_pair_probe_of_mixed_or_unknown_types(cuda_tensors):
    torch = cuda_tensors
    a, w = torch.randn(8, 4), torch.nn.Parameter(torch.randn(4, 6), requires_grad=False)
    probe = packages.pair_prober(type(a), type(w))
    assert packages.PAIR_PROBERS[(type(a), type(w))] is probe
    key, pa, pw = probe(a, w, None)
    assert (pa, pw) == (a.data_ptr(), w.data_ptr())
    assert key[:5] == packages.probe(a)[0] and key[6:10] == packages.probe(w)[0][1:]
    assert packages.pair_prober(float, float)(1.0, 2.0, None) is None
    assert packages.pair_prober(type(a), float)(a, 2.0, None) is None
    # a tensor that requires gradients is left to wrapping (which warns: autograd is lost)
    w.requires_grad_(True)
    assert probe(a, w, None) is None


@pytest.mark.parametrize("ptr", [0, 1, 2, 6, 8, 96, 128, 256, 512, 0x7F0000000010,
                                 0x7F0000000100, 0x7F0000001000, 2**48 + 4])
def test_pair_probe_alignment_is_the_lowest_set_bit_up_to_256(ptr, monkeypatch):
    # a probe for a package-less type, so the generic pair probe's arithmetic is what runs
    monkeypatch.setitem(packages.PROBERS, _Ptr, lambda x: (("ptr",), x.ptr))
    monkeypatch.setattr(packages, "PAIR_PROBERS", {})
    key, _, _ = packages.pair_prober(_Ptr, _Ptr)(_Ptr(ptr), _Ptr(256), None)
    assert key[1] == _alignment(ptr)


class _Ptr:
    def __init__(self, ptr):
        self.ptr = ptr


def test_torch_result_maker_makes_the_allocators_layouts(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(packages.TORCH, "device_type", "cpu")
    for shape, perm in (((5, 3), None), ((5, 3), (1, 0)), ((2, 5, 3), (0, 2, 1))):
        new, pointer = packages.TORCH.result_maker(shape, "float32", perm, 0)
        x = new()
        y, _ = packages.TORCH.result_allocator(shape, "float32", perm, 0)(0)
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
        assert (x.shape, x.stride()) == (y.shape, y.stride())
        assert pointer(x) == x.data_ptr()
        assert new().data_ptr() != x.data_ptr()  # a new tensor each call
    assert packages.TORCH.result_maker((2, 2), "no_such_dtype", None, 0) is None
    assert packages.NUMPY.result_maker((2, 2), "float32", None, 0) is None


def test_alignment_table_is_the_lowest_set_bit_capped_at_256():
    from cuweave._internal.arrays import ALIGNMENT

    for ptr in [0, 1, 2, 6, 8, 96, 128, 256, 512, 1 << 20, (1 << 20) + 4, (1 << 40) + 48]:
        assert ALIGNMENT[ptr & 255] == (min(256, ptr & -ptr) if ptr else 256)
