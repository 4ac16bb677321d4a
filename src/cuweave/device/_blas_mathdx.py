"""ctypes binding of NVIDIA's libmathdx (``nvidia-libmathdx-cu13``) for cuBLASDx code generation.

libmathdx's C API (``libcublasdx.h``, ``libcommondx.h`` in the wheel) takes a GEMM description
as operators on a descriptor handle, answers traits (block_dim, leading dimensions, value
types, ...) and emits LTO-IR for device functions:

* the *pointer* execute, ``void f(c* alpha, a* A, b* B, c* beta, c* C)`` on shared memory;
* *tensor* device functions (``execute``, ``copy``, ``clear``, ``axpby``, ``copy_wait``) that
  take opaque tensors by value: ``struct {void* ptr;}`` for shared/register tensors and
  ``struct {void* ptr; long long ld;}`` for global-memory tiles.

Everything here runs on the CPU: libmathdx drives NVRTC itself. Only this module touches the
library; the rest of cuweave sees plain dicts and bytes.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading

from .._internal.errors import InvalidOptionError, LibraryError, LibraryNotFoundError
from ._blas_options import (
    COMMONDX_PRECISION,
    VALUE_TYPE_CODES,
    ArrangementKind,
    MatmulSpec,
    TransposeKind,
)

__all__ = ["MathdxError", "library", "versions", "traits", "compile_execute",
           "TensorKind", "FunctionKind", "compile_functions", "tensor_traits",
           "shim_source", "compile_shims", "lock", "call", "new_code", "code_ltoir"]

_ll = ctypes.c_longlong
_size_t = ctypes.c_size_t
_lock = threading.RLock()  # libmathdx does not document thread safety: serialize calls


class MathdxError(LibraryError):
    """libmathdx reported an error while describing or generating cuBLASDx code."""

    library = "libmathdx"
    _names = {1: "COMMONDX_INVALID_VALUE", 2: "COMMONDX_INTERNAL_ERROR",
              3: "COMMONDX_COMPILATION_ERROR", 4: "COMMONDX_CUFFT_ERROR",
              5: "COMMONDX_FILE_ERROR"}


class _Op:  # cublasdxOperatorType
    FUNCTION, SIZE, TYPE, PRECISION, SM, EXECUTION, BLOCK_DIM, LEADING_DIMENSION = range(8)
    TRANSPOSE_MODE, API, ARRANGEMENT, ALIGNMENT, STATIC_BLOCK_DIM = range(8, 13)
    ENABLE_INPUT_STREAMING, WITH_PIPELINE = 13, 14


class _Trait:  # cublasdxTraitType
    VALUE_TYPE, SIZE, BLOCK_SIZE, BLOCK_DIM, LEADING_DIMENSION, SYMBOL_NAME = range(6)
    ARRANGEMENT, ALIGNMENT, SUGGESTED_LEADING_DIMENSION, SUGGESTED_BLOCK_DIM = range(6, 10)
    MAX_THREADS_PER_BLOCK = 10


class TensorKind:  # cublasdxTensorType
    SMEM_A, SMEM_B, SMEM_C, SUGGESTED_SMEM_A, SUGGESTED_SMEM_B, SUGGESTED_SMEM_C = range(6)
    SUGGESTED_RMEM_C, GMEM_A, GMEM_B, GMEM_C, SUGGESTED_ACCUMULATOR_C, RMEM_C = range(6, 12)
    ACCUMULATOR_C = 12


class FunctionKind:  # cublasdxDeviceFunctionType
    EXECUTE, COPY, COPY_WAIT, CLEAR, AXPBY, MAP_IDX2CRD, MAP_IDX2CRD_PARTITIONER = range(7)
    MAP_CRD2IDX, IS_THREAD_ACTIVE, IS_PREDICATED, IS_INDEX_IN_BOUNDS, CREATE = range(7, 12)


API_SMEM, API_SMEM_DYNAMIC_LD, API_TENSORS = 0, 1, 2
_EXECUTION_BLOCK = 1
_CODE_TYPE_LTO = 0
_OPTION_SYMBOL_NAME, _OPTION_TARGET_SM, _OPTION_TARGET_CODE = 0, 1, 5
_TENSOR_TRAIT_STORAGE_BYTES, _TENSOR_TRAIT_ALIGNMENT, _TENSOR_TRAIT_NAME = 0, 1, 4
_TENSOR_TRAIT_LOGICAL_SIZE = 5
_TENSOR_OPTION_ALIGNMENT = 0
_DEVICE_FUNCTION_TRAIT_SYMBOL = 1
_DEVICE_FUNCTION_OPTION_SYMBOL_NAME, _DEVICE_FUNCTION_OPTION_COPY_ALIGNMENT = 0, 1


def _wheel_candidates():
    """libmathdx inside an ``nvidia-libmathdx-cu13``/``-cu12`` wheel on ``sys.path`` (wheels
    installed with ``pip --target`` are not in site-packages, where cuda.pathfinder looks)."""
    import os
    import sys

    for root in sys.path:
        for cu in ("cu13", "cu12"):
            path = os.path.join(root or ".", "nvidia", cu, "lib", "libmathdx.so.0")
            if os.path.isfile(path):
                yield path


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The loaded libmathdx (NVRTC loaded first); raises LibraryNotFoundError."""
    errors = []
    try:
        from cuda import pathfinder

        pathfinder.load_nvidia_dynamic_lib("nvrtc")
    except Exception as e:  # pathfinder missing or NVRTC elsewhere: libmathdx may still load
        errors.append(f"NVRTC: {e}")
    paths = []
    try:
        from cuda import pathfinder

        paths.append(pathfinder.load_nvidia_dynamic_lib("mathdx").abs_path)
    except Exception as e:
        errors.append(f"cuda.pathfinder: {e}")
    paths += list(_wheel_candidates())
    for path in paths:
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise LibraryNotFoundError(
        "nvidia-libmathdx-cu13", "dx",
        "libmathdx (cuBLASDx code generation) could not be loaded: " + "; ".join(errors))


