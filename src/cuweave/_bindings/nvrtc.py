"""NVRTC through ``cuda.bindings``: the one compile helper of cuweave (LTO-IR out).

:func:`compile_ltoir` returns ``(ok, log, ltoir)``: a source that does not compile is not an
error here (the caller decides what it means and quotes the log); a failing NVRTC call raises
:class:`~cuweave._internal.errors.NvrtcError`, a missing NVRTC
:class:`~cuweave._internal.errors.LibraryNotFoundError`.
"""

from __future__ import annotations

from .._internal.errors import LibraryNotFoundError, NvrtcError

__all__ = ["module", "compile_ltoir"]


def module():
    """``cuda.bindings.nvrtc`` with a loadable libnvrtc (raises LibraryNotFoundError)."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise LibraryNotFoundError("cuda-bindings (NVRTC)", "cu13", str(e)) from e
    try:
        nvrtc.nvrtcVersion()
    except Exception as e:  # libnvrtc.so not loadable
        raise LibraryNotFoundError("nvidia-cuda-nvrtc", "cu13", str(e)) from e
    return nvrtc


def _check(result, function: str):
    status = result[0]
    if int(status) != 0:
        raise NvrtcError(int(status), function)
    return result[1:]


def compile_ltoir(source: str, name: str, options, headers=((), ())) -> tuple:
    """Compile ``source`` (file name ``name``) with ``options`` (bytes) to LTO-IR.

    ``headers`` is ``(contents, names)`` of in-memory headers. Returns ``(ok, log, ltoir)``
    (``ltoir`` None when the source does not compile).
    """
    nvrtc = module()
    contents, names = list(headers[0]), list(headers[1])
    (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), len(contents),
                                              contents, names), "nvrtcCreateProgram")
    try:
        options = list(options)
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        (size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        # NVRTC writes into the buffer: a bytearray, never ``b" " * size``. For an empty log
        # (size 1) that is CPython's one cached b" ", and NVRTC's NUL overwrote it for the
        # whole process; Python 3.12 then parsed the " " of f-strings in modules imported
        # later as NUL (the cuRAND shim's source lost its spaces after a twiddle-table build)
        log = bytearray(size)
        _check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        log_text = bytes(log).decode(errors="replace").rstrip("\x00 ")
        if int(status) != 0:
            return False, log_text, None
        (size,) = _check(nvrtc.nvrtcGetLTOIRSize(prog), "nvrtcGetLTOIRSize")
        ir = bytearray(size)
        _check(nvrtc.nvrtcGetLTOIR(prog, ir), "nvrtcGetLTOIR")
        return True, log_text, bytes(ir)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
