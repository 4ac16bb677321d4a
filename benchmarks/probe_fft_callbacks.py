"""Diagnostic: what cuFFT JIT callbacks cost, and where cuweave puts them.

Three tables, each timed round-robin (``harness.gpu_times_interleaved``), printed as Markdown
(committed as ``benchmarks/results/fft_callbacks_probe.md``):

1. 16384 transforms of 1024 complex64 points: no callback; the fused ``norm`` (NVRTC store
   callback); store callbacks written in Python and compiled by numba-cuda, both as numba's
   own C-ABI function (called out of line) and through cuweave's inlinable shim.
2. The fused ``norm="backward"`` inverse with the scale in the store vs the load callback,
   over the benchmark's shapes (which slot ``fft._cuda_plan._SCALE_SLOTS`` prefers).
3. Convolution by a filter spectrum: the filter in the forward's epilog or in the inverse's
   prolog (the ``1/n`` fused either way), against torch's and CuPy's fft → multiply → ifft.

    python benchmarks/probe_fft_callbacks.py      (GPU, torch, numba-cuda; CuPy optional)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402
from cases_fft import convolution_impls  # noqa: E402
from harness import gpu_times_interleaved, peer  # noqa: E402

import cuweave.fft as F  # noqa: E402
from cuweave.fft import _cuda_plan  # noqa: E402


def _table(title, rows, moved=None):
    print(f"\n### {title}\n")
    print("| implementation | µs |" + (" GB/s |" if moved else ""))
    print("|---|---:|" + ("---:|" if moved else ""))
    for name, ms in rows.items():
        gbps = f" {moved / (ms * 1e-3) / 1e9:.0f} |" if moved else ""
        print(f"| {name} | {ms * 1e3:.1f} |{gbps}", flush=True)


def _planned(x, axes=(1,), **plan_kw):
    f = F.FFT(x, axes=axes)
    f.plan(**plan_kw)
    return f.execute


def _numba_out_of_line(fn):
    """The callback as numba-cuda's own C-ABI function (what cuweave compiled before)."""
    from numba import cuda

    from cuweave.fft._callbacks import _signature, default_symbol

    code, _ = cuda.compile(fn, _signature("epilog", "complex64", "complex64"), device=True,
                           abi="c", output="ltoir",
                           cc=cuda.get_current_device().compute_capability,
                           abi_info={"abi_name": default_symbol("epilog", "complex64")})
    return code


def callback_costs():
    b, n = 16384, 1024
    nu = np.uint64(n)
    x = torch.randn(b, n, dtype=torch.complex64, device="cuda")
    h = torch.randn(n, dtype=torch.complex64, device="cuda")

    def ident(data_out, offset, element, user_info, reserved):
        data_out[offset] = element

    def conv(data_out, offset, element, user_info, reserved):
        data_out[offset] = element * user_info[offset % nu]

    impls = {
        "torch.fft.fft": lambda: torch.fft.fft(x),
        "torch.fft.ifft (scaled: a second pass)": lambda: torch.fft.ifft(x),
        "cuweave, no callback": _planned(x),
        'cuweave norm="ortho" (NVRTC store callback)': _planned(x, norm="ortho"),
    }
    for label, fn, data in [("identity", ident, 0), ("filter multiply", conv, h.data_ptr())]:
        impls[f"numba {label} epilog, numba's C ABI (called out of line)"] = _planned(
            x, epilog={"ltoir": _numba_out_of_line(fn), "data": data})
        impls[f"numba {label} epilog, cuweave's shim (inlined)"] = _planned(
            x, epilog={"ltoir": F.compile_epilog(fn, "complex64", "complex64"), "data": data})
    _table(f"1. Store callbacks, {b} transforms of {n} complex64 points",
           gpu_times_interleaved(impls, iters=50), moved=2 * x.numel() * 8)


def norm_slots():
    cases = [((16384, 1024), (1,)), ((1024, 16384), (1,)), ((64, 1 << 20), (1,)),
             ((4096, 4096), (0, 1)), ((256, 256, 256), (0, 1, 2))]
    keep = _cuda_plan._SCALE_SLOTS
    rows = {}
    try:
        for shape, axes in cases:
            x = torch.randn(*shape, dtype=torch.complex64, device="cuda")
            impls = {"no callback": _planned(x, axes)}
            for slots in (("epilog", "prolog"), ("prolog", "epilog")):
                _cuda_plan._SCALE_SLOTS = slots
                impls[f"scale in the {slots[0]}"] = _planned(x, axes, direction="inverse",
                                                             norm="backward")
            impls["torch (scaled)"] = lambda x=x, axes=axes: torch.fft.ifftn(x, dim=axes)
            label = "x".join(map(str, shape))
            for name, ms in gpu_times_interleaved(impls, iters=20).items():
                rows[f"{label}: {name}"] = ms
            del x, impls
            torch.cuda.empty_cache()
    finally:
        _cuda_plan._SCALE_SLOTS = keep
    _table('2. ifft(norm="backward"): the scale in the store vs the load callback', rows)


_CONV_LABELS = {
    "cuweave (filter in the forward's epilog)": "cuweave, filter in the forward's epilog",
    "cuweave (filter in the inverse's prolog)": "cuweave, filter in the inverse's prolog",
    "torch": "torch fft → multiply → ifft", "cupy": "CuPy fft → multiply → ifft"}


def _convolution_rows(b, n, cupy) -> dict:
    impls = convolution_impls(torch, cupy, b, n)
    return {f"{b}x{n}: {_CONV_LABELS[name]}": ms
            for name, ms in gpu_times_interleaved(impls, iters=20).items()}


def convolution():
    cupy = peer("cupy")
    rows = {}
    for b, n in ((256, 16384), (1024, 16384), (16384, 1024)):
        rows.update(_convolution_rows(b, n, cupy))
    _table("3. Convolution (function forms, as a user writes them)", rows)


if __name__ == "__main__":
    print(f"{torch.cuda.get_device_name()} — python benchmarks/probe_fft_callbacks.py")
    callback_costs()
    norm_slots()
    convolution()
