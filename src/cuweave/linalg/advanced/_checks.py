"""Argument checks and cache keys of :mod:`cuweave.linalg.advanced.matmul` (pure Python)."""

from __future__ import annotations

import numpy as np

from ..._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ._algorithm import Algorithm
from ._options import matrix_qualifiers_dtype

__all__ = ["alignment_error", "AlgorithmTypeError", "OperandPackageError",
           "IncompleteResetError", "signature_mismatch"]


class AlgorithmTypeError(InvalidOptionError, TypeError):
    """``algorithm``/``algorithms`` is not (a list of) :class:`Algorithm` objects."""


class OperandPackageError(InvalidOperandError, TypeError):
    """A reset operand comes from another array package than the planned one (nvmath raises
    ``TypeError`` there)."""


class IncompleteResetError(InvalidStateError, ValueError):
    """``reset_operands()`` after ``release_operands()`` without every required operand (nvmath
    raises ``ValueError`` there)."""


#: inputs that do not apply, ignored with a warning as nvmath-python ignores them: why
IGNORED = {"beta": "c is not given",
           "quantization_scales": "they only apply to fp8 operands",
           "epilog_inputs": "no epilog is given",
           "result_type": "the operation is in place (the result has c's dtype)"}


def ignored(log, name: str, value) -> None:
    """``None``, after warning on ``log`` that input ``name`` (``value``) is ignored."""
    shown = sorted(value) if isinstance(value, dict) else value
    log.warning("Matmul: %s=%r is ignored since %s", name, shown, IGNORED[name])


def _check_same_package(ops: dict) -> None:
    """The operands come from one array package (nvmath-python raises ``TypeError`` there,
    before looking at where they live)."""
    first = ops["a"].package
    for name, op in ops.items():
        if op.package != first:
            raise OperandPackageError(f"{name} must come from the same package as a "
                                      f"({first}), got {op.package}")


def _conj_flags(qualifiers, ops) -> tuple[bool, bool]:
    conj = [ops["a"].conj, ops["b"].conj]
    if qualifiers is not None:
        q = np.asarray(qualifiers)
        if q.dtype != matrix_qualifiers_dtype or q.shape not in ((2,), (3,)):
            raise InvalidOptionError(
                "qualifiers must be a length-3 array of matrix_qualifiers_dtype, got "
                f"{qualifiers!r}")
        if np.any(q["structure"] != 0):
            raise InvalidOptionError(f"qualifiers structure must be GENERAL (0), got "
                                     f"{q['structure'].tolist()}")
        if q.shape[0] == 3 and bool(q["is_conjugate"][2]):
            raise InvalidOptionError("qualifiers is_conjugate must be False for c, got True")
        conj = [conj[i] ^ bool(q["is_conjugate"][i]) for i in range(2)]
    return conj[0], conj[1]


_SIGNATURE_FIELDS = ("shape", "strides", "dtype", "package", "place", "conjugated")


def _signature(op) -> tuple:
    """What a reset operand must share with the planned one (:data:`_SIGNATURE_FIELDS`)."""
    return (op.shape, op.strides, op.dtype, op.package, op.place, op.conj)


def signature_mismatch(name: str, planned: tuple, got: tuple) -> InvalidOperandError:
    """The error for a reset operand ``name`` whose :func:`_signature` ``got`` differs from the
    ``planned`` one, naming each differing field."""
    diff = ", ".join(f"{field} {want!r} (got {have!r})" for field, want, have
                     in zip(_SIGNATURE_FIELDS, planned, got) if want != have)
    return InvalidOperandError(f"{name} must match the planned operand's {diff}")


def _scalar(value, default, name):
    if value is None:
        return default
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        value = value.item()  # a 0-d NumPy array or torch tensor, as nvmath-python takes
    if (isinstance(value, int | float | complex | np.number)
            and not isinstance(value, bool | np.bool_)):
        try:
            complex(value)
        except OverflowError:
            raise InvalidOperandError(f"{name} must be representable as a float64, got "
                                      f"{value!r}") from None
        return value
    raise InvalidOperandError(f"{name} must be a real or complex scalar, got {value!r}")


