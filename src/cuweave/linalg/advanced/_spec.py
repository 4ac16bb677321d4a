"""What a matrix product is before it is planned: its arguments checked, and the :class:`Spec`.

The argument checks (scalars, scales, qualifiers, signatures of reset operands, the dtype and
compute type rules) come first; the :class:`Spec` at the end.

A :class:`Spec` is made once from the first operands (``Matmul(a, b, c, ...)`` or a function-form
call that missed the plan cache): their package and memory space, the execution space, the
dtypes and compute type, conjugation, and the layouts they are computed on (:mod:`._fit`). It
never changes after; the plan (:mod:`._plan`) is made from it, and every later operand is
checked against it. It is also where a stream argument is resolved, for every path.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..._bindings.library_types import ComputeType, CudaDataType
from ..._internal.arrays import alignment, check_same_place
from ..._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ..._internal.options import ExecutionCPU, coerce_options, resolve_execution
from ..._internal.overlap import check_inplace_target
from ..._internal.packages import adapter, resolve_stream, wrap_operand
from ._algorithm import Algorithm
from ._fit import fit_layouts
from ._options import MatmulQuantizationScales, matrix_qualifiers_dtype

__all__ = ["Spec", "resolve_types", "ignored", "AUX_SCALE", "split_aux_scale", "scale_value",
           "check_fp8_aux", "alignment_error", "signature_mismatch", "AlgorithmTypeError",
           "OperandPackageError", "IncompleteResetError", "SUPPORTED", "FP8"]


# ---- argument checks -------------------------------------------------------------------------
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


class IgnoredInputWarning(UserWarning):
    """An argument that does not apply to the call was ignored (nvmath-python only logs it;
    cuweave also warns, so that it is seen without configuring logging)."""


def ignored(log, name: str, value) -> None:
    """``None``, after warning on ``log`` and as a Python warning that input ``name``
    (``value``) is ignored."""
    shown = sorted(value) if isinstance(value, dict) else value
    log.warning("Matmul: %s=%r is ignored since %s", name, shown, IGNORED[name])
    warnings.warn(f"Matmul: {name}={shown!r} is ignored since {IGNORED[name]}",
                  IgnoredInputWarning, stacklevel=4)


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
    c = ops.get("c")
    if c is not None and c.conj:  # cuBLASLt has no conjugation of C: it would read memory
        raise InvalidOperandError(
            "c must not carry torch's lazy conjugation bit (cuBLASLt reads C as it lies in "
            "memory, so the result would add conj(c)), got a conjugated view; pass "
            "c.resolve_conj()")
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
        _check_placed(name, v, fp8_result)
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


def _check_placed(name: str, value, fp8_result: bool) -> None:
    """A scale of ``d`` only for an fp8 result; never of ``c`` (never fp8 here: a float16,
    bfloat16 or float32 addend)."""
    if name in ("c", "d") and (name == "c" or not fp8_result):
        raise InvalidOptionError(
            f"Quantization scaling is not supported for {name.upper()} when it is not a "
            f"narrow-precision (FP8 and lower) type: quantization_scales.{name} must be None"
            + (" unless the result is fp8" if name == "d" else "") + f", got {value!r}")


def require_scales(scales, fp8_result: bool) -> None:
    """nvmath-python's rule for fp8 operands, at construction: the scales of ``a`` and ``b``
    (and ``d`` for an fp8 result) must be given; a scale of ``d`` for a wider result, or of
    ``c``, is refused. Checked in nvmath's order (the misplaced scales first)."""
    if scales is None:
        raise InvalidOptionError(
            "Scales are required for narrow-precision (FP8 and lower) operations: "
            "quantization_scales must give the scales of a and b" +
            (" and d" if fp8_result else "") + ", got None")
    for name in ("d", "c"):
        if getattr(scales, name) is not None:
            _check_placed(name, getattr(scales, name), fp8_result)
    for name in ("a", "b", "d") if fp8_result else ("a", "b"):
        if getattr(scales, name) is None:
            raise InvalidOptionError(
                f"Scale for {name.upper()} is not specified: quantization_scales.{name} must "
                "be given for fp8 operands" + (" with an fp8 result" if name == "d" else "") +
                ", got None")


def check_result_amax(types, options) -> None:
    """``options.result_amax`` only for an fp8 result, ``fast_accumulation`` only for fp8
    operands (checked after the scales, as nvmath-python does)."""
    if options.result_amax and types["d"] not in FP8:
        raise InvalidOptionError(
            "result_amax=True is allowed only for narrow-precision (FP8 and lower) results: "
            "cuBLASLt computes the amax of fp8 results only, got result type "
            f"{types['d']!r}")
    if options.fast_accumulation and not types["fp8"]:
        raise InvalidOptionError(
            "fast_accumulation must be False for operands other than fp8, got True with "
            f"{types['a']} operands")


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


