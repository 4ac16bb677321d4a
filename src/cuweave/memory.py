"""Device memory allocators for cuweave (nvmath-python's ``nvmath.memory``).

Pass an instance of a :class:`BaseCUDAMemoryManager` or :class:`BaseCUDAMemoryManagerAsync`
subclass as the ``allocator`` option of :mod:`cuweave.fft` and :mod:`cuweave.linalg.advanced`
to take workspaces' memory from your own pool (and that of the results of operands whose
package has no pool: other DLPack producers). Without one, memory comes from the operands'
package pool (torch, CuPy), else from a ``cuda.core`` memory resource. Results of torch and
CuPy operands always come from their package's pool, as nvmath-python's do.

Examples
--------
A stream-ordered allocator over CuPy's pool (any object exposing ``device_ptr``,
``device_pointer`` or ``ptr`` may be returned; cuweave keeps it alive while it uses the memory):

>>> from cuweave.memory import BaseCUDAMemoryManagerAsync, MemoryPointer
>>> class CupyAllocator(BaseCUDAMemoryManagerAsync):
...     def memalloc_async(self, size, stream):
...         import cupy
...         # stream: a cuda.core Stream (CuPy < 14: cupy.cuda.ExternalStream(int(stream.handle)))
...         with cupy.cuda.Stream.from_external(stream):
...             return cupy.cuda.alloc(size)      # a cupy.cuda.MemoryPointer (has .ptr)
>>> allocator = CupyAllocator(0, None)
>>> options = {"allocator": allocator}            # matmul(a, b, options=options), fft(...)
"""

from ._internal.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer

__all__ = ["BaseCUDAMemoryManager", "BaseCUDAMemoryManagerAsync", "MemoryPointer"]
