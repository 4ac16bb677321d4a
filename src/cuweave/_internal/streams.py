"""The resolved form of every stream: :class:`Stream`, an int handle and the object keeping it
alive. :func:`~cuweave._internal.packages.resolve_stream` turns the accepted forms into one
(the packages' stream objects and current streams are their adapters' business)."""

from __future__ import annotations

__all__ = ["Stream"]


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
