"""dtype / compute type / scale type rules of the advanced matmul (validated at spec time)."""

from __future__ import annotations

from ..._bindings.library_types import ComputeType, CudaDataType
from ..._internal.errors import InvalidOperandError, InvalidOptionError
from ._checks import ignored

__all__ = ["SUPPORTED", "FP8", "resolve_types"]

FP8 = frozenset(["float8_e4m3fn", "float8_e5m2"])
SUPPORTED = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128",
             "float8_e4m3fn", "float8_e5m2")
_CT = ComputeType
_F32_FAST = (_CT.COMPUTE_32F_FAST_16F, _CT.COMPUTE_32F_FAST_16BF, _CT.COMPUTE_32F_FAST_TF32)
#: operand dtypes each compute type accepts (cuBLASLt's table)
ALLOWED = {
    _CT.COMPUTE_16F: {"float16"},
    _CT.COMPUTE_16F_PEDANTIC: {"float16"},
    _CT.COMPUTE_32F: {"float16", "bfloat16", "float32", "complex64", *FP8},
    _CT.COMPUTE_32F_PEDANTIC: {"float16", "bfloat16", "float32", "complex64"},
    **{ct: {"float32", "complex64"} for ct in _F32_FAST},
    _CT.COMPUTE_64F: {"float64", "complex128"},
    _CT.COMPUTE_64F_PEDANTIC: {"float64", "complex128"},
}


#: results wider than the operands (cuBLASLt's table: 16-bit A/B with 32F C/D, COMPUTE_32F);
#: nvmath-python takes the result type from ``options.result_type``, else from ``c``
WIDER_RESULT = {"float16": ("float16", "float32"), "bfloat16": ("bfloat16", "float32")}


def _scale_for(ct: ComputeType, complex_: bool) -> CudaDataType:
    if ct in (_CT.COMPUTE_16F, _CT.COMPUTE_16F_PEDANTIC):
        return CudaDataType.CUDA_R_16F
    if ct in (_CT.COMPUTE_64F, _CT.COMPUTE_64F_PEDANTIC):
        return CudaDataType.CUDA_C_64F if complex_ else CudaDataType.CUDA_R_64F
    return CudaDataType.CUDA_C_32F if complex_ else CudaDataType.CUDA_R_32F


def resolve_types(a: str, b: str, c: str | None, options, log=None) -> dict:
    """``{"a","b","c","d","c_layout","compute","scale"}`` for the operands and options.

    Raises :class:`InvalidOperandError` for unsupported or mismatched dtypes and
    :class:`InvalidOptionError` for compute/scale/result types that do not fit them. In place,
    the result is ``c`` itself: ``options.result_type`` is ignored (with a warning on ``log``),
    as nvmath-python does.
    """
    result_type = options.result_type
    if options.inplace and result_type is not None:
        if log is not None:
            ignored(log, "result_type", result_type)
        result_type = None
    for name, dt in (("a", a), ("b", b)):
        if dt not in SUPPORTED:
            raise InvalidOperandError(f"{name} dtype must be one of {list(SUPPORTED)}, got {dt!r}")
    fp8 = a in FP8
    if (b in FP8) != fp8 or (not fp8 and a != b):
        raise InvalidOperandError(
            f"b dtype must equal a's ({a!r}) (fp8 e4m3/e5m2 may be mixed), got {b!r}")
    if fp8:
        d = result_type or c or a
        if d not in ("float16", "bfloat16", "float32", *FP8):
            raise InvalidOptionError(
                f"result_type must be float16, bfloat16, float32 or an fp8 type for fp8 "
                f"operands, got {d!r}")
        if c is not None and c not in ("float16", "bfloat16", "float32"):
            raise InvalidOperandError(
                f"c dtype must be float16, bfloat16 or float32 for fp8 operands, got {c!r}")
        c_layout = c or ("float16" if d in FP8 else d)
    else:
        results = WIDER_RESULT.get(a, (a,))
        if result_type not in (None, *results):
            raise InvalidOptionError(
                f"result_type must be None or one of {list(results)} for {a} operands, got "
                f"{result_type!r}")
        d = result_type or c or a
        if c is not None and (c != d or c not in results):
            want = f"the result type ({d!r})" if result_type else f"one of {list(results)}"
            raise InvalidOperandError(f"c dtype must be {want} for {a} operands, got {c!r}")
        c_layout = d
    complex_ = a.startswith("complex")
    ct = options.compute_type
    if ct is None:
        ct = _CT.COMPUTE_64F if a in ("float64", "complex128") else _CT.COMPUTE_32F
    if ct not in ALLOWED or a not in ALLOWED[ct]:
        ok = sorted(c.name for c, dts in ALLOWED.items() if a in dts)
        raise InvalidOptionError(
            f"compute_type must be one of {ok} for {a} operands, got {ct.name}")
    if d != a and not fp8 and ct not in (_CT.COMPUTE_32F, _CT.COMPUTE_32F_PEDANTIC):
        raise InvalidOptionError(
            f"compute_type must be COMPUTE_32F or COMPUTE_32F_PEDANTIC for {a} operands with a "
            f"{d} result, got {ct.name}")
    scale = _scale_for(ct, complex_)
    if options.scale_type is not None and options.scale_type != scale:
        raise InvalidOptionError(
            f"scale_type must be {scale.name} for compute_type {ct.name} and {a} operands, got "
            f"{options.scale_type.name}")
    if (options.result_amax or options.fast_accumulation) and not fp8:
        raise InvalidOptionError(
            f"result_amax and fast_accumulation must be False for non-fp8 operands, got "
            f"result_amax={options.result_amax}, fast_accumulation={options.fast_accumulation}")
    if fp8 and options.result_amax and d not in FP8:
        raise InvalidOptionError(
            f"result_amax must be False unless result_type is an fp8 type (cuBLASLt computes "
            f"the amax of fp8 results only), got result_type={d!r}")
    if options.block_scaling:
        raise InvalidOptionError(
            "block_scaling must be False: block-scaled matmuls (MXFP8, NVFP4) need a GPU of "
            "compute capability >= 10.0 and are not supported by cuweave yet, got True")
    return {"a": a, "b": b, "c": c, "d": d, "c_layout": c_layout, "compute": ct,
            "scale": scale, "fp8": fp8}
