"""The numba-cuda side: turning compiled LTO-IR into a device function callable in a kernel.

Imported only when an ``execute`` is resolved, so ``import cuweave.device`` never imports numba.
The generated ``extern "C"`` wrapper takes ``void*`` arguments; :func:`data_pointer` is a tiny
intrinsic handing over the data pointer of a local/shared/global array, and the LTO link lets
nvJitLink inline the whole FFT into the user's kernel.
"""

from __future__ import annotations

import functools

from .._internal.errors import LibraryNotFoundError

__all__ = ["numba_modules", "data_pointer", "make_execute"]


@functools.lru_cache(maxsize=1)
def numba_modules():
    """``(cuda, types, intrinsic, LTOIR)`` from numba-cuda; raises LibraryNotFoundError."""
    try:
        from numba import cuda
        from numba.cuda import LTOIR
    except ImportError as e:
        raise LibraryNotFoundError("numba-cuda", "dx", str(e)) from e
    try:
        from numba.cuda import types
        from numba.cuda.extending import intrinsic
    except ImportError:  # older numba-cuda layouts
        from numba.core import types
        from numba.core.extending import intrinsic
    return cuda, types, intrinsic, LTOIR


@functools.lru_cache(maxsize=1)
def data_pointer():
    """An intrinsic ``data_pointer(array) -> void*`` (the array's first element)."""
    _, types, intrinsic, _ = numba_modules()
    from llvmlite import ir

    @intrinsic
    def _data_pointer(typingctx, arr):
        if not isinstance(arr, types.Array):
            return None
        sig = types.voidptr(arr)

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            return builder.bitcast(ary.data, ir.IntType(8).as_pointer())

        return sig, codegen

    return _data_pointer


@functools.lru_cache(maxsize=1)
@functools.cache
def fft_tables(sm: int):
    """The linkable LTO-IR of cuFFTDx's twiddle tables for ``sm``: one object per process, so
    that numba links it once however many FFTs a kernel calls (its link set is a set)."""
    from ._codegen import lut_ltoir

    LTOIR = numba_modules()[3]
    return LTOIR(lut_ltoir(sm), name=f"cuweave_cufftdx_tables_sm{sm // 10}.ltoir")


def make_execute(symbol: str, ltoir: bytes, block: bool, sm: int | None = None):
    """A ``cuda.jit(device=True)`` function calling the wrapper ``symbol`` linked from ``ltoir``
    (and, with ``sm``, cuFFTDx's twiddle tables for that architecture).

    Block execution takes ``(thread_data, shared_memory)`` (register API) or ``(shared_data)``
    alone (cuFFTDx's shared-memory API: the FFT data lies in shared memory); Thread execution
    takes ``(thread_data)``.
    """
    from ._codegen import SHARED_API_SUFFIX

    cuda, types, _, LTOIR = numba_modules()
    link = [LTOIR(ltoir, name=f"{symbol}.ltoir")] + ([fft_tables(sm)] if sm else [])

    def declare(name, nargs):
        return cuda.declare_device(name, types.int32(*([types.voidptr] * nargs)), link=link,
                                   abi="c")

    ext = declare(symbol, 2 if block else 1)
    ptr = data_pointer()
    if block:
        # Two symbols, chosen while typing (``shared_memory`` is None or not): a run-time
        # choice would keep both APIs' code in every kernel.
        ext_shared = declare(symbol + SHARED_API_SUFFIX, 1)

        def execute(thread_data, shared_memory=None):
            if shared_memory is None:
                ext_shared(ptr(thread_data))
            else:
                ext(ptr(thread_data), ptr(shared_memory))

    else:

        def execute(thread_data):
            ext(ptr(thread_data))

    return cuda.jit(device=True, forceinline=True)(execute)
