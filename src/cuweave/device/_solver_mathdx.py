"""ctypes binding of libmathdx's cuSOLVERDx generator (``libcusolverdx.h`` in the
``nvidia-libmathdx-cu13`` wheel, 0.4.2 carries cuSOLVERDx 0.6).

A solver is described as operators on a descriptor handle; libmathdx answers its traits (block
dimension, suggested batches per block, workspace size) without compiling anything, emits the
LTO-IR of one ``extern "C"`` device function per description (one NVRTC compilation, a few
seconds for the first in a process, about 0.1 s after that) and hands out cuSOLVERDx's
precompiled device library as one "universal" fatbin, which every kernel calling a solver
links. Everything here runs on the CPU; the library, its lock and its error path are those of
:mod:`._blas_mathdx` (one libmathdx per process).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib

from .._internal.errors import InvalidOptionError
from . import _blas_mathdx as _mx
from ._blas_mathdx import MathdxError, code_ltoir, library, lock, new_code
from ._solver_options import (
    EXECUTION_CODES,
    PRECISION_CODES,
    Api,
    DataType,
    Diag,
    FillMode,
    Function,
    Job,
    Side,
    SolverArrangement,
    SolverSpec,
    SolverTransposeMode,
)

__all__ = ["UnsupportedSolverError", "versions", "traits", "compile_execute",
           "universal_fatbin", "nvbug_5288270", "nvbug_5288270_ignored"]

_ll = ctypes.c_longlong
_size_t = ctypes.c_size_t
_OPTION_SYMBOL_NAME, _OPTION_EXTRA_NVRTC_ARGS = 0, 4  # commondxOption
# cuSOLVERDx refuses real gesv_no_pivot on sm_120 (NVBUG 5288270: CUDA 12.8-13.0 could
# miscompile it under register pressure) unless this is defined; nvmath-python's variable
# (or cuweave's) lets it through, the results then to be checked by the user.
NVBUG_5288270_VARIABLES = ("CUWEAVE_CUSOLVERDX_IGNORE_NVBUG_5288270_ASSERT",
                           "NVMATH_CUSOLVERDX_IGNORE_NVBUG_5288270_ASSERT")


def nvbug_5288270(spec: SolverSpec) -> bool:
    """Whether ``spec`` is the configuration of NVBUG 5288270 (real gesv_no_pivot, sm_120)."""
    return (spec.function == "gesv_no_pivot" and spec.sm == 1200 and
            (spec.data_type or "real") == "real")


def nvbug_5288270_ignored() -> bool:
    import os

    return any(v in os.environ for v in NVBUG_5288270_VARIABLES)


class _Op:  # cusolverdxOperatorType
    SIZE, TYPE, PRECISION, SM, EXECUTION, BLOCK_DIM, API, FUNCTION = range(8)
    ARRANGEMENT, FILL_MODE, SIDE, DIAG, TRANSPOSE_MODE, LEADING_DIMENSION = range(8, 14)
    BATCHES_PER_BLOCK, JOB = 14, 15


class _Trait:  # cusolverdxTraitType
    SYMBOL_NAME, BLOCK_DIM, SUGGESTED_BLOCK_DIM, SUGGESTED_BATCHES_PER_BLOCK = 2, 3, 5, 6
    WORKSPACE_SIZE = 12


class UnsupportedSolverError(InvalidOptionError, RuntimeError):
    """cuSOLVERDx does not support the description (a ValueError like every invalid knob, and
    a RuntimeError as nvmath-python raises it)."""


def _call(function: str, *args) -> None:
    _mx.call(function, *args)


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """``{'libmathdx': 402, 'cusolverdx': '0.6.0'}`` (part of every cache key)."""
    v = ctypes.c_int()
    _call("mathdxGetVersion", ctypes.byref(v))
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _call("cusolverdxGetVersion", ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return {"libmathdx": v.value, "cusolverdx": f"{major.value}.{minor.value}.{patch.value}"}


class _Descriptor:
    """An owned ``cusolverdxDescriptor`` describing ``spec`` (destroyed on exit)."""

    def __init__(self, spec: SolverSpec, api: Api):
        self.handle = _ll()
        _call("cusolverdxCreateDescriptor", ctypes.byref(self.handle))
        try:
            self._describe(spec, api)
        except BaseException:
            self.close()
            raise

    def _set(self, op: int, *values: int) -> None:
        if len(values) == 1:
            _call("cusolverdxSetOperatorInt64", self.handle, op, _ll(values[0]))
        else:
            array = (_ll * len(values))(*values)
            _call("cusolverdxSetOperatorInt64s", self.handle, op, _size_t(len(values)), array)

    def _describe(self, spec: SolverSpec, api: Api) -> None:
        s = spec
        self._set(_Op.FUNCTION, Function[s.function.upper()])
        self._set(_Op.SIZE, *s.size)
        self._set(_Op.PRECISION, PRECISION_CODES[s.precision])
        self._set(_Op.EXECUTION, EXECUTION_CODES[s.execution])
        self._set(_Op.SM, s.sm)
        self._set(_Op.API, api)
        self._set(_Op.TYPE, DataType[(s.data_type or "real").upper()])
        if s.arrangement is not None:
            self._set(_Op.ARRANGEMENT, *(SolverArrangement[a.upper()] for a in s.arrangement))
        for op, value, enum in ((_Op.SIDE, s.side, Side), (_Op.DIAG, s.diag, Diag),
                                (_Op.FILL_MODE, s.fill_mode, FillMode),
                                (_Op.TRANSPOSE_MODE, s.transpose_mode, SolverTransposeMode),
                                (_Op.JOB, s.job, Job)):
            if value is not None:
                self._set(op, enum[value.upper()])
        if isinstance(s.block_dim, tuple):
            self._set(_Op.BLOCK_DIM, *s.block_dim)
        if isinstance(s.batches_per_block, int):
            self._set(_Op.BATCHES_PER_BLOCK, s.batches_per_block)
        if s.leading_dimensions is not None and api == Api.SMEM:
            self._set(_Op.LEADING_DIMENSION, *s.leading_dimensions)

    def ints(self, trait: int, count: int) -> list[int]:
        out = (_ll * count)()
        if count == 1:
            _call("cusolverdxGetTraitInt64", self.handle, trait, out)
        else:
            _call("cusolverdxGetTraitInt64s", self.handle, trait, _size_t(count), out)
        return [int(v) for v in out]

    def close(self) -> None:
        if self.handle is not None:
            library().cusolverdxDestroyDescriptor(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_INVALID_VALUE, _INTERNAL_ERROR = 1, 2  # commondxStatusType


def _unsupported(spec: SolverSpec, e: MathdxError) -> Exception:
    """libmathdx's rejection of a description as UnsupportedSolverError; any other failure
    (NVRTC's compilation, a missing library file) stays the MathdxError it is."""
    if e.status not in (_INVALID_VALUE, _INTERNAL_ERROR):
        return e
    return UnsupportedSolverError(
        f"the solver description {spec.key()!r} is not supported by cuSOLVERDx "
        f"{versions()['cusolverdx']}: {e} (see cuSOLVERDx's documentation of function "
        f"{spec.function!r} for the sizes, block dimensions and knobs it accepts)")


def traits(spec: SolverSpec) -> dict:
    """libmathdx's traits of ``spec`` (no compilation: microseconds). A Thread solver has no
    block traits (``None``)."""
    with lock:
        try:
            with _Descriptor(spec, Api.SMEM) as d:
                block = spec.execution == "Block"
                return {
                    "block_dim": d.ints(_Trait.BLOCK_DIM, 3) if block else None,
                    "suggested_block_dim": (d.ints(_Trait.SUGGESTED_BLOCK_DIM, 3)
                                            if block else None),
                    "suggested_batches_per_block": (
                        d.ints(_Trait.SUGGESTED_BATCHES_PER_BLOCK, 1)[0] if block else None),
                    "workspace_size": d.ints(_Trait.WORKSPACE_SIZE, 1)[0],
                }
        except MathdxError as e:
            error = _unsupported(spec, e)
            if error is e:
                raise
            raise error from e


def compile_execute(spec: SolverSpec, dynamic_ld: bool = False) -> tuple[bytes, str]:
    """LTO-IR and symbol of ``spec``'s device function (``dynamic_ld``: the form taking its
    leading dimensions at run time, as ``const unsigned*`` after each matrix).

    ``spec`` must be resolved (no 'suggested' left). The symbol is ours, a digest of the
    description: libmathdx's own name would cost nothing here but would tie the cache to it.
    """
    digest = hashlib.sha256(repr((spec.key(), dynamic_ld, versions())).encode()).hexdigest()
    symbol = f"cusolverdx_cuweave_{spec.function}_{digest[:20]}"
    with lock:
        try:
            api = Api.SMEM_DYNAMIC_LD if dynamic_ld else Api.SMEM
            with _Descriptor(spec, api) as d:
                _call("cusolverdxSetOptionStr", d.handle, _OPTION_SYMBOL_NAME, symbol.encode())
                code = new_code(spec.sm)
                try:
                    if nvbug_5288270(spec) and nvbug_5288270_ignored():
                        _call("commondxSetCodeOptionStr", code, _OPTION_EXTRA_NVRTC_ARGS,
                              b"-DCUSOLVERDX_IGNORE_NVBUG_5288270_ASSERT")
                    _call("cusolverdxFinalizeCode", code, d.handle)
                    return code_ltoir(code), symbol
                finally:
                    library().commondxDestroyCode(code)
        except MathdxError as e:
            error = _unsupported(spec, e)
            if error is e:
                raise
            raise error from e


def universal_fatbin() -> bytes:
    """cuSOLVERDx's precompiled device library (every architecture), linked into each kernel
    that calls a solver."""
    with lock:
        handle = _ll()
        _call("cusolverdxCreateDescriptor", ctypes.byref(handle))
        try:
            size = _size_t()
            _call("cusolverdxGetUniversalFATBINSize", handle, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            _call("cusolverdxGetUniversalFATBIN", handle, size, buf)
            return buf.raw
        finally:
            library().cusolverdxDestroyDescriptor(handle)
