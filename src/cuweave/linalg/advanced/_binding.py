"""Epilog inputs/outputs of one planned matmul, in cuBLASLt's frame."""

from __future__ import annotations

import ctypes

from ..._bindings import cublaslt as lt
from ..._bindings.library_types import DATA_TYPE
from ..._internal.arrays import Operand, check_same_place
from ..._internal.errors import InvalidOperandError
from ..._internal.packages import wrap_operand
from ._epilogs import (
    AUX_FORMATS,
    aux_dtype,
    aux_layout,
    bias_dtype,
    lt_epilog,
    validate_epilog_inputs,
)
from ._layout import aux_frames, bias_axis, bias_layout, recall_aux_frame
from ._spec import OperandPackageError

__all__ = ["EpilogBinding", "frame_constraints", "perm_from_strides", "wrap_inputs",
           "lt_epilog"]

_A = lt.MatmulDescAttribute
_PLACEHOLDER = 256  # an aligned fake address for the heuristics (pointers are set per execute)


def perm_from_strides(shape, strides) -> tuple:
    """Axis order outermost → innermost for ``packages.empty(perm=...)``."""
    return tuple(sorted(range(len(shape)), key=lambda i: (-strides[i], i)))


def check_aux_input_dtype(spec, inputs: dict, types, prefs) -> None:
    """The aux input (``relu_aux``/``gelu_aux``) must have the dtype its forward pass produced
    (checked before its layout is read)."""
    name = spec.aux_input
    if not name or name not in inputs:
        return
    want = aux_dtype(name, types["d"], ab_dtype=types["a"], c_dtype=types["c"])
    aux_type = prefs.epilog.aux_type if prefs is not None else None
    if aux_type is not None and AUX_FORMATS[name].typed:
        want = aux_type
    got = inputs[name].dtype
    if got != want:
        raise InvalidOperandError(
            f"epilog_inputs[{name!r}] dtype must be {want!r} (the {name} output of the forward "
            f"pass), got {got!r}")


def frame_constraints(spec, inputs: dict, user_m, user_n, batch_shape, d_dtype) -> dict:
    """``{reason: swap}`` constraints the epilog puts on the frame."""
    forced = {}
    if spec.bias:
        axis = bias_axis(inputs["bias"].shape, user_m, user_n, batch_shape)
        forced[f"a bias along {axis.upper()}"] = axis == "n"
    if spec.aux_input:
        op = inputs[spec.aux_input]
        frames = aux_frames(spec.aux_input, op.shape, op.strides, user_m, user_n, batch_shape,
                            d_dtype)
        if len(frames) > 1:
            recalled = recall_aux_frame(op.ptr, op.shape)
            if recalled is None:
                raise InvalidOperandError(
                    f"epilog_inputs[{spec.aux_input!r}] must be the {spec.aux_input} array its "
                    f"forward matmul returned (still alive, not a copy): for a square result "
                    f"(M == N = {user_m}) its layout cannot be told from its shape, got an "
                    "array this process did not produce (or a copy of one)")
            frames = [recalled]
        forced[f"epilog_inputs[{spec.aux_input!r}]"] = frames[0]
    elif spec.outputs and not spec.bias:
        forced[f"the {spec.name} aux outputs"] = False
    return forced


