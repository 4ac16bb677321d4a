"""The epilog table of :mod:`cuweave.linalg.advanced` — the one place epilogs are described.

Every fact about an epilog (which ``epilog_inputs`` it needs, which auxiliary outputs it
produces, their layouts and dtypes, the oldest cuBLASLt that has it, which dtypes it accepts,
and the CPU kernel that implements it) lives in :data:`EPILOGS`. The GPU planner and the CPU
backend both read it; nothing else branches on the epilog value.

cuBLASLt's frame (the seam between the engine and its backends)
---------------------------------------------------------------
The engine canonicalizes every problem into cuBLASLt's frame: a column-major ``D`` of
``m × n`` (``m = m_lt``, ``n = n_lt``) computed as::

    D = epilog(alpha * op(A) @ op(B) + beta * C [+ bias])

with ``op(A)`` of ``m × k`` and ``op(B)`` of ``k × n``. When the user's result is row-major the
engine computes ``D^T = B^T A^T`` instead, so ``m_lt`` is the user's ``N`` and the operands are
swapped; the epilog machinery only ever sees cuBLASLt's frame. Shapes and strides below are in
that frame, with NumPy axis order ``(*batch, rows, cols)`` and strides in elements.

Auxiliary formats (identical on the CPU and the GPU):

``relu_aux``
    ``uint8`` bitmask of shape ``(*batch, ld_bytes, n)`` with ``ld_bytes = roundup(m, 128) // 8``,
    column-major in the last two axes (byte ``(r, j)`` at ``r + j * ld_bytes``; batch stride
    ``ld_bytes * n``). Bit ``i % 8`` (least significant bit first) of byte ``i // 8`` in column
    ``j`` is 1 exactly where the pre-activation value ``x[i, j] > 0`` (where ReLU lets the value
    and its gradient through). Padding bits and bytes are 0.
``gelu_aux``
    The GELU input (pre-activation) values, shape ``(*batch, roundup(m, 8), n)``, column-major
    likewise; padding rows are 0. dtype: see :func:`aux_dtype`.
``drelu_bgrad`` / ``dgelu_bgrad``
    Sum over ``n`` of the final (post-epilog) ``D``: length ``m``.
``bgrada``
    Sum of ``op(A)`` over ``k``: length ``m``.
``bgradb``
    Sum of ``op(B)`` over ``k``: length ``n``.

The bias-gradient vectors are shaped ``(m,)`` without batch and ``(*batch, m, 1)`` with batch
(nvmath-python's shapes), contiguous.

GELU is the tanh approximation cuBLASLt uses::

    gelu(x)  = 0.5 * x * (1 + tanh(s * (x + 0.044715 * x**3))),   s = sqrt(2 / pi)
    gelu'(x) = 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * s * (1 + 3 * 0.044715 * x**2)

with ``t = tanh(s * (x + 0.044715 * x**3))``. ReLU is ``max(x, 0)`` with NaN mapped to 0 (as
cuBLASLt does). ``DRELU``/``DGELU`` multiply the matmul result (``alpha * AB + beta * C``) by
the mask / by ``gelu'(aux)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..._internal.errors import InvalidOperandError, InvalidOptionError

__all__ = [
    "MatmulEpilog",
    "EpilogSpec",
    "EPILOGS",
    "epilog_spec",
    "required_inputs",
    "aux_outputs",
    "validate_epilog_inputs",
    "validate_epilog",
    "aux_layout",
    "aux_dtype",
    "bias_dtype",
    "AuxFormat",
    "AUX_FORMATS",
    "GELU_COEFF",
    "GELU_SCALE",
]

#: cubic coefficient and outer scale (``sqrt(2/pi)``) of the tanh GELU approximation
GELU_COEFF = 0.044715
GELU_SCALE = 0.7978845608028654


class MatmulEpilog(IntEnum):
    """``cublasLtEpilogue_t`` (values from the CUDA 13 ``cublasLt.h``)."""

    DEFAULT = 1
    RELU = 2
    RELU_AUX = 130
    BIAS = 4
    RELU_BIAS = 6
    RELU_AUX_BIAS = 134
    DRELU = 136
    DRELU_BGRAD = 152
    GELU = 32
    GELU_AUX = 160
    GELU_BIAS = 36
    GELU_AUX_BIAS = 164
    DGELU = 192
    DGELU_BGRAD = 208
    BGRADA = 256
    BGRADB = 512


@dataclass(frozen=True)
class EpilogSpec:
    """Everything the engine needs to know about one epilog.

    Attributes
    ----------
    epilog : MatmulEpilog
    bias : bool
        Takes ``epilog_inputs["bias"]`` (length ``m`` in cuBLASLt's frame, added to every column
        before the activation).
    aux_input : str or None
        ``"relu_aux"`` / ``"gelu_aux"``: the forward pass's aux output, required as input.
    aux_output : str or None
        ``"relu_aux"`` / ``"gelu_aux"`` produced by the forward pass.
    bgrad_output : str or None
        ``"drelu_bgrad"``, ``"dgelu_bgrad"``, ``"bgrada"`` or ``"bgradb"``.
    activation : str or None
        CPU point-wise stage: ``"relu"``, ``"gelu"``, ``"drelu"``, ``"dgelu"`` or ``None``.
    min_version : int
        Oldest ``cublasLtGetVersion()`` providing it (non-batched).
    batched_min_version : int
        Oldest version providing it with a batch.
    result_col_major : bool
        ``D`` must be column-major in cuBLASLt's frame with this epilog's ``m`` being the rows
        (bias, aux and bgrad vectors are along the lt ``m``); ``False`` only for ``BGRADA``,
        which has no layout constraint.
    real_only : bool
        Complex dtypes are rejected (cuBLASLt's fused epilogs are real-only).
    min_k : int
        Smallest ``k`` cuBLASLt accepts (``DRELU``/``DGELU`` need ``k >= 2``).
    bgrad_source : str or None
        What the bias gradient reduces: ``"d"`` (the final ``D`` over ``n``), ``"a"``
        (``op(A)`` over ``k``) or ``"b"`` (``op(B)`` over ``k``).
    cpu_impl : str
        Name of the CPU point-wise kernel in :mod:`cuweave.linalg.advanced._cpu`
        (``act_<activation>``; see :attr:`cpu`).
    layout_requirement : tuple or None
        A cuBLASLt operand-layout restriction in cuBLASLt's frame: ``(operand, needs_op_n,
        need, fix)``: lt ``operand`` (``"a"``/``"b"``) must (``needs_op_n``) or must not be
        untransposed (op N); ``need``/``fix`` word the error for the user (measured on
        cuBLASLt 13.1: BGRADA needs lt ``A`` untransposed, BGRADB lt ``B`` transposed).
    """

    epilog: MatmulEpilog
    bias: bool = False
    aux_input: str | None = None
    aux_output: str | None = None
    bgrad_output: str | None = None
    activation: str | None = None
    min_version: int = 0
    batched_min_version: int = 0
    result_col_major: bool = True
    real_only: bool = True
    min_k: int = 1
    bgrad_source: str | None = None
    cpu_impl: str = "act_identity"
    layout_requirement: tuple | None = None

    @property
    def name(self) -> str:
        return self.epilog.name

    @property
    def inputs(self) -> tuple[str, ...]:
        """``epilog_inputs`` keys this epilog requires."""
        return (("bias",) if self.bias else ()) + ((self.aux_input,) if self.aux_input else ())

    @property
    def outputs(self) -> tuple[str, ...]:
        """Aux dict keys this epilog returns."""
        return tuple(x for x in (self.aux_output, self.bgrad_output) if x)

    @property
    def cpu(self) -> Callable:
        """The CPU implementation (imported lazily: ``_cpu`` imports this module)."""
        module = importlib.import_module(f"{__package__}._cpu")
        return getattr(module, self.cpu_impl)


_BGRAD_SOURCE = {"drelu_bgrad": "d", "dgelu_bgrad": "d", "bgrada": "a", "bgradb": "b", None: None}


def _spec(epilog, **kw) -> EpilogSpec:
    kw.setdefault("cpu_impl", f"act_{kw.get('activation') or 'identity'}")
    kw["bgrad_source"] = _BGRAD_SOURCE[kw.get("bgrad_output")]
    return EpilogSpec(MatmulEpilog[epilog], **kw)


_V_RELU, _V_FUSED, _V_BACKWARD, _V_BATCHED_AUX = 11000, 11501, 111103, 11703

#: the one table: epilog → spec
EPILOGS: dict[MatmulEpilog, EpilogSpec] = {
    s.epilog: s
    for s in (
        _spec("DEFAULT", real_only=False),
        _spec("RELU", activation="relu", min_version=_V_RELU, batched_min_version=_V_RELU),
        _spec("RELU_AUX", activation="relu", aux_output="relu_aux", min_version=_V_FUSED,
              batched_min_version=_V_BATCHED_AUX),
        _spec("BIAS", bias=True, min_version=_V_FUSED, batched_min_version=_V_FUSED),
        _spec("RELU_BIAS", bias=True, activation="relu", min_version=_V_FUSED,
              batched_min_version=_V_FUSED),
        _spec("RELU_AUX_BIAS", bias=True, activation="relu", aux_output="relu_aux",
              min_version=_V_FUSED, batched_min_version=_V_BATCHED_AUX),
        _spec("DRELU", activation="drelu", aux_input="relu_aux", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD, min_k=2),
        _spec("DRELU_BGRAD", activation="drelu", aux_input="relu_aux",
              bgrad_output="drelu_bgrad", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD, min_k=2),
        _spec("GELU", activation="gelu", min_version=_V_FUSED, batched_min_version=_V_FUSED),
        _spec("GELU_AUX", activation="gelu", aux_output="gelu_aux", min_version=_V_FUSED,
              batched_min_version=_V_BATCHED_AUX),
        _spec("GELU_BIAS", bias=True, activation="gelu", min_version=_V_FUSED,
              batched_min_version=_V_FUSED),
        _spec("GELU_AUX_BIAS", bias=True, activation="gelu", aux_output="gelu_aux",
              min_version=_V_FUSED, batched_min_version=_V_BATCHED_AUX),
        _spec("DGELU", activation="dgelu", aux_input="gelu_aux", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD, min_k=2),
        _spec("DGELU_BGRAD", activation="dgelu", aux_input="gelu_aux",
              bgrad_output="dgelu_bgrad", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD, min_k=2),
        _spec("BGRADA", bgrad_output="bgrada", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD, result_col_major=False,
              layout_requirement=("a", True, "a must be column-major",
                                  "a Fortran-ordered a (or x.T of a row-major array)")),
        _spec("BGRADB", bgrad_output="bgradb", min_version=_V_BACKWARD,
              batched_min_version=_V_BACKWARD,
              layout_requirement=("b", False, "b must be row-major", "a C-ordered b")),
    )
}

_BY_NAME = {e.name.lower(): e for e in MatmulEpilog}



@dataclass(frozen=True)
class AuxFormat:
    """The format of one aux matrix (``aux_output``/``aux_input``), on both execution spaces.

    Attributes
    ----------
    name : str
    per_element : int
        Values packed per stored element: ``EPILOGUE_AUX_LD`` counts values, the stored rows
        are ``ld / per_element`` (the ReLU mask packs 8 bits per byte).
    pad : int
        The lt ``m`` is padded to a multiple of ``pad`` values.
    typed : bool
        ``MatmulPlanPreferences.epilog.aux_type`` may set its dtype.
    cpu_write, cpu_read : str
        The CPU kernels (in :mod:`cuweave.linalg.advanced._cpu`) storing / loading it.
    """

    name: str
    per_element: int
    pad: int
    typed: bool
    cpu_write: str
    cpu_read: str

    def rows(self, m: int) -> int:
        """Stored rows (the leading dimension in stored elements) for ``m`` values."""
        return _roundup(m, self.pad) // self.per_element

    def used_rows(self, m: int) -> int:
        """Rows holding values (the rest is padding)."""
        return -(-m // self.per_element)

    def cpu(self, kind: str) -> Callable:
        """The CPU kernel ``"write"`` or ``"read"`` (imported lazily, as EpilogSpec.cpu)."""
        module = importlib.import_module(f"{__package__}._cpu")
        return getattr(module, self.cpu_write if kind == "write" else self.cpu_read)


#: the aux matrix formats: name -> format
AUX_FORMATS = {
    "relu_aux": AuxFormat("relu_aux", per_element=8, pad=128, typed=False,
                          cpu_write="write_relu_aux", cpu_read="read_relu_aux"),
    "gelu_aux": AuxFormat("gelu_aux", per_element=1, pad=8, typed=True,
                          cpu_write="write_gelu_aux", cpu_read="read_gelu_aux"),
}


def epilog_spec(value, name: str = "epilog") -> EpilogSpec:
    """Spec of ``value``: a :class:`MatmulEpilog`, its int, a name (any case) or ``None``.

    ``None`` means ``DEFAULT``; an :class:`EpilogSpec` is returned unchanged.

    Raises
    ------
    InvalidOptionError
        ``value`` names no epilog.
    """
    if value is None:
        return EPILOGS[MatmulEpilog.DEFAULT]
    if isinstance(value, EpilogSpec):
        return value
    epilog = None
    if isinstance(value, str):
        epilog = _BY_NAME.get(value.strip().lower().removeprefix("cublaslt_epilogue_"))
    elif isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        try:
            epilog = MatmulEpilog(int(value))
        except ValueError:
            epilog = None
    if epilog is None:
        raise InvalidOptionError(
            f"{name} must be one of {[e.name for e in MatmulEpilog]}, got {value!r}"
        )
    return EPILOGS[epilog]


def required_inputs(spec) -> tuple[str, ...]:
    """``epilog_inputs`` keys the epilog needs (``("bias",)``, ``("relu_aux",)``, ...)."""
    return epilog_spec(spec).inputs


def aux_outputs(spec) -> tuple[str, ...]:
    """Aux dict keys the epilog returns."""
    return epilog_spec(spec).outputs


def validate_epilog_inputs(spec, epilog_inputs: Mapping | None) -> dict:
    """Check that ``epilog_inputs`` has exactly the keys the epilog needs; return a dict.

    Raises
    ------
    InvalidOperandError
        A required key is missing or an unexpected one is present.
    """
    spec = epilog_spec(spec)
    if epilog_inputs is not None and not isinstance(epilog_inputs, Mapping):
        raise InvalidOptionError(
            f"epilog_inputs must be a dict (name -> array) or None, got {epilog_inputs!r}")
    given = dict(epilog_inputs or {})
    need = set(spec.inputs)
    if set(given) != need:
        raise InvalidOperandError(
            f"epilog_inputs must have the keys {sorted(need)} for epilog {spec.name}, "
            f"got {sorted(given)!r}"
        )
    return given


def validate_epilog(spec, *, dtype: str, k: int | None = None, batched: bool = False,
                    version: int | None = None) -> EpilogSpec:
    """Check an epilog against the problem (dtype of ``A``/``D``, ``k``, cuBLASLt version).

    ``version`` is ``cublasLtGetVersion()`` (GPU only; ``None`` skips the version check).
    ``min_k`` is a cuBLASLt restriction checked only together with ``version``.
    """
    spec = epilog_spec(spec)
    if spec.real_only and dtype.startswith("complex"):
        raise InvalidOperandError(
            f"dtype must be real for epilog {spec.name} (cuBLASLt epilogs other than DEFAULT "
            f"are real-only), got {dtype!r}"
        )
    if version is not None:
        need = spec.batched_min_version if batched else spec.min_version
        if version < need:
            what = "batched " if batched else ""
            raise InvalidOptionError(
                f"epilog must be supported by the installed cuBLASLt ({version}); "
                f"{what}{spec.name} needs cuBLASLt >= {need}, got {spec.name!r}"
            )
        if k is not None and k < spec.min_k:
            raise InvalidOperandError(
                f"k must be >= {spec.min_k} for epilog {spec.name} (a cuBLASLt restriction), "
                f"got {k!r}"
            )
    return spec


def _roundup(x: int, base: int) -> int:
    return -(-x // base) * base


def bias_dtype(result_dtype: str, *, ab_dtype: str | None = None,
               c_dtype: str | None = None) -> str:
    """Default bias / bias-gradient type (``CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE`` unset).

    The result (``D``) type, except for fp8 inputs, where it is ``float16`` when ``C`` is
    ``float16`` and ``bfloat16`` otherwise (``C`` defaults to ``float16`` for an fp8 result).
    """
    if ab_dtype is None or not ab_dtype.startswith("float8"):
        return result_dtype
    c = c_dtype or ("float16" if result_dtype.startswith("float8") else result_dtype)
    return "float16" if c == "float16" else "bfloat16"


def aux_dtype(name: str, result_dtype: str, *, ab_dtype: str | None = None,
              c_dtype: str | None = None) -> str:
    """dtype of aux output ``name`` by default (``EPILOGUE_AUX_DATA_TYPE`` unset).

    ``relu_aux`` is a ``uint8`` bitmask; ``gelu_aux`` has the result type (``C``'s type when
    the result is fp8); bias gradients follow :func:`bias_dtype`.
    """
    if name == "relu_aux":
        return "uint8"
    if name == "gelu_aux":
        if result_dtype.startswith("float8"):
            return c_dtype or "float16"
        return result_dtype
    if name in ("drelu_bgrad", "dgelu_bgrad", "bgrada", "bgradb"):
        return bias_dtype(result_dtype, ab_dtype=ab_dtype, c_dtype=c_dtype)
    raise InvalidOptionError(
        "aux name must be one of ['relu_aux', 'gelu_aux', 'drelu_bgrad', 'dgelu_bgrad', "
        f"'bgrada', 'bgradb'], got {name!r}"
    )


def aux_layout(name: str, m: int, n: int, batch_shape=(), result_dtype: str = "float32", *,
               ab_dtype: str | None = None, c_dtype: str | None = None):
    """Shape, strides (elements) and dtype name of aux array ``name`` in cuBLASLt's frame.

    Parameters
    ----------
    name : str
        ``"relu_aux"``, ``"gelu_aux"``, ``"drelu_bgrad"``, ``"dgelu_bgrad"``, ``"bgrada"``
        or ``"bgradb"``.
    m, n : int
        cuBLASLt-frame result shape.
    batch_shape : tuple of int
        Batch shape of the result (``()`` for none); batch axes are laid out contiguously
        (last batch axis fastest) outside the matrix.

    Returns
    -------
    (shape, strides, dtype_name)
    """
    batch_shape = tuple(int(x) for x in batch_shape)
    dtype = aux_dtype(name, result_dtype, ab_dtype=ab_dtype, c_dtype=c_dtype)
    fmt = AUX_FORMATS.get(name)
    if fmt is not None:
        rows = fmt.rows(m)
        tail_shape, tail_strides = (rows, n), (1, rows)
    else:
        length = n if name == "bgradb" else m
        tail_shape, tail_strides = ((length, 1), (1, length)) if batch_shape else ((length,), (1,))
    size = tail_shape[0] * tail_shape[1] if len(tail_shape) == 2 else tail_shape[0]
    strides = []
    for extent in reversed(batch_shape):
        strides.append(size)
        size *= extent
    return batch_shape + tail_shape, tuple(reversed(strides)) + tail_strides, dtype


_SWAP = {MatmulEpilog.BGRADA: MatmulEpilog.BGRADB, MatmulEpilog.BGRADB: MatmulEpilog.BGRADA}


def lt_epilog(spec, swap: bool):
    """The epilog spec in cuBLASLt's frame (BGRADA and BGRADB trade places when swapped)."""
    return epilog_spec(_SWAP.get(spec.epilog, spec.epilog)) if swap else spec
