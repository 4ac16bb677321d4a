"""Stream resolution: every accepted stream form becomes a :class:`Stream` holding an int handle.

Accepted: ``None`` (the operands' package current stream: torch/CuPy; else the legacy default
stream), an ``int`` handle, any object with ``__cuda_stream__`` (cuda.core streams and others),
``torch.cuda.Stream`` and ``cupy.cuda.Stream``. The user's object is kept alive in ``.obj``.
"""

from __future__ import annotations

import sys

from .errors import InvalidOptionError

__all__ = ["Stream", "resolve_stream", "current_package_stream"]


class Stream:
    """A resolved stream: ``ptr`` is the ``CUstream`` handle as an int; ``obj`` keeps it alive."""

    __slots__ = ("ptr", "obj")

    def __init__(self, ptr: int, obj=None):
        self.ptr = int(ptr)
        self.obj = obj

    def __repr__(self) -> str:
        return f"Stream(0x{self.ptr:x})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other.ptr == self.ptr

    def __hash__(self) -> int:
        return hash(self.ptr)


def current_package_stream(package: str | None, device_id: int) -> Stream:
    """The current stream of ``package`` on ``device_id`` (legacy default stream otherwise)."""
    if package == "torch":
        torch = sys.modules.get("torch")
        if torch is not None:
            s = torch.cuda.current_stream(device_id)
            return Stream(s.cuda_stream, s)
    elif package == "cupy":
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            with cupy.cuda.Device(device_id):
                s = cupy.cuda.get_current_stream()
            return Stream(s.ptr, s)
    return Stream(0, None)


def resolve_stream(stream, *, package: str | None = None, device_id: int = 0) -> Stream:
    """Turn ``stream`` (see module docstring) into a :class:`Stream`."""
    if stream is None:
        return current_package_stream(package, device_id)
    if isinstance(stream, Stream):
        return stream
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise InvalidOptionError(f"stream must be a non-negative handle, got {stream!r}")
        return Stream(stream, None)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        handle = value[1] if isinstance(value, tuple) else value
        return Stream(int(handle), stream)
    mod = type(stream).__module__.split(".", 1)[0]
    if mod == "torch" and hasattr(stream, "cuda_stream"):
        return Stream(stream.cuda_stream, stream)
    if mod == "cupy" and hasattr(stream, "ptr"):
        return Stream(stream.ptr, stream)
    raise InvalidOptionError(
        "stream must be None, an int handle, an object with __cuda_stream__, a torch.cuda.Stream"
        f" or a cupy.cuda.Stream, got {stream!r}"
    )
