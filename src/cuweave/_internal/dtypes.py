"""Canonical dtype names and host codecs for dtypes NumPy lacks (bfloat16, float8).

cuweave names every element type by a canonical string (NumPy's spelling where NumPy has the
type): ``"float16"``, ``"bfloat16"``, ``"float32"``, ``"float64"``, ``"complex64"``,
``"complex128"``, ``"float8_e4m3fn"``, ``"float8_e5m2"``, the integer types and ``"bool"``.
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidOperandError

__all__ = [
    "ITEMSIZE",
    "NUMPY_NATIVE",
    "is_complex",
    "real_dtype",
    "numpy_dtype",
    "to_float32",
    "from_float32",
    "canonical_name",
]

ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex32": 4, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
}

#: dtypes NumPy represents natively (others are stored raw: bfloat16 as uint16, fp8 as uint8)
NUMPY_NATIVE = frozenset(
    ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)
_RAW = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,
        "complex32": np.uint32}

_ALIASES = {"half": "float16", "float": "float32", "double": "float64",
            "cfloat": "complex64", "cdouble": "complex128", "bf16": "bfloat16",
            "float8_e4m3": "float8_e4m3fn"}


def canonical_name(dtype) -> str:
    """Canonical name of a NumPy/ml_dtypes dtype, torch dtype, or string; raises on unknown."""
    if isinstance(dtype, type) and issubclass(dtype, np.generic):
        dtype = np.dtype(dtype)
    if isinstance(dtype, str):
        name = dtype
    else:
        name = getattr(dtype, "name", None) or str(dtype)
    name = name.removeprefix("torch.")
    name = _ALIASES.get(name, name)
    if name not in ITEMSIZE:
        hint = ""
        if name.startswith("float4"):  # torch.float4_e2m1fn_x2: nvmath's NVFP4 operands
            hint = ("; packed FP4 (NVFP4) operands need block-scaled matmuls, which need a GPU "
                    "of compute capability >= 10.0 and are not supported by cuweave yet")
        raise InvalidOperandError(
            f"dtype must be one of {sorted(ITEMSIZE)}, got {dtype!r}{hint}"
        )
    return name


def is_complex(name: str) -> bool:
    return name.startswith("complex")


def real_dtype(name: str) -> str:
    """``complex64`` → ``float32`` etc.; real names map to themselves."""
    return {"complex32": "float16", "complex64": "float32", "complex128": "float64"}.get(name, name)


def numpy_dtype(name: str) -> np.dtype:
    """NumPy dtype storing ``name`` (ml_dtypes type if installed, else the raw integer type)."""
    if name in NUMPY_NATIVE:
        return np.dtype(name)
    try:
        import ml_dtypes  # optional: only if the user has it

        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError):
        return np.dtype(_RAW[name])


def _fp8_table(name: str) -> np.ndarray:
    """float32 value of each of the 256 codes of an fp8 format (OCP e4m3fn / e5m2)."""
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if name == "float8_e4m3fn":
        e, m, bias, mbits = (codes >> 3) & 0xF, codes & 0x7, 7, 3
    else:
        e, m, bias, mbits = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
    normal = (1.0 + m / 2.0**mbits) * np.exp2(e.astype(np.float64) - bias)
    sub = (m / 2.0**mbits) * 2.0 ** (1 - bias)
    val = sign * np.where(e == 0, sub, normal)
    if name == "float8_e4m3fn":
        val[(codes & 0x7F) == 0x7F] = np.nan
    else:
        top = e == 0x1F
        val[top & (m == 0)] = np.inf * sign[top & (m == 0)]
        val[top & (m != 0)] = np.nan
    return val.astype(np.float32)


_FP8_CACHE: dict[str, np.ndarray] = {}


def to_float32(x: np.ndarray, name: str) -> np.ndarray:
    """Decode a host array stored as ``numpy_dtype(name)`` into float32 (complex → complex64)."""
    if name in NUMPY_NATIVE:
        return x.astype(np.complex64 if is_complex(name) else np.float32, copy=False)
    raw = x.view(_RAW[name]) if x.dtype != _RAW[name] else x
    if name == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if name.startswith("float8"):
        table = _FP8_CACHE.get(name)
        if table is None:
            table = _FP8_CACHE[name] = _fp8_table(name)
        return table[raw]
    raise InvalidOperandError(f"dtype must be decodable on the host, got {name!r}")


def from_float32(x: np.ndarray, name: str, out: np.ndarray | None = None) -> np.ndarray:
    """Encode float32 values as ``name`` with round-to-nearest-even (into ``out`` if given)."""
    if name in NUMPY_NATIVE:
        res = x.astype(numpy_dtype(name), copy=False)
    elif name == "bfloat16":
        bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        rounded = bits + (0x7FFF + ((bits >> 16) & 1))
        res = np.where(np.isnan(x), np.uint32(0x7FC0 << 16), rounded)
        res = (res >> 16).astype(np.uint16).view(numpy_dtype(name))
    elif name.startswith("float8"):
        table = _FP8_CACHE.get(name)
        if table is None:
            table = _FP8_CACHE[name] = _fp8_table(name)
        finite = np.isfinite(table)
        codes = np.nonzero(finite & (np.arange(256) < 0x80))[0]
        vals = table[codes]
        order = np.argsort(vals)
        vals, codes = vals[order], codes[order]
        mag = np.minimum(np.abs(x), vals[-1])  # saturate (the cuBLASLt default for fp8 outputs)
        idx = np.clip(np.searchsorted(vals, mag), 1, len(vals) - 1)
        lo, hi = vals[idx - 1], vals[idx]
        pick_hi = (mag - lo > hi - mag) | ((mag - lo == hi - mag) & (codes[idx] % 2 == 0))
        code = np.where(pick_hi, codes[idx], codes[idx - 1]).astype(np.uint8)
        code = code | np.where(np.signbit(x), np.uint8(0x80), np.uint8(0))
        res = code.view(numpy_dtype(name)) if numpy_dtype(name).itemsize == 1 else code
    else:
        raise InvalidOperandError(f"dtype must be encodable on the host, got {name!r}")
    if out is not None:
        np.copyto(out, res.reshape(out.shape), casting="unsafe")
        return out
    return res
