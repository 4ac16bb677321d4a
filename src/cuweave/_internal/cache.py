"""The one plan-cache helper: an LRU of planned objects, and the one builder of their keys.

:func:`plan_key` makes every function form's key: operand records by :func:`operand_key`
(what a plan needs of an operand), everything else by :func:`freeze` (a hashable stand-in,
by content). Keys read straight off torch/CuPy device arrays, without wrapping them, come from
the package adapters' probes (``packages.probe``, ``packages.pair_prober``).

Bounded by the number of objects it holds and by their total workspace bytes; thread-safe. A
hit removes the object from the cache (so two threads never share one planned object); the
caller puts it back after use. Evicted objects are freed.

The object put last waits in a one-entry *front slot* (a loop over one problem takes it and
gives it back with two list operations and one key comparison); the other idle objects wait in
a dict in least-recently-used order (an object leaving the slot is re-inserted at its end).
Every hit and put-back is a list or dict operation, atomic under the GIL, with no lock: a loop
over one problem or over several (the function forms in a training step, the products of an
MLP layer) stays on that path. A key holds one idle object in the dict; a second one (two
threads ran the same problem at once) waits in a short list of spares, searched on a miss and
evicted first.

The bounds are enforced, under the lock, when an object the cache has not held before is put
(or one comes back with another workspace size): the least recently used idle objects are
freed until the count and the bytes fit. Objects in use count towards the bounds but are never
evicted, so a cache whose every object is in use may hold more for a while.
"""

from __future__ import annotations

import threading

import numpy as np

from .arrays import ALIGNMENT, Operand

__all__ = ["PlanCache", "plan_key", "operand_key", "freeze"]


def operand_key(op, aligned: bool = True) -> tuple | None:
    """What a plan needs of an operand record: package, shape, strides, dtype, place,
    conjugation and, with ``aligned``, a device pointer's alignment (a less aligned operand
    gets its own plan: the library's kernels assume the planned alignment)."""
    if op is None:
        return None
    return (op.package, op.shape, op.strides, op.dtype, op.device, op.device_id, op.conj,
            ALIGNMENT[op.ptr & 255] if aligned and op.device == "cuda" else 0)


def freeze(value):
    """A hashable stand-in for an argument value (dataclasses, dicts and arrays by content)."""
    if value is None:
        return None
    t = type(value)
    if t is Operand:
        return operand_key(value)
    if t is str or t is int or t is float or t is bool or isinstance(value, str | int | float):
        return value
    if t is tuple:
        return tuple(map(freeze, value))
    if isinstance(value, dict):
        return (dict, tuple(sorted((k, freeze(v)) for k, v in value.items())))
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is not None:
        return (type(value), tuple(freeze(getattr(value, f)) for f in fields))
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):  # compares safely with tuples, unlike NumPy scalars
        return (value.dtype.str, value.item())
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        # another package's array (a scale tensor, ...): never held by the cache, never
        # compared elementwise; the call rebinds it, so only its kind enters the key
        return ("array", type(value).__module__, str(value.dtype), tuple(value.shape))
    try:
        hash(value)
    except TypeError:
        return (type(value), repr(value))
    return value


def plan_key(*parts) -> tuple:
    """The key of a plan made from ``parts`` (operand records, options, anything else that
    shapes the plan), each by :func:`freeze`."""
    return tuple([None if p is None else freeze(p) for p in parts])


