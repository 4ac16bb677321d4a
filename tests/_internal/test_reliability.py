"""Regressions of the CPU fuzzer's findings (docs/fuzz-findings.md), each named by its id.

F01: a DLPack view with negative strides was read and written below its first element
(garbage results, writes outside the target, heap corruption). F02: memory its producer
exports as read-only (DLPack's READ_ONLY flag) was written in place. The others: conjugated
views (F05, F22), copies of planned objects (F07, F10), empty DLPack operands (F13), cached
in-place checks (F03), results too large to allocate (F09). Each check fails without its fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import cuweave.fft as F
import cuweave.linalg.advanced as la
from cuweave._internal.errors import InvalidOperandError
from cuweave._internal.packages import wrap_operand


class Producer:
    """A third-party array over a NumPy array, seen only through DLPack."""

    def __init__(self, array):
        self._a = array

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = {} if max_version is None else {"max_version": max_version}
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_negative_strides_are_read_from_the_right_addresses():
    x = (np.arange(8) + 1j)[::-1]
    np.testing.assert_allclose(F.fft(Producer(x), execution="cpu"), np.fft.fft(x), atol=1e-12)
    a = np.arange(15.0).reshape(3, 5)[::-1, ::-1]
    b = np.ones((5, 2))
    np.testing.assert_allclose(la.matmul(Producer(a), Producer(b), execution="cpu"), a @ b)
    view = wrap_operand(Producer(a), "a").host_array()
    np.testing.assert_array_equal(view, a)


def test_negative_stride_in_place_target_is_written_inside_only():
    buf = np.full(64 + 16, 0xA5, np.uint8)  # 8 guard bytes each side of a 64-byte target
    t = np.ndarray((4,), np.complex128, buffer=buf, offset=8 + 48, strides=(-16,))
    t[...] = np.arange(4) + 1j
    want = np.fft.fft(t.copy())
    F.fft(Producer(t), options={"inplace": True}, execution="cpu")
    guard = np.concatenate([buf[:8], buf[72:]])
    assert (guard == 0xA5).all()
    np.testing.assert_allclose(t, want, atol=1e-12)


def test_read_only_memory_is_never_an_in_place_target():
    data = np.ones(4, np.complex64).tobytes()  # immutable bytes
    x = np.frombuffer(data, np.complex64)
    with pytest.raises(InvalidOperandError, match="operand must be writable.*read-only"):
        F.fft(Producer(x), options={"inplace": True}, execution="cpu")
    assert data == np.ones(4, np.complex64).tobytes()
    c = np.frombuffer(np.zeros(4).tobytes(), np.float64).reshape(2, 2)
    one = Producer(np.ones((2, 2)))
    with pytest.raises(InvalidOperandError, match="c must be writable.*read-only"):
        la.matmul(one, one, c=Producer(c), beta=1.0, options={"inplace": True},
                  execution="cpu")
    assert c.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    # read-only operands are fine as inputs
    np.testing.assert_allclose(F.fft(Producer(x), execution="cpu"), np.fft.fft(x))


def test_torch_conjugate_views_are_refused_where_they_would_be_ignored():
    """Fuzz findings F05, F22: an in-place target or a matmul c with torch's lazy conjugation
    bit got conj(result) stored (or the target left unchanged), or conj(c) added."""
    torch = pytest.importorskip("torch")
    a = torch.randn(4, 4, dtype=torch.complex128)
    c = torch.randn(4, 4, dtype=torch.complex128).conj()
    with pytest.raises(InvalidOperandError, match="c must not carry torch's lazy conjugation"):
        la.matmul(a, a, c, beta=1.0, execution="cpu")
    with pytest.raises(InvalidOperandError, match="c must not carry torch's lazy conjugation"):
        la.matmul(a, a, c, beta=1.0, options={"inplace": True}, execution="cpu")
    x = torch.randn(8, dtype=torch.complex128).conj()
    for _ in range(2):  # a cached plan too
        with pytest.raises(InvalidOperandError, match="operand must not carry torch's lazy"):
            F.fft(x, options={"inplace": True}, execution="cpu")
    with pytest.raises(InvalidOperandError, match="operand must not carry torch's lazy"):
        F.FFT(x, options={"inplace": True}, execution="cpu")
    torch.testing.assert_close(F.fft(x, execution="cpu"), torch.fft.fft(x.resolve_conj()))
    resolved = c.resolve_conj()
    got = la.matmul(a, a, resolved, beta=1.0, execution="cpu")
    torch.testing.assert_close(got, a @ a + resolved)


def test_planned_objects_are_not_copied_and_freed_ones_take_no_values():
    """Fuzz findings F07 and F10: pickling or copying a planned object raised ctypes' own
    errors; ``Matmul.alpha`` was accepted after ``free()``."""
    import copy
    import pickle

    from cuweave._internal.errors import InvalidStateError
    from cuweave._internal.lifecycle import NotCopyableError

    f = F.FFT(np.ones(8, complex), execution="cpu")
    f.plan()
    m = la.Matmul(np.ones((2, 2)), np.ones((2, 2)), execution="cpu")
    for obj in (f, m):
        for how in (pickle.dumps, copy.deepcopy, copy.copy):
            with pytest.raises(NotCopyableError, match="cannot be pickled or copied") as info:
                how(obj)
            assert isinstance(info.value, TypeError)
    m.free()
    for name in ("alpha", "beta"):
        with pytest.raises(InvalidStateError, match=rf"Matmul\.{name}\(\) cannot be called "
                                                     "after free"):
            setattr(m, name, 2.0)
    f.free()


def test_empty_dlpack_operand_at_an_odd_address_gets_the_typed_error():
    """Fuzz finding F13: a size-0 DLPack operand whose address is not a multiple of its item
    size raised NumPy's untyped "buffer size must be a multiple of element size"."""
    a = np.ndarray((4, 0), np.float32, buffer=bytearray(18), offset=2)
    with pytest.raises(InvalidOperandError, match="must not have empty dimensions"):
        la.matmul(Producer(a), Producer(np.ones((0, 2), np.float32)), execution="cpu")


