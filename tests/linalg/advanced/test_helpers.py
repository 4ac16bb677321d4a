"""cuweave.linalg.advanced.helpers.matmul: block-scale layouts and FP4 packing (CPU torch)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cuweave._internal.errors import InvalidOperandError  # noqa: E402
from cuweave.linalg.advanced import helpers  # noqa: E402
from cuweave.linalg.advanced.helpers.matmul import (  # noqa: E402
    BlockScalingFormat,
    apply_mxfp8_scale,
    create_mxfp8_scale,
    expand_block_scale,
    get_block_scale_offset,
    invert_mxfp8_scale,
    quantize_to_fp4,
    to_block_scale,
    unpack_fp4,
)

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def interleave_reference(scales2d: np.ndarray) -> np.ndarray:
    """cuBLAS's layout written as reshapes: each 128x4 tile is a [32][4][4] array indexed
    (row % 32, row // 32, column); tiles in row-major order over (row tile, column tile)."""
    outer, blocks = scales2d.shape
    t = scales2d.reshape(outer // 128, 4, 32, blocks // 4, 4)  # rt, r//32, r%32, ct, c
    return t.transpose(0, 3, 2, 1, 4).reshape(-1)


# ------------------------------------------------------------------ offsets and layouts
def test_documented_nvfp4_offsets():
    a = (128, 128)
    assert get_block_scale_offset((5, 2), a, BlockScalingFormat.NVFP4, axis=-1) == 82
    assert get_block_scale_offset((5, 5), a, "NVFP4", axis=-1) == 593


@pytest.mark.parametrize("fmt,block", [("MXFP8", 32), ("NVFP4", 16)])
@pytest.mark.parametrize("axis", [-1, -2])
def test_to_block_scale_matches_the_cublas_layout(fmt, block, axis):
    rng = np.random.default_rng(3)
    outer, inner = 256, 8 * block
    shape = (3, outer, inner) if axis == -1 else (3, inner, outer)
    g_scale = (3, outer, inner // block) if axis == -1 else (3, inner // block, outer)
    nd = rng.integers(0, 255, g_scale, dtype=np.uint8)
    flat = to_block_scale(torch.from_numpy(nd), shape, fmt, axis=axis).numpy()
    for b in range(3):
        m = nd[b] if axis == -1 else nd[b].T  # (outer, blocks)
        per = m.size
        np.testing.assert_array_equal(flat[b * per:(b + 1) * per], interleave_reference(m))
    # offsets agree with the copy, elementwise and batched
    idx = tuple(torch.from_numpy(i) for i in np.indices(g_scale))
    offs = get_block_scale_offset(idx, shape, fmt, axis=axis)
    np.testing.assert_array_equal(flat[offs.numpy()], nd)
    assert sorted(offs.reshape(-1).tolist()) == list(range(nd.size))
    assert get_block_scale_offset((2, 7, 3), shape, fmt, axis=axis) == int(offs[2, 7, 3])


def test_expand_block_scale_inverts_to_block_scale():
    rng = np.random.default_rng(4)
    nd = torch.from_numpy(rng.integers(100, 150, (128, 4), dtype=np.uint8))
    flat = to_block_scale(nd, (128, 128), "MXFP8", axis=-1)
    exp = expand_block_scale(flat, (128, 128), "MXFP8", axis=-1)
    assert exp.dtype == torch.uint8 and exp.shape == (128, 128)
    torch.testing.assert_close(exp, nd.repeat_interleave(32, dim=-1))
    f32 = expand_block_scale(flat, (128, 128), "MXFP8", axis=-1, output_dtype=torch.float32)
    torch.testing.assert_close(f32, torch.exp2(exp.double() - 127).float())
    with pytest.raises(InvalidOperandError, match="output_dtype"):
        expand_block_scale(flat, (128, 128), "MXFP8", axis=-1, output_dtype=torch.float16)


def test_nvfp4_scales_expand_as_e4m3():
    vals = torch.tensor([0.5, 1.0, 448.0, 2.0 ** -9]).to(torch.float8_e4m3fn)
    nd = vals.repeat(128 * 4 // 4).reshape(128, 4)
    flat = to_block_scale(nd, (128, 64), BlockScalingFormat.NVFP4, axis=-1)
    small = expand_block_scale(flat, (128, 64), "NVFP4", axis=-1)
    assert small.dtype == torch.float8_e4m3fn
    f64 = expand_block_scale(flat, (128, 64), "NVFP4", axis=-1, output_dtype=torch.float64)
    torch.testing.assert_close(f64[0, ::16], vals.double())


def test_axis_is_inferred_from_an_operands_layout():
    a = torch.zeros(128, 256).to(torch.float8_e4m3fn)  # row-major: blocked along -1
    b = torch.zeros(256, 128).to(torch.float8_e4m3fn).T.contiguous().T  # column-major
    assert create_mxfp8_scale(a, 0).numel() == 128 * 8
    assert get_block_scale_offset((0, 1), a, "MXFP8") == get_block_scale_offset(
        (0, 1), (128, 256), "MXFP8", axis=-1)
    assert get_block_scale_offset((1, 0), b, "MXFP8") == get_block_scale_offset(
        (1, 0), (256, 128), "MXFP8", axis=-2)
    packed = quantize_to_fp4(torch.zeros(128, 128), axis=-1)  # logical shape is unpacked
    assert get_block_scale_offset((3, 7), packed, "NVFP4") == 3 * 16 + 7 % 4 + 512


# ------------------------------------------------------------------ MXFP8 scales
def test_create_invert_and_apply_mxfp8_scales():
    x = torch.full((128, 128), 3.0).to(torch.float8_e4m3fn)
    s = create_mxfp8_scale(x, 4)
    assert s.dtype == torch.uint8 and s.shape == (128 * 4,) and bool((s == 131).all())
    y = apply_mxfp8_scale(x, s)
    assert y.dtype == torch.float16 and bool((y == 48.0).all())
    back = apply_mxfp8_scale(y.to(torch.float8_e5m2), invert_mxfp8_scale(s))
    assert bool((back == 3.0).all())
    big = apply_mxfp8_scale(x, create_mxfp8_scale(x, 100))
    assert big.dtype == torch.float32 and float(big[0, 0]) == 3.0 * 2.0 ** 100
    huge = apply_mxfp8_scale(x, create_mxfp8_scale(x, 127))  # 3 * 2**127 > float32's max
    assert huge.dtype == torch.float64 and float(huge[0, 0]) == 3.0 * 2.0 ** 127
    with pytest.raises(InvalidOperandError, match="output_dtype torch.float32 cannot hold"):
        apply_mxfp8_scale(x, create_mxfp8_scale(x, 127), output_dtype=torch.float32)
    assert bool(apply_mxfp8_scale(x, create_mxfp8_scale(x, 128)).isnan().all())  # 255: NaN
    inv = invert_mxfp8_scale(torch.tensor([0, 1, 127, 200, 254, 255], dtype=torch.uint8))
    assert inv.tolist() == [254, 253, 127, 54, 0, 255]


# ------------------------------------------------------------------ FP4
def test_fp4_codes_round_to_nearest_even_and_saturate():
    every = torch.tensor(FP4 + [-v for v in FP4])
    assert unpack_fp4(quantize_to_fp4(every, -1), -1).tolist() == every.tolist()
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -5.0])
    assert unpack_fp4(quantize_to_fp4(ties, -1), -1).tolist() == \
        [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, -4.0]
    sat = torch.tensor([7.0, -100.0, float("inf"), 1e-3])
    assert unpack_fp4(quantize_to_fp4(sat, -1), -1).tolist() == [6.0, -6.0, 6.0, 0.0]
    raw = quantize_to_fp4(torch.tensor([0.5, 1.0]), -1).view(torch.uint8)
    assert raw.tolist() == [0x21]  # the first value in the low nibble


@pytest.mark.parametrize("axis", [-1, -2])
def test_fp4_random_values_are_nearest_and_pack_along_axis(axis):
    rng = np.random.default_rng(5)
    x = torch.from_numpy((rng.standard_normal((2, 6, 8)) * 3).astype(np.float32))
    q = quantize_to_fp4(x, axis)
    shape = list(x.shape)
    shape[axis] //= 2
    assert q.dtype == torch.float4_e2m1fn_x2 and list(q.shape) == shape
    assert q.stride(axis) == 1  # the packed axis is the contiguous one
    got = unpack_fp4(q, axis).numpy()
    table = np.array(FP4)
    mag = np.minimum(np.abs(x.numpy()), 6.0)
    best = table[np.abs(mag[..., None] - table).argmin(-1)]  # no ties in random data
    np.testing.assert_array_equal(got, np.copysign(best, x.numpy()))


# ------------------------------------------------------------------ bad input
def test_bad_inputs_name_the_parameter():
    ok = torch.zeros(128, 4, dtype=torch.uint8)
    with pytest.raises(InvalidOperandError, match="block_scaling_format must be one of"):
        to_block_scale(ok, (128, 128), "MXFP4", axis=-1)
    with pytest.raises(InvalidOperandError, match="axis must be -1 or -2"):
        to_block_scale(ok, (128, 128), "MXFP8", axis=0)
    with pytest.raises(InvalidOperandError, match="axis must be -1 or -2 when"):
        get_block_scale_offset((0, 0), (128, 128), "MXFP8")
    with pytest.raises(InvalidOperandError, match="divisible by 128"):
        get_block_scale_offset((0, 0), (100, 128), "MXFP8", axis=-1)
    with pytest.raises(InvalidOperandError, match="scale_tensor must have shape"):
        to_block_scale(ok[:64], (128, 128), "MXFP8", axis=-1)
    with pytest.raises(TypeError, match="scale_tensor must have dtype torch.uint8"):
        to_block_scale(ok.float(), (128, 128), "MXFP8", axis=-1)
    with pytest.raises(InvalidOperandError, match="block_scaling_format must be MXFP8"):
        get_block_scale_offset((0, 0), torch.zeros(128, 128).to(torch.float8_e4m3fn), "NVFP4")
    with pytest.raises(InvalidOperandError, match="index must be a tuple of 2"):
        get_block_scale_offset((0,), (128, 128), "MXFP8", axis=-1)
    with pytest.raises(InvalidOperandError, match=r"index\[1\] must be in \[0, 4\)"):
        get_block_scale_offset((0, 4), (128, 128), "MXFP8", axis=-1)
    with pytest.raises(InvalidOperandError, match="exponent must be an int"):
        create_mxfp8_scale(torch.zeros(128, 128), 129)
    with pytest.raises(InvalidOperandError, match="x must be a torch.Tensor"):
        create_mxfp8_scale(np.zeros((128, 128)), 0)
    with pytest.raises(InvalidOperandError, match="even extent"):
        quantize_to_fp4(torch.zeros(3, 3), -1)
    with pytest.raises(InvalidOperandError, match="NaN"):
        quantize_to_fp4(torch.tensor([float("nan"), 0.0]), -1)
    with pytest.raises(TypeError, match="x must have dtype torch.float32"):
        quantize_to_fp4(torch.zeros(4, dtype=torch.float64), -1)
    with pytest.raises(InvalidOperandError, match="scales_1d must be a 1-D tensor of 512"):
        expand_block_scale(ok.reshape(-1)[:100], (128, 128), "MXFP8", axis=-1)


def test_helpers_import_no_torch_until_called():
    import subprocess
    import sys

    code = ("import sys, cuweave.linalg.advanced.helpers.matmul as m; "
            "print('torch' in sys.modules, m.BlockScalingFormat.MXFP8)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "MXFP8"]
    assert helpers.matmul.BlockScalingFormat("NVFP4") is BlockScalingFormat.NVFP4


def test_module_examples_run():
    import doctest

    res = doctest.testmod(helpers.matmul, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 0 and res.failed == 0
