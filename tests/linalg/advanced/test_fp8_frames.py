"""Mixed fp8 operands (e4m3 x e5m2) in both frames, on the CPU with cuBLASLt stubbed.

When the plan swaps the operands to give a row-major result, cuBLASLt's A is the user's
``b``: its layout must carry ``b``'s data type and ``A_SCALE_POINTER`` must point at ``b``'s
scale. With a == b in dtype (the only fp8 case the GPU tests once ran) a mix-up is
invisible, so these tests pair every operand pointer passed to ``cublasLtMatmul`` with the
data type of the layout passed beside it and with the scale pointer of its slot.
"""

from __future__ import annotations

import re

import pytest

from cuweave._bindings import cublaslt as lt
from cuweave._bindings.library_types import DATA_TYPE
from cuweave._internal.errors import InvalidOperandError, InvalidOptionError
from cuweave.linalg.advanced import Matmul, matmul

_A = lt.MatmulDescAttribute
# cublasLtMatmul's arguments: A pointer at 3, its layout at 4; B pointer at 5, its layout at 6
_SLOTS = ((3, 4, _A.A_SCALE_POINTER), (5, 6, _A.B_SCALE_POINTER))
_PAIRS = [("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn"),
          ("float8_e4m3fn", "float8_e4m3fn")]


def _last_pointer(gpu, attr):
    return [v for _, a, v in gpu.set_calls if a == int(attr)][-1]


def _check_frame(gpu, user):
    """Each lt operand's layout type and scale pointer are those of the user operand whose
    data pointer sits in its slot. ``user``: pointer -> (dtype, scale pointer)."""
    args = gpu.matmul_calls[-1]
    seen = set()
    for ptr_at, layout_at, scale_attr in _SLOTS:
        dtype, scale = user[args[ptr_at]]
        assert gpu.layouts[args[layout_at]][0] == int(DATA_TYPE[dtype])
        assert _last_pointer(gpu, scale_attr) == scale
        seen.add(args[ptr_at])
    assert seen == set(user)  # both user operands reached cuBLASLt