def lt_layout_ok(lt_spec, p) -> bool:
    """Whether the problem ``p`` meets the cuBLASLt-frame epilog's operand-layout restriction."""
    req = lt_spec.layout_requirement
    if req is None:
        return True
    from ..._bindings.cublaslt import Operation

    which, needs_n = req[:2]
    return (getattr(p, which).op == Operation.N) == needs_n


def _check_lt_layout(lt_spec, user_spec, p) -> None:
    """The epilog's operand-layout restriction (``EpilogSpec.layout_requirement``): checked on
    the cuBLASLt-frame epilog, worded for the user's epilog (BGRADA/BGRADB trade places when
    swapped)."""
    if lt_layout_ok(lt_spec, p):
        return
    from ..._internal.errors import UnsupportedLayoutError

    need, fix = user_spec.layout_requirement[2:]
    raise UnsupportedLayoutError(
        f"{need} for epilog {user_spec.name} on the GPU (a cuBLASLt restriction); pass {fix}",
        permutation=(1, 0))


def _check_algorithm(value, name="algorithm"):
    if value is not None and not isinstance(value, Algorithm):
        raise AlgorithmTypeError(
            f"{name} must be None or an Algorithm from Matmul.plan/algorithms, got {value!r}")
    return value


def alignment_error(name, have, need):
    return InvalidOperandError(
        f"{name} must be at least as aligned as the planned operand ({need} bytes), got a "
        f"pointer aligned to {have} bytes; plan again (or use a {need}-byte aligned array)")


_SCALE_NAMES = ("a", "b", "c", "d")


def check_scales(scales, place: tuple, fp8_result: bool, names=None) -> dict:
    """Per-tensor fp8 scales checked against the operands' memory space ``place``
    (``(device, device_id)`` of the operands), before any work.

    Returns ``{name: float or Operand}`` for the scales given: Python/NumPy scalars become
    floats; arrays are wrapped. cuBLASLt reads a scale through a *device* pointer, so a host
    pointer must never reach it: an array scale must live where the operands live (nvmath's
    rule). Host scales (with host operands) are read at execution and uploaded; device scales
    must be one float32 element on the operands' device (cuBLASLt's scale type for fp8).
    """
    from ..._internal.packages import wrap_operand

    out = {}
    for name in _SCALE_NAMES:
        v = getattr(scales, name)
        if v is None:
            continue
        if name == "d" and not fp8_result:
            raise InvalidOptionError(
                "quantization_scales.d must be None unless the result is fp8 (cuBLASLt scales "
                f"fp8 results only), got {v!r}")
        param = (names or {}).get(name) or f"quantization_scales.{name}"
        if isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool):
            out[name] = float(v)
            continue
        op = wrap_operand(v, param)
        where = "host memory" if place[0] == "cpu" else f"cuda:{place[1]}"
        got = "host memory" if op.device == "cpu" else f"cuda:{op.device_id}"
        if op.place != place:
            raise InvalidOperandError(
                f"{param} must be a scalar or a 1-element array in the operands' memory space "
                f"({where}), got an array in {got}")
        if op.dtype not in ("float16", "bfloat16", "float32", "float64"):
            raise InvalidOperandError(f"{param} must be a real floating-point scale, got dtype "
                                      f"{op.dtype}")
        if op.device != "cpu" and op.dtype != "float32":
            raise InvalidOperandError(f"{param} must be float32 on the device (cuBLASLt reads "
                                      f"fp8 scales as float32), got {op.dtype}")
        out[name] = op
    return out


def scale_value(scale) -> float:
    """The value of a checked host scale (a float or a host Operand), read now."""
    if isinstance(scale, float):
        return scale
    return float(np.asarray(scale.host_array(), np.float64).reshape(-1)[0])


