"""The cuFFT ctypes layer: declarations, status mapping, and raw calls on the GPU."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cuweave._bindings import cufft
from cuweave._internal.errors import CufftError


def test_enums_have_the_c_values():
    assert (cufft.CufftType.C2C, cufft.CufftType.R2C, cufft.CufftType.C2R) == (0x29, 0x2A, 0x2C)
    assert (cufft.CufftType.Z2Z, cufft.CufftType.D2Z, cufft.CufftType.Z2D) == (0x69, 0x6A, 0x6C)
    assert cufft.Direction.FORWARD == -1 and cufft.Direction.INVERSE == 1
    assert cufft.XtCallbackType.ST_COMPLEX == 4 and cufft.XtCallbackType.LD_REAL_DOUBLE == 3


def test_every_signature_is_declared():
    for name in ("cufftCreate", "cufftMakePlanMany64", "cufftXtMakePlanMany", "cufftXtExec",
                 "cufftSetStream", "cufftSetAutoAllocation", "cufftGetSize", "cufftSetWorkArea",
                 "cufftXtSetJITCallback", "cufftGetVersion", "cufftDestroy", "cufftExecC2C"):
        assert name in cufft._SIGNATURES
    assert len(cufft._SIGNATURES["cufftMakePlanMany64"]) == 12
    assert len(cufft._SIGNATURES["cufftXtMakePlanMany"]) == 14
    assert len(cufft._SIGNATURES["cufftXtSetJITCallback"]) == 6


def test_status_becomes_cufft_error():
    cufft.check(0, "cufftExecC2C")
    with pytest.raises(CufftError, match="CUFFT_INVALID_SIZE") as ei:
        cufft.check(8, "cufftMakePlanMany64")
    assert ei.value.status == 8 and ei.value.function == "cufftMakePlanMany64"


@pytest.mark.gpu
def test_raw_plan_and_exec():
    cupy = pytest.importorskip("cupy")
    assert cufft.get_version() >= 12000
    x = cupy.asarray(np.random.default_rng(0).standard_normal((4, 64)).astype(np.complex64))
    y = cupy.empty_like(x)
    h = cufft.create()
    try:
        cufft.set_auto_allocation(h, False)
        ws = cufft.make_plan_many64(h, 1, [64], [64], 1, 64, [64], 1, 64,
                                    cufft.CufftType.C2C, 4)
        assert ws == cufft.get_size(h)
        work = cupy.empty(max(ws, 1), dtype=cupy.uint8)
        cufft.set_work_area(h, work.data.ptr)
        cufft.set_stream(h, cupy.cuda.get_current_stream().ptr)
        cufft.xt_exec(h, x.data.ptr, y.data.ptr, cufft.Direction.FORWARD)
        np.testing.assert_allclose(y.get(), np.fft.fft(x.get(), axis=1), rtol=1e-4, atol=1e-4)
        raw = cufft.raw("cufftExecC2C")
        assert raw(h, ctypes.c_void_p(x.data.ptr), y.data.ptr, 1) == 0
    finally:
        cufft.destroy(h)
    h = cufft.create()
    try:
        with pytest.raises(CufftError):
            cufft.make_plan_many64(h, 1, [0], None, 1, 1, None, 1, 1, cufft.CufftType.C2C, 1)
    finally:
        cufft.destroy(h)
