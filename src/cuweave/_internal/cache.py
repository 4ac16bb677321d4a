"""The one plan-cache helper: an LRU of planned objects keyed by spec keys.

Bounded by entry count and by total workspace bytes; thread-safe. A hit removes the object from
the cache (so two threads never share one planned object); the caller puts it back after use.
Evicted objects are freed.

The object used last waits in a one-entry *front slot* rather than in the LRU: a loop calling
one operation takes and returns it with two list operations (atomic under the GIL) instead of
two locked LRU updates. The slot counts in ``len`` and ``hits``, is searched by :meth:`pop` and
freed by :meth:`clear`; a call with another key demotes it to the LRU. So at most
``maxsize + 1`` objects are kept, the slot's workspace outside the byte bound.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["PlanCache"]


class PlanCache:
    """LRU cache ``key → object``; objects are handed out exclusively (``pop``/``put``).

    Examples
    --------
    >>> class Obj:
    ...     def free(self):
    ...         print("freed")
    >>> c = PlanCache(maxsize=1)
    >>> c.put("k1", Obj())  # into the front slot
    >>> c.put("k2", Obj())  # into the LRU
    >>> c.put("k3", Obj())  # LRU over maxsize: k2 is evicted and freed
    freed
    >>> c.pop("k1") is not None, c.pop("k2") is None, c.pop("k3") is not None
    (True, True, True)
    """

    def __init__(self, maxsize: int = 64, max_workspace_bytes: int = 1 << 30):
        self.maxsize = maxsize
        self.max_workspace_bytes = max_workspace_bytes
        self._items: OrderedDict = OrderedDict()  # key -> list[(obj, nbytes)]
        self._count = 0
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._front: list = []  # [] or [(key, obj, workspace_bytes)]

    def pop(self, key):
        """Take the most recently stored object for ``key`` (``None`` on a miss)."""
        front, demoted = self._front, None
        if front:
            try:
                demoted = front.pop()
            except IndexError:  # another thread took it first
                pass
            else:
                if demoted[0] == key:
                    self.hits += 1
                    return demoted[1]
        obj = self._pop_lru(key)
        if demoted is not None:  # after the lookup, so the demotion cannot evict the hit
            self._put_lru(*demoted)
        return obj

    def _pop_lru(self, key):
        with self._lock:
            entries = self._items.get(key)
            if not entries:
                self.misses += 1
                return None
            obj, nbytes = entries.pop()
            if not entries:
                del self._items[key]
            self._count -= 1
            self._bytes -= nbytes
            self.hits += 1
            return obj

    def put(self, key, obj, workspace_bytes: int = 0) -> None:
        """Store ``obj`` under ``key`` (front slot first), evicting the least recently used."""
        front = self._front
        if front:
            self._put_lru(key, obj, workspace_bytes)
            return
        front.append((key, obj, workspace_bytes))
        while len(front) > 1:  # another thread's put raced this one: keep the slot single
            try:
                entry = front.pop(0)
            except IndexError:
                break
            self._put_lru(*entry)

    def _put_lru(self, key, obj, workspace_bytes: int) -> None:
        evicted = []
        with self._lock:
            self._items.setdefault(key, []).append((obj, workspace_bytes))
            self._items.move_to_end(key)
            self._count += 1
            self._bytes += workspace_bytes
            while self._count > self.maxsize or (
                    self._bytes > self.max_workspace_bytes and self._count > 1):
                old_key, entries = next(iter(self._items.items()))
                old, nb = entries.pop(0)
                if not entries:
                    del self._items[old_key]
                self._count -= 1
                self._bytes -= nb
                evicted.append(old)
        for old in evicted:
            _free(old)

    def clear(self) -> None:
        front, self._front = self._front, []
        for _, obj, _ in front:
            _free(obj)
        with self._lock:
            items, self._items = self._items, OrderedDict()
            self._count = self._bytes = 0
        for entries in items.values():
            for obj, _ in entries:
                _free(obj)

    def __len__(self) -> int:
        return self._count + len(self._front)


def _free(obj) -> None:
    try:
        obj.free()
    except Exception:
        pass