AUX_SCALE = "aux_quantization_scale"


def split_aux_scale(epilog_inputs):
    """``(epilog_inputs without the aux scale, the aux scale or None)`` (nvmath passes the fp8
    aux output's scale in ``epilog_inputs["aux_quantization_scale"]``)."""
    if not isinstance(epilog_inputs, dict) or AUX_SCALE not in epilog_inputs:
        return epilog_inputs, None
    rest = {k: v for k, v in epilog_inputs.items() if k != AUX_SCALE}
    return (rest or None), epilog_inputs[AUX_SCALE]


def check_fp8_aux(prefs, spec, types) -> None:
    """cuBLASLt's rule for an aux output in an fp8 type (``EPILOGUE_AUX_DATA_TYPE``): e4m3
    ``a``, ``b`` and result, a float16 C and GELU_AUX(_BIAS); ``aux_amax`` (the aux output's
    amax, ``EPILOGUE_AUX_AMAX_POINTER``) only for such an output. Checked at plan time, before
    the heuristic (which otherwise answers INVALID_VALUE)."""
    epilog = prefs.epilog if prefs is not None else None
    aux_type = epilog.aux_type if epilog is not None else None
    if aux_type is not None and (spec.aux_output == "relu_aux" or spec.bgrad_output):
        raise InvalidOptionError(  # nvmath-python's rule: these outputs have a fixed type
            f"preferences.epilog.aux_type must be None for epilog {spec.name} (its "
            f"{spec.bgrad_output or spec.aux_output} output has a fixed type), got {aux_type!r}")
    narrow = aux_type is not None and str(aux_type).startswith("float8")
    if epilog is not None and epilog.aux_amax and not narrow:
        raise InvalidOptionError(
            "preferences.epilog.aux_amax must be False unless preferences.epilog.aux_type is "
            f"an fp8 type (cuBLASLt computes the amax of fp8 aux outputs), got aux_type="
            f"{aux_type!r}")
    if not narrow:
        return
    e4m3 = "float8_e4m3fn"
    fits = (aux_type == e4m3 and types["a"] == types["b"] == types["d"] == e4m3
            and types["c_layout"] == "float16" and spec.aux_output == "gelu_aux")
    if not fits:
        raise InvalidOptionError(
            f"preferences.epilog.aux_type must be {e4m3!r} only with float8_e4m3fn a, b and "
            "result, a float16 c (the default for an fp8 result without c) and the GELU_AUX or "
            f"GELU_AUX_BIAS epilog (cuBLASLt's rule for an fp8 aux output), got {aux_type!r} "
            f"with a={types['a']!r}, b={types['b']!r}, result={types['d']!r}, "
            f"c={types['c_layout']!r}, epilog {spec.name}")


def check_aux_scale(value, aux_type, place: tuple, required: bool):
    """The fp8 aux output's scale: given exactly when ``preferences.epilog.aux_type`` is an
    8-bit type (nvmath's rule); a Python/NumPy scalar (a float) or a 1-element array in the
    operands' memory space (an Operand). ``None`` when absent."""
    narrow = aux_type is not None and str(aux_type).startswith("float8")
    param = f"epilog_inputs[{AUX_SCALE!r}]"
    if value is None:
        if narrow and required:
            raise InvalidOperandError(
                f"{param} must be given when preferences.epilog.aux_type is {aux_type!r} (an "
                "fp8 aux output is scaled into its range), got None")
        return None
    if not narrow:
        raise InvalidOperandError(
            f"{param} must be given only when preferences.epilog.aux_type is an fp8 type, got "
            f"it with aux_type={aux_type!r}")
    from types import SimpleNamespace

    return check_scales(SimpleNamespace(a=value, b=None, c=None, d=None), place, False,
                        names={"a": param})["a"]
