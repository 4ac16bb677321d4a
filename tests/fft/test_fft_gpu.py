"""cuweave.fft on cuFFT: every package, layouts, in-place, norms (fused), callbacks, staging."""

from __future__ import annotations

import numpy as np
import pytest

import cuweave.fft as F
from cuweave._internal.errors import InvalidOperandError, UnsupportedLayoutError
from tests.references import COMPLEX_OF, rel_l2, rng_array, to_numpy
from tests.references import fft_reference as reference
from tests.references import fft_tol as tol

pytestmark = pytest.mark.gpu

CASES = {  # (shape, axes)
    "1d-pow2": ((256,), None),
    "1d-prime-batched": ((7, 97), (1,)),
    "1d-odd-axis0": ((45, 6), (0,)),
    "2d-even": ((32, 24), None),
    "2d-batched": ((3, 10, 15), (1, 2)),
    "3d": ((12, 9, 16), None),
    "3d-batched": ((2, 8, 6, 10), (1, 2, 3)),
}


def _device(x, package):
    if package == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray(x)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


@pytest.mark.parametrize("package", ["torch", "cupy"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_c2c_device(package, case, dtype):
    shape, axes = CASES[case]
    h = rng_array(shape, dtype)
    x = _device(h, package)
    ax = axes or tuple(range(len(shape)))
    for direction, fn in (("forward", F.fft), ("inverse", F.ifft)):
        y = fn(x, axes=axes)
        assert type(y).__module__.split(".")[0] == package
        assert rel_l2(to_numpy(y), reference(h, "C2C", direction, ax)) < tol(dtype, h.size)
    np.testing.assert_array_equal(to_numpy(x), h)


@pytest.mark.parametrize("package", ["torch", "cupy"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_r2c_c2r_device(package, case, dtype):
    shape, axes = CASES[case]
    h = rng_array(shape, dtype)
    x = _device(h, package)
    ax = axes or tuple(range(len(shape)))
    y = F.rfft(x, axes=axes)
    hy = to_numpy(y)
    assert hy.dtype == np.dtype(COMPLEX_OF[dtype])
    assert rel_l2(hy, reference(h, "R2C", "forward", ax)) < tol(dtype, h.size)
    parity = "odd" if shape[ax[-1]] % 2 else "even"
    z = F.irfft(y, axes=axes, options={"last_axis_parity": parity})
    assert rel_l2(to_numpy(z), reference(hy, "C2R", "inverse", ax, out_last=shape[ax[-1]])) \
        < tol(dtype, h.size)
    np.testing.assert_array_equal(to_numpy(y), hy)  # C2R must not clobber its input


@pytest.mark.parametrize("package", ["torch", "cupy"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 2, 3, 8, 17])
def test_r2c_of_a_view_not_aligned_to_its_complex_element(package, dtype, n):
    """cuFFT's R2C answers CUFFT_INVALID_VALUE for a real input at an odd element offset (H200
    2026-12-01): such a view is transformed from an aligned copy, the operand untouched."""
    h = rng_array((n + 3,), dtype)
    buf = _device(h, package)
    for _ in range(2):  # the second call: the function form's cached plan
        y = F.rfft(buf[1:1 + n])
        assert rel_l2(to_numpy(y), np.fft.rfft(h[1:1 + n].astype(np.float64))) < tol(dtype, n)
    with F.FFT(buf[1:1 + n]) as f:
        f.plan()
        y = f.execute()
        assert rel_l2(to_numpy(y), np.fft.rfft(h[1:1 + n].astype(np.float64))) < tol(dtype, n)
    np.testing.assert_array_equal(to_numpy(buf), h)


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_norm_fused(norm, dtype):
    torch = pytest.importorskip("torch")
    h = rng_array((16, 384), dtype)
    x = torch.from_numpy(h).cuda()
    for fn, npfn in ((F.fft, np.fft.fft), (F.ifft, np.fft.ifft)):
        y = fn(x, axes=(1,), norm=norm)
        assert rel_l2(to_numpy(y), npfn(h.astype(np.complex128), norm=norm)) < tol(dtype, 384)
    r = rng_array((16, 384), "float32" if dtype == "complex64" else "float64")
    yr = F.rfft(torch.from_numpy(r).cuda(), axes=(1,), norm=norm)
    assert rel_l2(to_numpy(yr), np.fft.rfft(r.astype(np.float64), norm=norm)) < tol(dtype, 384)
    zr = F.irfft(yr, axes=(1,), norm=norm)
    assert rel_l2(to_numpy(zr), np.fft.irfft(to_numpy(yr).astype(np.complex128), n=384,
                                             norm=norm)) < tol(dtype, 384)


@pytest.mark.parametrize("layout", ["F", "transposed", "strided", "natural"])
def test_strided_transposed_layouts(layout):
    cupy = pytest.importorskip("cupy")
    h = rng_array((12, 16, 5), "complex128")
    base = cupy.asarray(h)
    x, hx = {"F": (cupy.asfortranarray(base), h), "transposed": (base.transpose(2, 0, 1),
             h.transpose(2, 0, 1)), "strided": (base[::2, ::2], h[::2, ::2]),
             "natural": (cupy.asfortranarray(base), h)}[layout]
    opts = {"result_layout": "natural"} if layout == "natural" else None
    axes = (0, 1) if layout != "transposed" else (1, 2)
    y = F.fft(x, axes=axes, options=opts)
    assert rel_l2(to_numpy(y), reference(hx, "C2C", "forward", axes)) < 1e-13
    if layout == "natural":
        assert y.flags.f_contiguous
    if layout == "strided":  # strides 160 and 15 do not nest: cuFFT cannot express it
        with pytest.raises(UnsupportedLayoutError):
            F.fft(base[::2, 1::3], axes=(0, 1))


def test_unsupported_layout_suggests_permutation():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 6, 5, dtype=torch.complex64, device="cuda")
    with pytest.raises(UnsupportedLayoutError) as ei:
        F.fft(x, axes=(1,))
    perm = ei.value.permutation
    y = F.fft(x.permute(*perm).contiguous(), axes=(2,))
    want = np.fft.fft(x.cpu().numpy().astype(np.complex128), axis=1).transpose(perm)
    assert rel_l2(to_numpy(y), want) < 1e-5


def test_inplace_device():
    torch = pytest.importorskip("torch")
    h = rng_array((8, 64), "complex64")
    x = torch.from_numpy(h).cuda()
    y = F.fft(x, axes=(1,), options={"inplace": True})
    assert y is x
    assert rel_l2(to_numpy(x), reference(h, "C2C", "forward", (1,))) < 1e-5


@pytest.mark.parametrize("dtype", ["complex64", "float64"])
def test_host_operand_with_cuda_execution(dtype):
    h = rng_array((6, 40), dtype)
    transform = F.fft if dtype.startswith("complex") else F.rfft  # fft refuses real operands
    y = transform(h, axes=(1,), execution="cuda")
    assert isinstance(y, np.ndarray)
    kind = "C2C" if dtype.startswith("complex") else "R2C"
    assert rel_l2(y, reference(h, kind, "forward", (1,))) < tol(dtype, 40)
    hf = np.asfortranarray(rng_array((6, 40, 3), "complex128"))
    y = F.ifft(hf, axes=(0, 1), execution={"name": "cuda", "device_id": 0}, norm="backward")
    assert rel_l2(y, np.fft.ifftn(hf, axes=(0, 1))) < 1e-13
    x = rng_array((6, 40), "complex64")
    keep = x.copy()
    z = F.fft(x, axes=(1,), execution="cuda", options={"inplace": True})
    assert z is x and rel_l2(x, reference(keep, "C2C", "forward", (1,))) < 1e-5


def test_stateful_streams_workspace_and_reset():
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    h = rng_array((64, 1000), "complex64")
    x = torch.from_numpy(h).cuda()
    with F.FFT(x, axes=(1,), stream=s) as f:
        f.plan(stream=s)
        y = f.execute(stream=s)
        s.synchronize()
        assert rel_l2(to_numpy(y), reference(h, "C2C", "forward", (1,))) < 1e-5
        h2 = rng_array((64, 1000), "complex64", seed=5)
        f.reset_operand(torch.from_numpy(h2).cuda())
        y = f.execute(direction="inverse", release_workspace=True)
        assert rel_l2(to_numpy(y), reference(h2, "C2C", "inverse", (1,))) < 1e-5
        with pytest.raises(InvalidOperandError):
            f.reset_operand(torch.zeros(64, 1000, dtype=torch.complex128, device="cuda"))
        assert f.get_output_layout() == ((64, 1000), (1000, 1))


def test_half_precision_torch():
    torch = pytest.importorskip("torch")
    h = rng_array((4, 256), "complex64")
    x = torch.from_numpy(h).cuda().to(torch.complex32)
    y = F.fft(x, axes=(1,))
    assert y.dtype == torch.complex32
    hx = x.to(torch.complex64).cpu().numpy()
    assert rel_l2(y.to(torch.complex64).cpu().numpy(), reference(hx, "C2C", "forward", (1,))) \
        < 3e-3


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_callbacks_c2c(dtype):
    torch = pytest.importorskip("torch")

    def prolog(data_in, offset, user_info, reserved):
        return data_in[offset] * user_info[offset]

    def epilog(data_out, offset, element, user_info, reserved):
        data_out[offset] = element * user_info[offset]

    h = rng_array((8, 128), dtype)
    w = rng_array((8, 128), dtype, seed=9)
    x, tw = torch.from_numpy(h).cuda(), torch.from_numpy(w).cuda()
    pro = F.compile_prolog(prolog, dtype, dtype)
    epi = F.compile_epilog(epilog, dtype, dtype)
    y = F.fft(x, axes=(1,), prolog={"ltoir": pro, "data": tw.data_ptr()})
    assert rel_l2(to_numpy(y), np.fft.fft(h.astype(np.complex128) * w, axis=1)) < tol(dtype, 128)
    y = F.fft(x, axes=(1,), epilog=F.DeviceCallable(ltoir=epi, data=tw.data_ptr()))
    assert rel_l2(to_numpy(y), np.fft.fft(h.astype(np.complex128), axis=1) * w) < tol(dtype, 128)
    # norm folded into the user's epilog
    y = F.ifft(x, axes=(1,), norm="backward", epilog={"ltoir": epi, "data": tw.data_ptr()})
    assert rel_l2(to_numpy(y), np.fft.ifft(h.astype(np.complex128), axis=1) * w) < tol(dtype,
                                                                                        128)


def test_callbacks_real():
    torch = pytest.importorskip("torch")

    def square(data_in, offset, user_info, reserved):
        v = data_in[offset]
        return v * v

    def shift(data_out, offset, element, user_info, reserved):
        data_out[offset] = element + user_info[0]

    h = rng_array((4, 100), "float32")
    x = torch.from_numpy(h).cuda()
    y = F.rfft(x, axes=(1,), prolog={"ltoir": F.compile_prolog(square, "float32", "float32")})
    assert rel_l2(to_numpy(y), np.fft.rfft(h.astype(np.float64) ** 2, axis=1)) < 1e-5
    c = torch.tensor([2.5], device="cuda")
    z = F.irfft(y, axes=(1,), epilog={"ltoir": F.compile_epilog(shift, "float32", "float32"),
                                      "data": c.data_ptr()})
    want = np.fft.irfft(to_numpy(y).astype(np.complex128), n=100, axis=1, norm="forward") + 2.5
    assert rel_l2(to_numpy(z), want) < 1e-5


_PRECISION = {"single": ("float32", "complex64"), "double": ("float64", "complex128")}


def _weighted_load(data_in, offset, user_info, reserved):
    return data_in[offset] * user_info[offset]


def _weighted_store(data_out, offset, element, user_info, reserved):
    data_out[offset] = element * user_info[offset]


@pytest.mark.parametrize("norm", [None, "ortho"])  # ortho: the scale in the free slot, or folded
@pytest.mark.parametrize("precision", sorted(_PRECISION))
@pytest.mark.parametrize("fft_type", ["C2C", "R2C", "C2R"])
@pytest.mark.parametrize("kind", ["prolog", "epilog", "both"])
def test_callbacks_every_kind_precision_and_type(kind, fft_type, precision, norm):
    """numba callbacks (weights by flat offset) in every slot, both precisions, every type."""
    torch = pytest.importorskip("torch")
    real, cplx = _PRECISION[precision]
    if fft_type == "C2C":
        h, fn, direction, out_shape = rng_array((6, 64), cplx), F.fft, "forward", (6, 64)
    elif fft_type == "R2C":
        h, fn, direction, out_shape = rng_array((6, 64), real), F.rfft, "forward", (6, 33)
    else:  # a Hermitian-consistent input (DC and Nyquist real), kept so by real weights
        h = np.fft.rfft(rng_array((6, 64), "float64"), axis=1).astype(cplx)
        fn, direction, out_shape = F.irfft, "inverse", (6, 64)
    in_dt, out_dt = str(h.dtype), {"C2C": cplx, "R2C": cplx, "C2R": real}[fft_type]
    w_in = rng_array(h.shape, "float64", seed=9).astype(in_dt)
    w_out = rng_array(out_shape, "float64", seed=11).astype(out_dt)
    t_in, t_out = torch.from_numpy(w_in).cuda(), torch.from_numpy(w_out).cuda()
    kw = {}
    if kind in ("prolog", "both"):
        kw["prolog"] = {"ltoir": F.compile_prolog(_weighted_load, in_dt, in_dt),
                        "data": t_in.data_ptr()}
    if kind in ("epilog", "both"):
        kw["epilog"] = {"ltoir": F.compile_epilog(_weighted_store, out_dt, out_dt),
                        "data": t_out.data_ptr()}
    y = fn(torch.from_numpy(h).cuda(), axes=(1,), norm=norm, **kw)
    assert tuple(y.shape) == out_shape and str(y.dtype) == f"torch.{out_dt}"
    src = h.astype(np.complex128 if h.dtype.kind == "c" else np.float64)
    if "prolog" in kw:
        src = src * w_in
    want = reference(src, fft_type, direction, (1,), norm=norm, out_last=64)
    if "epilog" in kw:
        want = want * w_out
    assert rel_l2(to_numpy(y), want) < 4 * tol(cplx, 64)


def _busy(torch, stream):
    """Queue a few ms of work on ``stream`` so that unordered reuse across streams would race."""
    with torch.cuda.stream(stream):
        a = torch.randn(2048, 2048, device="cuda")
        for _ in range(8):
            a = a @ a
            a /= a.norm()


@pytest.mark.parametrize("kind", ["bluestein-c2c", "c2r"])
def test_alternating_streams_share_buffers_in_order(kind):
    torch = pytest.importorskip("torch")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 4099  # a prime: Bluestein plans need a work area
    if kind == "c2r":  # Hermitian spectra of real signals of length 2 * n
        hs = [np.fft.rfft(rng_array((16, 2 * n), "float64", seed=i), axis=1).astype(np.complex64)
              for i in range(6)]
    else:
        hs = [rng_array((16, n), "complex64", seed=i) for i in range(6)]
    opts = {"fft_type": "C2R"} if kind == "c2r" else None
    x0 = torch.from_numpy(hs[0]).cuda()
    with F.FFT(x0, axes=(1,), options=opts) as f:
        f.plan()
        assert kind == "c2r" or f.workspace_size > 0
        ys = []
        for i, h in enumerate(hs):
            s = (s1, s2)[i % 2]
            x = torch.from_numpy(h).cuda()
            torch.cuda.current_stream().synchronize()
            _busy(torch, s)
            f.reset_operand(x)
            ys.append((f.execute(stream=s, release_workspace=(i == 3)), x))
        torch.cuda.synchronize()
    for (y, x), h in zip(ys, hs):
        if kind == "c2r":
            ref = reference(h, "C2R", "inverse", (1,), out_last=2 * n)
        else:
            ref = reference(h, "C2C", "forward", (1,))
        assert rel_l2(to_numpy(y), ref) < 1e-4
        np.testing.assert_array_equal(to_numpy(x), h)  # C2R never overwrites its input


def test_function_form_on_current_streams_alternating():
    torch = pytest.importorskip("torch")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 2 * 2053  # the half-length complex transform is a prime: a work area
    hs = [rng_array((8, n), "float32", seed=i) for i in range(4)]
    xs = [torch.from_numpy(h).cuda() for h in hs]
    torch.cuda.synchronize()
    ys = []
    for i, x in enumerate(xs):
        s = (s1, s2)[i % 2]
        _busy(torch, s)
        with torch.cuda.stream(s):
            ys.append(F.irfft(F.rfft(x, axes=(1,)), axes=(1,)))
    torch.cuda.synchronize()
    for y, h in zip(ys, hs):
        assert rel_l2(to_numpy(y), n * h.astype(np.float64)) < 1e-4


def test_function_form_forgets_a_destroyed_explicit_stream():
    from cuda.core import Device

    dev = Device(0)
    dev.set_current()
    h = rng_array((8, 4099), "complex64")
    for _ in range(2):  # the second round reuses the cached plan
        s = dev.create_stream()
        y1 = F.fft(h, axes=(1,), execution="cuda", stream=s)
        s.close()
        y2 = F.fft(h, axes=(1,), execution="cuda")  # must not touch the closed stream
        ref = reference(h, "C2C", "forward", (1,))
        assert rel_l2(y1, ref) < 1e-4 and rel_l2(y2, ref) < 1e-4


@pytest.mark.multi_gpu
def test_device_is_made_current_for_each_execute():
    torch = pytest.importorskip("torch")
    h = rng_array((4, 256), "complex64")
    for dev, other in ((1, 0), (0, 1)):
        x = torch.from_numpy(h).to(f"cuda:{dev}")
        with torch.cuda.device(other):
            ys = [F.fft(x, axes=(1,)) for _ in range(3)]  # general path, then the hot one
        for y in ys:
            assert y.device.index == dev
            assert rel_l2(to_numpy(y), reference(h, "C2C", "forward", (1,))) < 1e-5


# ---- nvmath-python 1.0 behaviours (issues 10 and 11) ------------------------------------------
@pytest.mark.parametrize("package", ["torch", "cupy"])
@pytest.mark.parametrize("kind", ["C2C", "R2C", "C2R", "C2C-inplace", "C2C-inplace-strided"])
def test_device_operand_with_cpu_execution(package, kind):
    """Copied to the host, transformed there, the result back on the operand's device."""
    fft_type = kind.split("-")[0]
    dtype = "float32" if fft_type == "R2C" else "complex64"
    h = rng_array((6, 20), dtype)
    base = _device(h, package)
    x = base[:, ::2] if kind.endswith("strided") else base
    src = to_numpy(x).copy()
    opts = {"inplace": True} if "inplace" in kind else {}
    fn = {"C2C": F.fft, "R2C": F.rfft, "C2R": F.irfft}[fft_type]
    y = fn(x, axes=(1,), execution={"name": "cpu", "num_threads": 2}, options=opts)
    assert type(y).__module__.split(".")[0] == package
    assert (y.device.index if package == "torch" else y.device.id) == 0
    direction = "inverse" if fft_type == "C2R" else "forward"
    want = reference(src, fft_type, direction, (1,), out_last=2 * (src.shape[1] - 1))
    assert rel_l2(to_numpy(y), want) < tol("complex64", 20)
    if "inplace" in kind:
        assert y is x
        if kind.endswith("strided"):  # the elements between the view's stay as they were
            np.testing.assert_array_equal(to_numpy(base)[:, 1::2], h[:, 1::2])
    else:
        np.testing.assert_array_equal(to_numpy(base), h)


def test_device_operand_with_cpu_execution_stateful():
    torch = pytest.importorskip("torch")
    h = rng_array((4, 32), "complex128")
    with F.FFT(torch.from_numpy(h).cuda(), axes=(1,), execution="cpu") as f:
        f.plan()
        y = f.execute()
        assert y.is_cuda and rel_l2(to_numpy(y), reference(h, "C2C", "forward", (1,))) < 1e-12
        h2 = rng_array((4, 32), "complex128", seed=3)
        f.reset_operand(torch.from_numpy(h2).cuda())
        y = f.execute(direction="inverse")
        assert rel_l2(to_numpy(y), reference(h2, "C2C", "inverse", (1,))) < 1e-12


@pytest.mark.parametrize("inplace", [False, True])
def test_host_operand_in_an_unexpressible_order_runs_on_cuda(inplace):
    """(4, 6, 5) over axis 1 in C order: the batch axes do not collapse; the staged copy is laid
    out so that they do."""
    h = rng_array((4, 6, 5), "complex64")
    x = h.copy()
    y = F.fft(x, axes=(1,), execution="cuda", options={"inplace": inplace})
    assert (y is x) == inplace and y.shape == (4, 6, 5)
    assert rel_l2(y, reference(h, "C2C", "forward", (1,))) < 1e-5
    r = rng_array((4, 6, 5), "float64")
    z = F.rfft(r, axes=(1,), execution="cuda")
    assert rel_l2(z, reference(r, "R2C", "forward", (1,))) < 1e-13


def test_reset_operand_with_rearranged_batch_axes_device():
    torch = pytest.importorskip("torch")
    a, b = rng_array((2, 3, 64), "complex64"), rng_array((3, 2, 64), "complex64", seed=2)
    assert F.FFT.create_key(torch.from_numpy(a).cuda(), axes=(2,)) == \
        F.FFT.create_key(torch.from_numpy(b).cuda(), axes=(2,))
    with F.FFT(torch.from_numpy(a).cuda(), axes=(2,)) as f:
        f.plan()
        f.execute()
        f.reset_operand(torch.from_numpy(b).cuda())
        y = f.execute()
        assert tuple(y.shape) == (3, 2, 64)
        assert rel_l2(to_numpy(y), reference(b, "C2C", "forward", (2,))) < 1e-5


def test_inplace_on_a_self_overlapping_device_view_is_refused():
    torch = pytest.importorskip("torch")
    base = torch.from_numpy(rng_array((64,), "complex64")).cuda()
    keep = to_numpy(base).copy()
    for strides in [(0, 1), (1, 1), (2, 1)]:
        view = base.as_strided((4, 8), strides)
        with pytest.raises(InvalidOperandError, match="operand must not overlap itself"):
            F.fft(view, axes=(1,), options={"inplace": True})
    np.testing.assert_array_equal(to_numpy(base), keep)


def test_estimate_workspace_size_matches_the_plan():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rng_array((64, 4099), "complex64")).cuda()  # prime: needs a workspace
    key = F.FFT.create_key_from_metadata((64, 4099), "complex64", "cuda", axes=(1,))
    assert key == F.FFT.create_key(x, axes=(1,))
    with F.FFT(x, axes=(1,)) as f:
        f.plan()
        assert f.get_key() == key
        planned = f.workspace_size
    assert F.estimate_workspace_size(key) == planned
    assert F.estimate_workspace_size(key, technique="refined", handle=1) == planned
    host = F.FFT.create_key_from_metadata((64, 4099), "complex64", "cpu", axes=(1,),
                                          execution="cuda")
    assert F.estimate_workspace_size(host) == planned