class EpilogBinding:
    """The epilog of one plan in cuBLASLt's frame: what its inputs must look like (their
    signatures), the layouts of its outputs and the descriptor attributes fixed at plan time.

    It holds no array: the inputs of each execution travel in its :class:`~._plan.Call`.
    """

    def __init__(self, spec, inputs: dict, problem, types, ref_ops: dict, prefs):
        self.spec = spec
        self.lt = lt_epilog(spec, problem.swap)
        package = next(iter(ref_ops.values())).package
        for k, op in inputs.items():  # nvmath: a package mismatch is a TypeError, then
            if op.package != package:  # another memory space a ValueError
                raise OperandPackageError(
                    f"{_input_name(k)} must come from the operands' package ({package}), got "
                    f"a {op.package} array")
        check_same_place({**ref_ops, **{_input_name(k): op for k, op in inputs.items()}})
        self.signatures = {k: _input_signature(op) for k, op in inputs.items()}
        #: the dtype of each input, as planned (the CPU run stores in them)
        self.input_dtypes = {k: op.dtype for k, op in inputs.items()}
        p = self.p = problem
        #: the aux input whose frame a square result cannot tell (None: no such input)
        self.square_aux = spec.aux_input if p.user_m == p.user_n else None
        d_dtype = types["d"]
        count = p.batch_count
        self.static = []
        self.bias_bstride = 0
        if spec.bias:
            op = inputs["bias"]
            axis = "n" if p.swap else "m"
            self.bias_bstride = bias_layout(op.shape, op.strides, axis, p.batch_shape)
            # cuBLASLt's bias type: the result's, except for fp8 inputs: float32 results take
            # a bfloat16 bias, fp8 results C's type (float16 or bfloat16)
            want = d_dtype if not types["fp8"] else bias_dtype(
                d_dtype, ab_dtype=types["a"], c_dtype=types["c_layout"])
            if op.dtype != want:
                raise InvalidOperandError(
                    f"epilog_inputs['bias'] dtype must be {want!r}, got {op.dtype!r}")
            if count > 1:
                self.static.append((_A.BIAS_BATCH_STRIDE, self.bias_bstride))
        aux_kw = {"ab_dtype": types["a"], "c_dtype": types["c"]}
        aux_type = prefs.epilog.aux_type if prefs is not None else None
        self.outputs = []  # (user name, cuBLASLt name, shape, strides, dtype)
        for name in self.lt.outputs:
            shape, strides, dtype = aux_layout(name, p.m, p.n, p.batch_shape, d_dtype, **aux_kw)
            if aux_type is not None and AUX_FORMATS.get(name) and AUX_FORMATS[name].typed:
                dtype = aux_type
            user = _SWAP_NAME.get(name, name) if p.swap else name
            self.outputs.append((user, name, shape, strides, dtype))
        aux_name = spec.aux_input or spec.aux_output
        if aux_name:
            shape, strides, dtype = aux_layout(aux_name, p.m, p.n, p.batch_shape, d_dtype,
                                               **aux_kw)
            fmt = AUX_FORMATS[aux_name]
            bits = fmt.per_element
            self.static.append((_A.EPILOGUE_AUX_LD, shape[-2] * bits))
            if count > 1:
                self.static.append((_A.EPILOGUE_AUX_BATCH_STRIDE, shape[-2] * shape[-1] * bits))
            if aux_type is not None and fmt.typed:
                self.static.append((_A.EPILOGUE_AUX_DATA_TYPE, int(DATA_TYPE[aux_type])))
            self.static.append((_A.EPILOGUE_AUX_POINTER, ctypes.c_void_p(_PLACEHOLDER)))
        if spec.bgrad_output and count > 1:
            length = p.n if self.lt.bgrad_output == "bgradb" else p.m
            self.static.append((_A.BIAS_BATCH_STRIDE, length))
        if spec.bias or spec.bgrad_output:
            self.static.append((_A.BIAS_POINTER, ctypes.c_void_p(
                inputs["bias"].ptr if spec.bias else _PLACEHOLDER)))
            if types["fp8"]:
                bd = inputs["bias"].dtype if spec.bias else bias_dtype(
                    d_dtype, ab_dtype=types["a"], c_dtype=types["c_layout"])
                self.static.append((_A.BIAS_DATA_TYPE, int(DATA_TYPE[bd])))

    def static_attributes(self):
        return list(self.static)

    def check_inputs(self, inputs: dict, check: bool) -> None:
        """Check new (wrapped) epilog inputs: the planned shapes/strides/dtypes when
        ``check``, and always a square result's aux input in the planned frame."""
        for k, op in inputs.items():
            if check and _input_signature(op) != self.signatures[k]:
                raise InvalidOperandError(
                    f"epilog_inputs[{k!r}] must match the planned one {self.signatures[k]}, "
                    f"got {op!r}")
            if k == self.square_aux:
                frame = recall_aux_frame(op.ptr, op.shape)
                if frame != self.p.swap:
                    why = ("this process did not produce it (or it is a copy)" if frame is None
                           else "its forward pass had the other result layout")
                    raise InvalidOperandError(
                        f"epilog_inputs[{k!r}] must be the {k} array of a forward pass in the "
                        f"planned frame (a square result's aux layout cannot be told from its "
                        f"shape): {why}; plan again for it")

    def missing_inputs(self, inputs) -> list:
        """Required epilog inputs not in ``inputs``."""
        return [k for k in self.spec.inputs if k not in inputs]


def wrap_inputs(spec, epilog_inputs) -> dict:
    """Validated, wrapped epilog inputs of the epilog ``spec`` (name -> Operand)."""
    raw = validate_epilog_inputs(spec, epilog_inputs)
    return {k: v if isinstance(v, Operand) else wrap_operand(v, _input_name(k))
            for k, v in raw.items()}


def _input_signature(op) -> tuple:
    return (op.shape, op.strides, op.dtype, op.package, op.place)


_INPUT_NAMES: dict = {}


def _input_name(key) -> str:
    name = _INPUT_NAMES.get(key)
    if name is None:
        name = _INPUT_NAMES[key] = f"epilog_inputs[{key!r}]"
    return name


_SWAP_NAME = {"bgrada": "bgradb", "bgradb": "bgrada"}