# ---- dtypes, compute and scale types ------------------------------------------------------
#: the NumPy dtype of each scale type (the type cuBLASLt reads alpha and beta in)
SCALE_DTYPES = {CudaDataType.CUDA_R_16F: "float16", CudaDataType.CUDA_R_32F: "float32",
                CudaDataType.CUDA_R_64F: "float64", CudaDataType.CUDA_C_32F: "complex64",
                CudaDataType.CUDA_C_64F: "complex128"}
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
            f"Unsupported combination of dtypes for operands A {a} and B {b}: b dtype must "
            f"equal a's ({a!r}) (fp8 e4m3/e5m2 may be mixed), got {b!r}")
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
    if options.block_scaling:
        raise InvalidOptionError(
            "block_scaling must be False: block-scaled matmuls (MXFP8, NVFP4) need a GPU of "
            "compute capability >= 10.0 and are not supported by cuweave yet, got True")
    return {"a": a, "b": b, "c": c, "d": d, "c_layout": c_layout, "compute": ct,
            "scale": scale, "fp8": fp8}


# ---- the spec ------------------------------------------------------------------------------
class Spec:
    """The validated, fixed part of one matrix product (see the module docstring).

    Attributes are read by the plan and the run; nothing writes them after ``__init__``.
    """

    def __init__(self, ops: dict, qualifiers, options, execution, log):
        self.options = options
        self.log = log
        # what the operands' records tell first (package, conjugation, types), then where
        # they live and how they are laid out
        _check_same_package(ops)
        conj = _conj_flags(qualifiers, ops)
        c = ops.get("c")
        self.types = resolve_types(ops["a"].dtype, ops["b"].dtype,
                                   c.dtype if c is not None else None, options, log=log)
        self.complex = self.types["a"].startswith("complex")
        self.conj = conj if self.complex else (False, False)  # conjugating reals: a no-op
        self.fp8_result = self.types["d"] in ("float8_e4m3fn", "float8_e5m2")
        self.package = ops["a"].package
        self.adapter = adapter(self.package)
        self.ab_shapes = (ops["a"].shape, ops["b"].shape)
        if c is not None:
            ops["c"] = c = self.matrix_c(c)
        device, device_id, _ = check_same_place(ops)
        self.host = device == "cpu"  # the operands live in host memory
        self.place = ops["a"].place
        #: what a reset operand must share with the planned one (see signature_mismatch)
        self.signatures = {k: (op.shape, op.strides, op.dtype, op.package, op.place, op.conj)
                           for k, op in ops.items()}
        #: the adapter's pointer reader of arrays its records hold as they are (the unchecked
        #: reset's fast path, device operands only)
        self.plain_pointer = None if self.host else getattr(self.adapter, "plain_pointer",
                                                            None)
        self.space = resolve_execution(
            execution, operand_device=device, operand_device_id=device_id,
            host_default="cuda", default_device_id=options.device_id)
        self.on_cpu = isinstance(self.space, ExecutionCPU)
        self.device_id = None if self.on_cpu else self.space.device_id
        if options.inplace and c is not None:
            check_inplace_target(c, "c")
        #: how each operand is computed on, and the problem of those layouts (no epilog yet)
        self.fit = fit_layouts(ops, host=self.host,
                               can_copy=not self.on_cpu and self.adapter.can_copy,
                               conj=self.conj, inplace=options.inplace, fp8=self.types["fp8"],
                               log=log)
        if self.types["fp8"] and not self.on_cpu:
            self._check_fp8_problem(ops)

    def _check_fp8_problem(self, ops) -> None:
        """cuBLASLt's fp8 kernels need M, N and K divisible by 16 and operands aligned to 16
        bytes (nvmath-python's rule, checked at construction; the CPU has neither need)."""
        p = self.fit.problem
        m, n, k = p.user_m, p.user_n, p.k
        if m % 16 or n % 16 or k % 16:
            raise InvalidOperandError(
                f"M={m} N={n} K={k} must be divisible by 16 for FP8 operations (cuBLASLt's fp8 "
                "kernels; execution='cpu' takes any size)")
        if self.host:
            return  # staged into aligned device buffers
        for name in ("a", "b", "c"):
            op = ops.get(name)
            if op is not None and op.ptr % 16:
                raise InvalidOperandError(
                    f"For narrow-precision (FP8 and lower) multiplication, operand "
                    f"{name.upper()} should be aligned to 16 bytes: {name} starts at an address "
                    f"aligned to {alignment(op.ptr)} bytes; pass an aligned array (a copy)")

    @property
    def execution_space(self) -> str:
        return "cpu" if self.on_cpu else f"cuda:{self.device_id}"

    def stream(self, stream):
        """``stream`` (any accepted stream object) as a :class:`Stream` of the operands'
        package, validated on the CPU too: the one place a stream argument is resolved."""
        return resolve_stream(stream, package=self.package, device_id=self.device_id or 0)

    def matrix_c(self, c):
        """A 1-D ``c`` is taken only where the result is a vector of its length (``a`` or
        ``b`` 1-D): it is then the result's shape, read as that vector's matrix. For matrix
        results nvmath-python 1.0 refuses a 1-D ``c`` (NumPy would add ``(N,)`` to every row,
        older nvmath added ``(M,)`` to every column: for square results the two disagree)."""
        if len(c.shape) != 1 or self.options.inplace:
            return c
        a_shape, b_shape = self.ab_shapes
        if len(a_shape) >= 2 and len(b_shape) >= 2:
            raise InvalidOperandError(
                f"c must be at least 2-D for a matrix result ((M, 1) adds a column to every "
                f"column, (M, N) is the whole matrix), got shape {tuple(c.shape)!r}")
        row = len(a_shape) == 1 and len(b_shape) >= 2
        want = b_shape[-1] if row else (a_shape[-2] if len(a_shape) >= 2 else 1)
        if c.shape[0] != want:
            raise InvalidOperandError(
                f"c shape must be the result's, ({want},), got {tuple(c.shape)!r}")
        view = self.adapter.new_axis(c.obj, 0 if row else 1, "c")
        return wrap_operand(view, "c")

    def scalars(self, alpha, beta, c_given: bool) -> tuple:
        """``(alpha, beta)`` of a call, checked: ``beta`` with ``c`` only (ignored with a
        warning without it, as nvmath-python), real for real operands."""
        if c_given and beta is None:
            raise InvalidOperandError("beta must be given when c is given, got None")
        if not c_given and beta is not None:
            beta = ignored(self.log, "beta", beta)
        alpha, beta = _scalar(alpha, 1.0, "alpha"), _scalar(beta, 0.0, "beta")
        if not self.complex and (isinstance(alpha, complex | np.complexfloating) or
                                 isinstance(beta, complex | np.complexfloating)):
            raise InvalidOperandError(f"alpha and beta must be real for real operands, got "
                                      f"{alpha!r}, {beta!r}")
        for name, value in (("alpha", alpha), ("beta", beta)):
            self.check_representable(name, value)
        return alpha, beta

    def check_representable(self, name: str, value) -> None:
        """``value`` must keep its magnitude in the scale type (cuBLASLt reads alpha and beta
        in it): 1e300 with a float32 scale would become inf."""
        dtype = np.dtype(SCALE_DTYPES[self.types["scale"]])
        with np.errstate(over="ignore", invalid="ignore"):
            cast = np.asarray(value).astype(dtype)
        if np.isfinite(value) and not np.isfinite(cast):
            raise InvalidOperandError(
                f"The value provided for {name} {value!r} is not convertible to dtype "
                f"'{dtype}': {name} must be representable in the scale type {dtype}")

    def call_scales(self, quantization_scales, required: bool = True) -> tuple:
        """``(options, checked scales)`` of a call's ``quantization_scales`` (ignored with a
        warning for operands other than fp8, as nvmath-python). ``required``: a new product
        (a construction or a function-form call), where fp8 operands need their scales and
        ``options.result_amax`` is checked, in nvmath-python's order."""
        if quantization_scales is not None and not self.types["fp8"]:
            quantization_scales = ignored(self.log, "quantization_scales", quantization_scales)
        scales = coerce_options(quantization_scales, MatmulQuantizationScales,
                                "quantization_scales")
        if required and self.types["fp8"]:
            require_scales(None if quantization_scales is None else scales, self.fp8_result)
        if required:
            check_result_amax(self.types, self.options)
        return scales, self.scales(scales)

    def call_values(self, ops, alpha, beta, quantization_scales, stream, *, aux_scale=None,
                    aux_type=None, reread_c=False) -> tuple:
        """``(scalars, checked scales, aux scale, Stream or None)`` of a call on this spec,
        checked before it runs (``reread_c``: a 1-D ``c`` in ``ops`` is read as the planned
        matrix, in place; ``aux_scale`` checked for the planned ``aux_type``)."""
        c_given = "c" in ops
        if reread_c and c_given:
            ops["c"] = self.matrix_c(ops["c"])
        if c_given and self.options.inplace:  # a cached plan's key fixes c's layout, not its
            check_inplace_target(ops["c"], "c")  # memory: writable, not a conjugated view
        scalars = self.scalars(alpha, beta, c_given)
        scales = self.call_scales(quantization_scales)[1]
        if aux_scale is not None:
            aux_scale = self.aux_scale(aux_scale, aux_type)
        return scalars, scales, aux_scale, None if stream is None else self.stream(stream)

    def scales(self, scales) -> dict:
        """The checked fp8 scales (``{name: float or Operand}``) of coerced ``scales``."""
        return check_scales(scales, self.place, self.fp8_result)

    def aux_scale(self, value, aux_type, required: bool = True):
        """The checked scale of an fp8 aux output (a float, an Operand or None)."""
        return check_aux_scale(value, aux_type, self.place, required)