@pytest.mark.parametrize("a_dtype,b_dtype", _PAIRS)
@pytest.mark.parametrize("result", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
@pytest.mark.parametrize("a_order,b_order", [("C", "F"), ("F", "F"), ("C", "C"), ("F", "C")])
def test_lt_operands_carry_their_user_operand_dtype_and_scale(gpu, a_dtype, b_dtype, result,
                                                              a_order, b_order):
    a = gpu.tensor(64, 32, dtype=a_dtype, order=a_order)
    b = gpu.tensor(32, 16, dtype=b_dtype, order=b_order)
    sa, sb = gpu.tensor(1), gpu.tensor(1)  # device scales: their pointers reach cuBLASLt
    scales = {"a": sa, "b": sb}
    if result.startswith("float8"):
        scales["d"] = gpu.tensor(1)
    with Matmul(a, b, quantization_scales=scales, options={"result_type": result}) as mm:
        mm.plan()
        mm.execute()
    _check_frame(gpu, {a.data_ptr(): (a_dtype, sa.data_ptr()),
                       b.data_ptr(): (b_dtype, sb.data_ptr())})


@pytest.mark.parametrize("a_dtype,b_dtype", _PAIRS[:2])
def test_function_form_and_algorithm_ids_use_the_lt_frame(gpu, monkeypatch, a_dtype, b_dtype):
    """The issue's reproducer: a row-major a times a column-major b (a swapped frame)."""
    a = gpu.tensor(64, 32, dtype=a_dtype)
    b = gpu.tensor(32, 16, dtype=b_dtype, order="F")
    sa, sb = gpu.tensor(1), gpu.tensor(1)
    matmul(a, b, quantization_scales={"a": sa, "b": sb}, options={"result_type": "float32"})
    _check_frame(gpu, {a.data_ptr(): (a_dtype, sa.data_ptr()),
                       b.data_ptr(): (b_dtype, sb.data_ptr())})
    asked = []
    monkeypatch.setattr(lt, "algo_get_ids", lambda h, ct, st, ta, tb, tc, td, n:
                        asked.append((ta, tb)) or [1])
    with Matmul(a, b, quantization_scales={"a": sa, "b": sb},
                options={"result_type": "float32"}) as mm:
        mm.plan()
        mm.applicable_algorithm_ids()
        mm.execute()
    args = gpu.matmul_calls[-1]
    # the ids are asked for the types of the layouts the plan made for cuBLASLt's A and B
    assert asked[-1] == (gpu.layouts[args[4]][0], gpu.layouts[args[6]][0])


# ---- nvmath-python's rules for fp8 products, raised before any cuBLASLt call ---------------

_SCALE_RULES = [  # (scales, result type, the start of nvmath's message)
    (None, "float32", "Scales are required for narrow-precision (FP8 and lower) operations"),
    ({"a": 1.0}, "float32", "Scale for B is not specified"),
    ({"b": 1.0}, "float32", "Scale for A is not specified"),
    ({"a": 1.0, "b": 1.0}, "float8_e4m3fn", "Scale for D is not specified"),
    ({"a": 1.0, "b": 1.0, "d": 1.0}, "float32",
     "Quantization scaling is not supported for D when it is not a narrow-precision"),
    ({"a": 1.0, "b": 1.0, "c": 1.0}, "float32",
     "Quantization scaling is not supported for C when it is not a narrow-precision"),
    ({"a": 1.0}, "float32", "Scale for B is not specified"),
]


@pytest.mark.parametrize("scales,result,phrase", _SCALE_RULES)
def test_fp8_scales_are_required_as_nvmath_requires(gpu, scales, result, phrase):
    a = gpu.tensor(64, 32, dtype="float8_e4m3fn")
    b = gpu.tensor(32, 16, dtype="float8_e5m2", order="F")
    for call in (lambda: matmul(a, b, quantization_scales=scales,
                                options={"result_type": result}),
                 lambda: Matmul(a, b, quantization_scales=scales,
                                options={"result_type": result})):
        with pytest.raises(InvalidOptionError, match="^" + re.escape(phrase)) as info:
            call()
        assert isinstance(info.value, ValueError)
    assert not gpu.matmul_calls and not gpu.layouts  # nothing reached cuBLASLt


def test_result_amax_only_for_fp8_results(gpu):
    a = gpu.tensor(64, 32, dtype="float8_e4m3fn")
    b = gpu.tensor(32, 16, dtype="float8_e4m3fn", order="F")
    with pytest.raises(InvalidOptionError, match="^result_amax=True is allowed only for narrow"):
        matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0},
               options={"result_type": "bfloat16", "result_amax": True})
    x = gpu.tensor(8, 8)
    with pytest.raises(InvalidOptionError, match="^result_amax=True is allowed only for narrow"):
        matmul(x, x, options={"result_amax": True})


@pytest.mark.parametrize("m,n,k", [(17, 16, 16), (16, 24, 16), (16, 16, 8)])
def test_fp8_sizes_must_be_multiples_of_16(gpu, m, n, k):
    a = gpu.tensor(m, k, dtype="float8_e4m3fn")
    b = gpu.tensor(k, n, dtype="float8_e4m3fn", order="F")
    with pytest.raises(InvalidOperandError,
                       match=rf"^M={m} N={n} K={k} must be divisible by 16 for FP8 operations"):
        matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0})
    assert not gpu.layouts


@pytest.mark.parametrize("which", ["a", "b"])
def test_fp8_operands_must_be_16_byte_aligned(gpu, which):
    a = gpu.tensor(64, 32, dtype="float8_e4m3fn", offset=8 if which == "a" else 0)
    b = gpu.tensor(32, 16, dtype="float8_e4m3fn", order="F", offset=8 if which == "b" else 0)
    with pytest.raises(InvalidOperandError, match=rf"^For narrow-precision \(FP8 and lower\) "
                                                  rf"multiplication, operand {which.upper()} "
                                                  "should be aligned to 16 bytes"):
        matmul(a, b, quantization_scales={"a": 1.0, "b": 1.0, "d": 1.0})


def test_ignored_inputs_warn_and_alpha_must_fit_the_scale_type(gpu):
    from cuweave.linalg.advanced._spec import IgnoredInputWarning

    x = gpu.tensor(8, 8)
    with pytest.warns(IgnoredInputWarning, match="beta=2.0 is ignored"):
        matmul(x, x, beta=2.0)
    with pytest.warns(IgnoredInputWarning, match="epilog_inputs"):
        matmul(x, x, epilog_inputs={"bias": gpu.tensor(8)})
    with pytest.raises(InvalidOperandError, match="^The value provided for alpha 1e[+]300 is not "
                                                  "convertible to dtype 'float32'"):
        matmul(x, x, alpha=1e300)