class PlanCache:
    """LRU cache ``key → object``; objects are handed out exclusively (``pop``/``put``).

    Examples
    --------
    >>> class Obj:
    ...     def free(self):
    ...         print("freed")
    >>> c = PlanCache(maxsize=2)
    >>> c.put("k1", Obj())
    >>> c.put("k2", Obj())
    >>> c.put("k3", Obj())  # a third object: the least recently used idle one, k1, goes
    freed
    >>> c.pop("k1") is None, c.pop("k2") is not None, c.pop("k3") is not None
    (True, True, True)
    """

    def __init__(self, maxsize: int = 64, max_workspace_bytes: int = 1 << 30):
        self.maxsize = maxsize
        self.max_workspace_bytes = max_workspace_bytes
        self._front: list = []  # [] or [(key, obj, nbytes)]: the object put last
        self._idle: dict = {}   # key -> (obj, nbytes), least recently used first
        self._spares: list = []  # [(key, obj, nbytes)]: second idle objects of a key
        self._held: dict = {}   # id(obj) -> nbytes of every object counted (idle or in use)
        self._bytes = 0
        self._known = (None, None)  # (obj, nbytes) of the last put found counted: no lookup
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def pop(self, key):
        """Take the object stored under ``key`` (``None`` on a miss)."""
        front = self._front
        if front:
            try:
                slot = front.pop()
            except IndexError:  # another thread took it first
                pass
            else:
                if slot[0] == key:
                    self.hits += 1
                    return slot[1]
                self._idle_put(slot)  # demoted: the most recently used of the dict
        entry = self._idle.pop(key, None)
        if entry is None and (not self._spares or (entry := self._pop_spare(key)) is None):
            self.misses += 1
            return None
        self.hits += 1
        return entry[0]

    def _pop_spare(self, key):
        with self._lock:
            for i, (k, obj, nbytes) in enumerate(self._spares):
                if k == key:
                    del self._spares[i]
                    return obj, nbytes
        return None

    def put(self, key, obj, workspace_bytes: int = 0) -> None:
        """Store ``obj`` under ``key`` as the most recently used; a new object (or a new
        workspace size) is counted and may evict the least recently used idle objects."""
        front = self._front
        if front:  # the slot's object becomes the most recently used of the dict
            try:
                slot = front.pop()
            except IndexError:
                pass
            else:
                self._idle_put(slot)
        front.append((key, obj, workspace_bytes))
        while len(front) > 1:  # another thread's put raced this one: keep the slot single
            try:
                slot = front.pop(0)
            except IndexError:
                break
            self._idle_put(slot)
        known = self._known
        if known[0] is not obj or known[1] != workspace_bytes:
            if self._held.get(id(obj)) != workspace_bytes:
                self._count_in(obj, workspace_bytes)
            self._known = (obj, workspace_bytes)

    def _idle_put(self, slot) -> None:
        key, obj, nbytes = slot
        entry = (obj, nbytes)
        if self._idle.setdefault(key, entry) is not entry:
            with self._lock:
                self._spares.append(slot)

    def _count_in(self, obj, workspace_bytes: int) -> None:
        evicted = []
        with self._lock:
            self._bytes += workspace_bytes - self._held.get(id(obj), 0)
            self._held[id(obj)] = workspace_bytes
            while len(self._held) > self.maxsize or (
                    self._bytes > self.max_workspace_bytes and len(self._held) > 1):
                victim = self._least_recent(obj)
                if victim is None:  # every other object is in use
                    break
                self._bytes -= self._held.pop(id(victim), 0)
                evicted.append(victim)
            if self._known[0] in evicted:
                self._known = (None, None)
        for victim in evicted:
            _free(victim)

    def _least_recent(self, keep):
        """Remove and return the least recently used idle object other than ``keep`` (spares
        first, the front slot last); None when there is none. Called with the lock held."""
        if self._spares:
            return self._spares.pop(0)[1]
        for key in list(self._idle):
            entry = self._idle.get(key)
            if entry is None or entry[0] is keep:
                continue
            got = self._idle.pop(key, None)  # another thread may have taken or replaced it
            if got is entry:
                return entry[0]
            if got is not None and self._idle.setdefault(key, got) is not got:
                self._spares.append((key, *got))
        try:
            slot = self._front.pop()
        except IndexError:
            return None
        if slot[1] is not keep:
            return slot[1]
        self._front.append(slot)
        return None

    def clear(self) -> None:
        """Free every idle object (objects in use are counted until they come back)."""
        with self._lock:
            front, self._front = self._front, []
            idle, self._idle = self._idle, {}
            spares, self._spares = self._spares, []
            victims = ([obj for _, obj, _ in front] + [obj for obj, _ in idle.values()]
                       + [obj for _, obj, _ in spares])
            self._known = (None, None)
            for obj in victims:
                self._bytes -= self._held.pop(id(obj), 0)
        for obj in victims:
            _free(obj)

    def __len__(self) -> int:
        """Idle objects (those a ``pop`` can return)."""
        return len(self._front) + len(self._idle) + len(self._spares)

    @property
    def held(self) -> int:
        """Objects counted towards ``maxsize``: idle ones and those handed out."""
        return len(self._held)


def _free(obj) -> None:
    try:
        obj.free()
    except Exception:
        pass
