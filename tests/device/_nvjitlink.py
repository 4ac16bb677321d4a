"""nvJitLink for the CPU tests: LTO-IR objects linked for sm_90 into a cubin or post-LTO PTX."""

from __future__ import annotations

import pytest


class LinkError(AssertionError):
    """nvJitLink refused the link (the message is its error log)."""


def link_sm90(objects, *, ptx: bool = False) -> bytes:
    """``objects``: ``(ltoir bytes, name)`` pairs; the cubin, or the post-LTO PTX with ``ptx``.
    Skips the test when cuda-bindings' nvJitLink is not installed; raises :class:`LinkError`."""
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
    options = ["-arch=sm_90", "-lto"] + (["-ptx"] if ptx else [])
    handle = nvjitlink.create(len(options), options)
    try:
        for data, name in objects:
            nvjitlink.add_data(handle, nvjitlink.InputType.LTOIR, data, len(data), name)
        try:
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise LinkError(log.decode(errors="replace")[:2000]) from None
        if ptx:
            out = bytearray(nvjitlink.get_linked_ptx_size(handle))
            nvjitlink.get_linked_ptx(handle, out)
        else:
            out = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, out)
    finally:
        nvjitlink.destroy(handle)
    return bytes(out)
