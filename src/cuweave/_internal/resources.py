"""Stream-ordered device buffers shared by every run of one planned object (matmul and FFT).

A planned object owns a few named device buffers (a workspace, host-staging and scratch
buffers) that every run uses, whatever its stream. :class:`StreamResources` keeps those uses in
stream order with four rules:

1. **Enter**: a run on a stream other than the last run's first makes it wait (on the device)
   for the work queued so far on the last one (an event recorded there, or the mark below).
2. **Mark**: where the caller may destroy the last run's stream right after the call (a stream
   passed explicitly, released operands), :meth:`mark` records an event that stands for its
   work from then on; the stream handle is never touched again.
3. **Replace**: a buffer is freed or replaced only once its last user is done with it: when that
   is the stream it was allocated on and frees are stream-ordered (cuweave's pools, the
   package's pool, an ``memalloc_async`` allocator), the free itself is ordered; otherwise the
   mark, else the last stream (alive: a run is in progress on it), is waited for.
4. **Close**: at the end (free, plan-cache eviction, possibly long after the last run) the last
   stream may be gone: the mark, or stream 0, is waited for, else the whole device.

A run on a stream that is capturing a CUDA graph records nothing and waits on nothing (an
event recorded outside the capture, or on the legacy stream, would invalidate it): its work
runs when the graph is launched, ordered by the stream it is launched on, and the order of
the eager runs is left as it was.

Examples
--------
>>> res = StreamResources(device_id=0, package=None, allocator=None)
>>> res.last is None and not res.has("work")
True
"""

from __future__ import annotations

from . import cuda
from .packages import allocate

__all__ = ["StreamResources"]


class StreamResources:
    """Named device buffers of one planned object, ordered across streams (module docstring).

    Parameters
    ----------
    device_id : int
    package : str or None
        Whose pool the buffers come from (``None``: the device's cuda.core memory resource).
    allocator : optional
        ``options.allocator`` (takes precedence over the package's pool).
    """

    __slots__ = ("_mem", "package", "device_id", "allocator", "last", "_event", "_marked")

    def __init__(self, device_id: int, package: str | None, allocator=None):
        self._mem: dict = {}  # name -> (MemoryPointer, stream it was allocated on)
        self.package = package
        self.device_id = device_id
        self.allocator = allocator
        #: the stream of the latest run (the buffers' last user), None before any
        self.last = None
        self._event = None
        self._marked = False  # _event stands for the work queued on ``last``

    # ---- rule 1 ------------------------------------------------------------------------------
    def enter(self, stream: int) -> bool:
        """A run moves to ``stream``: order it after the buffers' last user (no-op when it is
        the same stream or there are no buffers yet). False: ``stream`` is capturing a graph,
        nothing was ordered or changed (the next run on it must enter again)."""
        last = self.last
        if last is not None and last != stream and self._mem:
            if cuda.is_capturing(stream):
                return False
            if not self._marked:
                self._record(last)
            cuda.stream_wait_event(stream, self._event)
        self.last = stream
        self._marked = False
        return True

    # ---- rule 2 ------------------------------------------------------------------------------
    def mark(self, stream: int | None = None) -> bool:
        """Record now that the work queued on ``stream`` (default: the last run's) ends the
        buffers' use; later ordering waits on the event and never touches the stream again.
        Returns whether anything was recorded (nothing when there are no buffers, no run, or
        the last stream is the legacy default stream, which always exists)."""
        stream = self.last if stream is None else stream
        if not self._mem or stream is None or self._marked or (stream == 0 and self.last == 0):
            return False
        if cuda.is_capturing(stream):  # the capture's work has not run: nothing to stand for
            return False
        self._record(stream)
        self.last = stream
        return True

    def _record(self, stream: int) -> None:
        if self._event is None:
            self._event = cuda.Event(timing=False)
        self._event.record(stream)
        self._marked = True

    # ---- buffers -----------------------------------------------------------------------------
    def get(self, name: str, nbytes: int, stream: int) -> int:
        """The device pointer of buffer ``name`` of at least ``nbytes``, allocated ordered on
        ``stream`` when it is missing or too small (the old one is freed by rule 3)."""
        entry = self._mem.get(name)
        if entry is not None and entry[0].size >= nbytes:
            return entry[0].device_ptr
        if entry is not None:
            self._free(self._mem.pop(name))
        mem = allocate(nbytes, package=self.package, device_id=self.device_id, stream=stream,
                       allocator=self.allocator)
        self._mem[name] = (mem, stream)
        if self.last is None:
            self.last = stream  # the allocation itself is work queued on ``stream``
        return mem.device_ptr

    def has(self, name: str) -> bool:
        return name in self._mem

    def size(self, name: str) -> int:
        entry = self._mem.get(name)
        return entry[0].size if entry is not None else 0

    def release(self, name: str | None = None) -> None:
        """Free buffer ``name`` (default: all) by rule 3."""
        names = list(self._mem) if name is None else [name]
        for n in names:
            entry = self._mem.pop(n, None)
            if entry is not None:
                self._free(entry)

    # ---- rule 3 ------------------------------------------------------------------------------
    def _free(self, entry) -> None:
        mem, alloc_stream = entry
        last = self.last
        ordered = self.allocator is None or hasattr(self.allocator, "memalloc_async")
        if last is not None and (last != alloc_stream or not ordered):
            self.wait()
        mem.free()

    def wait(self) -> None:
        """Block until the buffers' last user is done (the mark, else the last stream)."""
        if self._marked:
            self._event.synchronize()
        elif self.last is not None:
            cuda.synchronize(self.last)

    # ---- rule 4 ------------------------------------------------------------------------------
    def close(self) -> None:
        """Free every buffer; the last stream may be gone by now (rule 4)."""
        if not self._mem:
            self.last = None
            return
        last, ordered = self.last, self.allocator is None or hasattr(self.allocator,
                                                                      "memalloc_async")
        needs = last is not None and (not ordered or any(s != last for _, s in
                                                          self._mem.values()))
        try:
            if needs and not self._marked and last != 0:
                cuda.set_device(self.device_id)
                cuda.check(cuda.driver().cuCtxSynchronize(), "cuCtxSynchronize")
            elif needs:
                self.wait()
        except Exception:  # no usable driver any more (interpreter shutdown)
            pass
        for mem, _ in self._mem.values():
            mem.free()
        self._mem.clear()
        self.last = None
        self._marked = False