def test_cached_plan_checks_a_read_only_in_place_target_again():
    """Fuzz finding F03 (issue 33 item 11): a plan-cache hit skipped the in-place checks, so a
    read-only ``c`` was refused on the first call and written (or failed untyped) after."""
    frozen = np.frombuffer(np.zeros(4).tobytes(), np.float64).reshape(2, 2)
    for make in (lambda x: x, Producer):
        one = make(np.ones((2, 2)))
        inplace = {"beta": 1.0, "options": {"inplace": True}, "execution": "cpu"}
        la.matmul(one, one, c=make(np.zeros((2, 2))), **inplace)  # the plan is cached
        with pytest.raises(InvalidOperandError, match="c must be writable"):
            la.matmul(one, one, c=make(frozen), **inplace)
    assert frozen.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_results_too_large_to_allocate_are_a_typed_memory_error():
    """Fuzz finding F09: results built from zero-stride inputs that cannot be allocated raised
    NumPy's plain MemoryError; now a ResultTooLargeError (still a MemoryError) naming it."""
    import cuweave.tensor as T
    from cuweave._internal.errors import ResultTooLargeError

    def big(shape, dtype):
        return np.lib.stride_tricks.as_strided(np.zeros(1, dtype), shape, (0,) * len(shape))

    calls = (lambda: la.matmul(big((1 << 24, 1), np.float32), big((1, 1 << 24), np.float32),
                               execution="cpu"),
             lambda: T.binary_contraction("i,j->ij", big((1 << 24,), np.float32),
                                          big((1 << 24,), np.float32), execution="cpu"))
    for call in calls:
        with pytest.raises(ResultTooLargeError, match="must fit in memory") as info:
            call()
        assert isinstance(info.value, MemoryError)
