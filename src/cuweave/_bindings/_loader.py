"""Lazy, thread-safe loading of NVIDIA shared libraries through cuda-pathfinder.

``load_library("cublasLt")`` returns a :class:`ctypes.CDLL` (cached); a missing library raises
:class:`~cuweave._internal.errors.LibraryNotFoundError` naming the pip extra that brings it.
Nothing is loaded at import time.
"""

from __future__ import annotations

import ctypes
import threading

from .._internal.errors import LibraryNotFoundError

__all__ = ["load_library", "library_path", "untyped", "EXTRA_FOR_LIBRARY"]

#: Which pip extra of cuweave installs each library.
EXTRA_FOR_LIBRARY = {
    "cublasLt": "cu13",
    "cublas": "cu13",
    "cusolver": "cusolver",
    "cufft": "cu13",
    "cudart": "cu13",
    "nvrtc": "cu13",
    "nvJitLink": "cu13",
    "nvvm": "numba",
}

_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL] = {}
_paths: dict[str, str] = {}


def load_library(name: str) -> ctypes.CDLL:
    """Load the NVIDIA library ``name`` (a cuda-pathfinder short name) once per process."""
    lib = _loaded.get(name)
    if lib is not None:
        return lib
    with _lock:
        lib = _loaded.get(name)
        if lib is not None:
            return lib
        extra = EXTRA_FOR_LIBRARY.get(name, "cu13")
        try:
            from cuda.pathfinder import load_nvidia_dynamic_lib
        except ImportError as e:  # cuda-pathfinder itself is missing
            raise LibraryNotFoundError(name, extra, "cuda-pathfinder is not installed") from e
        try:
            found = load_nvidia_dynamic_lib(name)
        except Exception as e:  # DynamicLibNotFoundError and friends
            raise LibraryNotFoundError(name, extra, str(e).splitlines()[0] if str(e) else "") from e
        path = found.abs_path
        try:
            # The library is already mapped by pathfinder; dlopen by path just bumps its refcount.
            lib = ctypes.CDLL(path) if path else ctypes.CDLL(None, handle=found._handle_uint)
        except OSError as e:
            raise LibraryNotFoundError(name, extra, str(e)) from e
        _paths[name] = path or "<loaded by the process>"
        _loaded[name] = lib
        return lib


def untyped(lib: ctypes.CDLL, name: str, restype=ctypes.c_int):
    """A second function object for the symbol ``name`` of ``lib``, without ``argtypes``: the
    one way cuweave calls C without per-call argument conversion (hot paths).

    Every argument must then be a ctypes object built once (``c_void_p`` whose ``.value`` the
    caller updates, ``byref`` of a structure); a plain Python int is passed as a C ``int``
    (right for handles and enum values, wrong for addresses). The declared function of the
    same symbol keeps its ``argtypes``.
    """
    fn = lib._FuncPtr((name, lib))
    fn.restype = restype
    return fn


def library_path(name: str) -> str | None:
    """The absolute path ``name`` was loaded from, or ``None`` if it is not loaded."""
    return _paths.get(name)