def _last_error() -> str:
    lib = library()
    size = _size_t()
    if lib.commondxGetLastErrorStrSize(ctypes.byref(size)) != 0 or not size.value:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    code = ctypes.c_int()
    if lib.commondxGetLastErrorStr(ctypes.byref(code), size, buf) != 0:
        return ""
    return buf.value.decode(errors="replace").strip()


def _call(function: str, *args) -> None:
    status = getattr(library(), function)(*args)
    if status != 0:
        raise MathdxError(int(status), function, hint=_last_error() or None)


def _int64s(values) -> ctypes.Array:
    return (_ll * len(values))(*values)


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """``{'libmathdx': 402, 'cublasdx': '0.8.0'}`` (part of every cache key)."""
    v = ctypes.c_int()
    _call("mathdxGetVersion", ctypes.byref(v))
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _call("cublasdxGetVersion", ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return {"libmathdx": v.value, "cublasdx": f"{major.value}.{minor.value}.{patch.value}"}


def cache_versions() -> dict:
    """The versions every cached cuBLASDx artifact is keyed by: libmathdx's, cuBLASDx's,
    cuweave's and the generated source's."""
    from .._version import __version__

    return {**versions(), "cuweave": __version__, "source": 3}


class _Descriptor:
    """An owned ``cublasdxDescriptor`` (destroyed on exit)."""

    def __init__(self, spec: MatmulSpec, api: int, *, block_dim=None, leading_dimension=None):
        self.handle = _ll()
        _call("cublasdxCreateDescriptor", ctypes.byref(self.handle))
        try:
            self._describe(spec, api, block_dim, leading_dimension)
        except BaseException:
            self.close()
            raise

    def _set(self, op: int, *values: int) -> None:
        if len(values) == 1:
            _call("cublasdxSetOperatorInt64", self.handle, op, _ll(values[0]))
        else:
            _call("cublasdxSetOperatorInt64s", self.handle, op, _size_t(len(values)),
                  _int64s(values))

    def _describe(self, spec, api, block_dim, leading_dimension) -> None:
        self._set(_Op.FUNCTION, 0)
        self._set(_Op.SIZE, *spec.size)
        self._set(_Op.TYPE, 1 if spec.is_complex else 0)
        self._set(_Op.PRECISION, *(COMMONDX_PRECISION[p] for p in spec.precision))
        self._set(_Op.SM, spec.sm)
        self._set(_Op.EXECUTION, _EXECUTION_BLOCK)
        self._set(_Op.API, api)
        if spec.arrangement is not None:
            self._set(_Op.ARRANGEMENT, *(ArrangementKind[v] for v in spec.arrangement))
        else:
            self._set(_Op.TRANSPOSE_MODE, *(TransposeKind[v] for v in spec.transpose_mode))
        if spec.alignment is not None:
            self._set(_Op.ALIGNMENT, *spec.alignment)
        if block_dim is not None:
            self._set(_Op.BLOCK_DIM, *block_dim)
        if leading_dimension is not None:
            self._set(_Op.LEADING_DIMENSION, *leading_dimension)
        if spec.static_block_dim:
            self._set(_Op.STATIC_BLOCK_DIM, 1)
        if spec.with_pipeline:
            self._set(_Op.WITH_PIPELINE, 1)
        if spec.enable_input_streaming:
            self._set(_Op.ENABLE_INPUT_STREAMING, 1)

    def ints(self, trait: int, count: int) -> list[int]:
        out = (_ll * count)()
        if count == 1:
            _call("cublasdxGetTraitInt64", self.handle, trait, out)
        else:
            _call("cublasdxGetTraitInt64s", self.handle, trait, _size_t(count), out)
        return list(out)

    def value_types(self) -> list[int]:
        out = (ctypes.c_int * 3)()
        _call("cublasdxGetTraitCommondxDataTypes", self.handle, _Trait.VALUE_TYPE, _size_t(3),
              out)
        return list(out)

    def string(self, trait: int) -> str:
        size = _size_t()
        _call("cublasdxGetTraitStrSize", self.handle, trait, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        _call("cublasdxGetTraitStr", self.handle, trait, size, buf)
        return buf.value.decode()

    def close(self) -> None:
        if self.handle is not None:
            library().cublasdxDestroyDescriptor(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _invalid(spec: MatmulSpec, e: MathdxError) -> InvalidOptionError:
    return InvalidOptionError(
        f"the GEMM description {spec.key()!r} is not supported by cuBLASDx: {e}")


def traits(spec: MatmulSpec, block_dim, leading_dimension) -> dict:
    """Traits of the complete description (``block_dim``/``leading_dimension`` may be None)."""
    with _lock:
        try:
            with _Descriptor(spec, API_SMEM, block_dim=block_dim,
                             leading_dimension=leading_dimension) as d:
                out = {
                    "value_types": [VALUE_TYPE_CODES[v][0] for v in d.value_types()],
                    "block_dim": d.ints(_Trait.BLOCK_DIM, 3),
                    "leading_dimension": d.ints(_Trait.LEADING_DIMENSION, 3),
                    "alignment": d.ints(_Trait.ALIGNMENT, 3),
                    "arrangement": [ArrangementKind(v).name
                                    for v in d.ints(_Trait.ARRANGEMENT, 3)],
                    "max_threads_per_block": d.ints(_Trait.MAX_THREADS_PER_BLOCK, 1)[0],
                    "suggested_block_dim": d.ints(_Trait.SUGGESTED_BLOCK_DIM, 3),
                    "suggested_leading_dimension": d.ints(_Trait.SUGGESTED_LEADING_DIMENSION, 3),
                }
        except MathdxError as e:
            raise _invalid(spec, e) from e
    return out


def _code(sm: int):
    code = _ll()
    _call("commondxCreateCode", ctypes.byref(code))
    _call("commondxSetCodeOptionInt64", code, _OPTION_TARGET_SM, _ll(sm))
    _call("commondxSetCodeOptionInt64", code, _OPTION_TARGET_CODE, _ll(_CODE_TYPE_LTO))
    return code


def _ltoir(code) -> bytes:
    size = _size_t()
    _call("commondxGetCodeLTOIRSize", code, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    _call("commondxGetCodeLTOIR", code, size, buf)
    return buf.raw


def compile_execute(spec: MatmulSpec, block_dim, leading_dimension, *,
                    dynamic_ld: bool = False) -> tuple[bytes, str]:
    """LTO-IR and symbol of the shared-memory pointer execute
    ``void f(c* alpha, a* A, b* B, c* beta, c* C)``, or with ``dynamic_ld``
    ``void f(c* alpha, a* A, unsigned* lda, b* B, unsigned* ldb, c* beta, c* C, unsigned* ldc)``.
    """
    api = API_SMEM_DYNAMIC_LD if dynamic_ld else API_SMEM
    # our own symbol: asking libmathdx for its name afterwards costs a second NVRTC compilation
    # (the descriptor's traits; ~3 s of the ~9 s here)
    digest = hashlib.sha256(repr((spec.key(), block_dim, leading_dimension, dynamic_ld,
                                  versions())).encode()).hexdigest()[:20]
    symbol = f"cublasdx_execute_cuweave_{digest}"
    with _lock:
        try:
            with _Descriptor(spec, api, block_dim=block_dim,
                             leading_dimension=None if dynamic_ld else leading_dimension) as d:
                _call("cublasdxSetOptionStr", d.handle, _OPTION_SYMBOL_NAME, symbol.encode())
                code = _code(spec.sm)
                try:
                    _call("cublasdxFinalizeCode", code, d.handle)
                    return _ltoir(code), symbol
                finally:
                    library().commondxDestroyCode(code)
        except MathdxError as e:
            raise _invalid(spec, e) from e


def _tensor(descriptor, kind: int, alignment: int | None):
    t = _ll()
    _call("cublasdxCreateTensor", descriptor.handle, kind, ctypes.byref(t))
    if alignment:
        _call("cublasdxSetTensorOptionInt64", t, _TENSOR_OPTION_ALIGNMENT, _ll(alignment))
    return t


def _tensor_info(t) -> dict:
    lib = library()
    out = {}
    for key, trait in (("storage_bytes", _TENSOR_TRAIT_STORAGE_BYTES),
                       ("alignment", _TENSOR_TRAIT_ALIGNMENT),
                       ("logical_size", _TENSOR_TRAIT_LOGICAL_SIZE)):
        v = _ll()
        _call("cublasdxGetTensorTraitInt64", t, trait, ctypes.byref(v))
        out[key] = v.value
    size = _size_t()
    _call("cublasdxGetTensorTraitStrSize", t, _TENSOR_TRAIT_NAME, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    _call("cublasdxGetTensorTraitStr", t, _TENSOR_TRAIT_NAME, size, buf)
    out["name"] = buf.value.decode()
    del lib
    return out


def tensor_traits(spec: MatmulSpec, block_dim, kinds: dict) -> dict:
    """Traits of opaque tensors ``{name: (TensorKind, alignment|None)}`` of the tensor API."""
    with _lock:
        try:
            with _Descriptor(spec, API_TENSORS, block_dim=block_dim) as d:
                handles = {n: _tensor(d, k, a) for n, (k, a) in kinds.items()}
                arr = (_ll * len(handles))(*[h.value for h in handles.values()])
                _call("cublasdxFinalizeTensors", _size_t(len(handles)), arr)
                out = {n: _tensor_info(h) for n, h in handles.items()}
                for h in handles.values():
                    library().cublasdxDestroyTensor(h)
                return out
        except MathdxError as e:
            raise _invalid(spec, e) from e


def compile_functions(spec: MatmulSpec, block_dim, calls: list,
                      symbols: list | None = None) -> tuple[bytes, list[str]]:
    """LTO-IR and symbols of tensor device functions in one code generation (one NVRTC
    compilation for all of them: parsing cuBLASDx is shared, ~2.5x faster than one each).

    Parameters
    ----------
    spec : MatmulSpec
        The GEMM description (resolved block dimension).
    block_dim : tuple
        Its block dimension.
    calls : list
        ``(FunctionKind, [(TensorKind, alignment|None, value_type|None), ...],
        copy_alignment|None)`` per function; a value type (commondxValueType) makes the tensor
        ``like`` the kind's tensor over other elements (``cublasdxMakeTensorLike``);
        ``copy_alignment`` (bytes) lets a copy assume that alignment of both ends.
    symbols : list of str, optional
        The functions' names (libmathdx's own names otherwise).

    Returns
    -------
    (bytes, list of str)
        The LTO-IR and each function's symbol.

    Notes
    -----
    The tensors are not finalized: finalizing answers their traits (size, alignment) with
    an NVRTC compilation of its own, which generating code does not need (the traits come
    from :meth:`Matmul._layout_traits`, cached).
    """
    with _lock:
        try:
            with _Descriptor(spec, API_TENSORS, block_dim=block_dim) as d:
                tensors, functions = [], []
                try:
                    for i, (fkind, kinds, copy_alignment) in enumerate(calls):
                        ts = [_call_tensor(d, k, a, vt, tensors) for k, a, vt in kinds]
                        f = _ll()
                        arr = (_ll * max(len(ts), 1))(*[t.value for t in ts])
                        _call("cublasdxCreateDeviceFunction", d.handle, fkind, _size_t(len(ts)),
                              arr, ctypes.byref(f))
                        functions.append(f)
                        if copy_alignment:
                            _call("cublasdxSetDeviceFunctionOptionInt64", f,
                                  _DEVICE_FUNCTION_OPTION_COPY_ALIGNMENT, _ll(copy_alignment))
                        if symbols is not None:
                            _call("cublasdxSetDeviceFunctionOptionStr", f,
                                  _DEVICE_FUNCTION_OPTION_SYMBOL_NAME, symbols[i].encode())
                    code = _code(spec.sm)
                    try:
                        arr = (_ll * len(functions))(*[f.value for f in functions])
                        _call("cublasdxFinalizeDeviceFunctions", code, _size_t(len(functions)),
                              arr)
                        return _ltoir(code), [_function_symbol(f) for f in functions]
                    finally:
                        library().commondxDestroyCode(code)
                finally:
                    for f in functions:
                        library().cublasdxDestroyDeviceFunction(f)
                    for t in tensors:
                        library().cublasdxDestroyTensor(t)
        except MathdxError as e:
            raise _invalid(spec, e) from e


def _call_tensor(descriptor, kind: int, alignment, value_type, owned: list):
    """A tensor of ``kind`` (``like`` it over ``value_type`` when given), kept in ``owned``."""
    t = _tensor(descriptor, kind, alignment)
    owned.append(t)
    if value_type is None:
        return t
    like = _ll()
    _call("cublasdxMakeTensorLike", t, value_type, ctypes.byref(like))
    owned.append(like)
    return like


# C++ of the tensors libmathdx's functions take by value (its generated sources define them so)
_SHIM_PRELUDE = """\
struct libmathdx_tensor_0s_0s { void* ptr; };
struct libmathdx_tensor_0s_1s { void* ptr; long long int stride[1]; };
"""
_SHIM_PARAMS = {"t": ("libmathdx_tensor_0s_0s", "void* p{i}", "libmathdx_tensor_0s_0s{{p{i}}}"),
                "g": ("libmathdx_tensor_0s_1s", "void* p{i}, long long l{i}",
                      "libmathdx_tensor_0s_1s{{p{i}, {{l{i}}}}}"),
                "p": ("void*", "void* p{i}", "p{i}"),
                "i": ("int*", "int* p{i}", "p{i}")}


def shim_source(shims) -> str:
    """C++ of forwarding functions ``shim(void* p0, long long l0, ...)`` that build the tensor
    structs and call libmathdx's functions.

    ``shims`` holds ``(shim symbol, target symbol, abi)``; ``abi`` has one letter per
    argument of the target: ``t`` a shared/register tensor, ``g`` a global tile (pointer and
    leading dimension), ``p`` a ``void*``, ``i`` an ``int*``. numba's calls of functions
    taking structs by value were lowered to indirect calls after the link (never inlined: the
    accumulator stayed in local memory), and so were calls whose pointer types differed from
    the definition's; the shims declare the targets with their exact C types.
    """
    lines = [_SHIM_PRELUDE]
    for shim, target, abi in shims:
        decl = ", ".join(_SHIM_PARAMS[c][0] for c in abi)
        params = ", ".join(_SHIM_PARAMS[c][1].format(i=i) for i, c in enumerate(abi))
        args = ", ".join(_SHIM_PARAMS[c][2].format(i=i) for i, c in enumerate(abi))
        lines.append(f'extern "C" __device__ void {target}({decl});\n'
                     f'extern "C" __device__ __inline_hint__ void {shim}({params}) '
                     f'{{ {target}({args}); }}\n')
    return "".join(lines)


def compile_shims(shims, sm: int) -> bytes:
    """LTO-IR of :func:`shim_source` for ``sm`` (NVRTC, a few tens of milliseconds)."""
    from .._bindings.nvrtc import compile_ltoir

    options = [b"--relocatable-device-code=true", b"-dlto",
               f"--gpu-architecture=compute_{sm // 10}".encode()]
    ok, log, ir = compile_ltoir(shim_source(shims), "cuweave_blas_shims.cu", options)
    if not ok:
        raise MathdxError(3, "NVRTC (cuBLASDx call shims)", hint=log[-2000:])
    return ir


def _function_symbol(f) -> str:
    size = _size_t()
    _call("cublasdxGetDeviceFunctionTraitStrSize", f, _DEVICE_FUNCTION_TRAIT_SYMBOL,
          ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    _call("cublasdxGetDeviceFunctionTraitStr", f, _DEVICE_FUNCTION_TRAIT_SYMBOL, size, buf)
    return buf.value.decode()


# Shared with the cuSOLVERDx binding (:mod:`._solver_mathdx`): one library, one lock (libmathdx
# does not document thread safety), one error path and one code object for both generators.
lock, call, new_code, code_ltoir = _lock, _call, _code, _ltoir
