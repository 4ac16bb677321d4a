"""One lifecycle base for every stateful cuweave object (Matmul, FFT, ...).

Subclasses declare what they hold and implement :meth:`_release`; the base gives phase
preconditions (:meth:`_require_planned`), idempotent :meth:`free`, the context manager, and
cleanup at garbage collection that never raises.
"""

from __future__ import annotations

from .errors import InvalidStateError
from .logging import get_logger

__all__ = ["StatefulObject", "NotCopyableError"]

_log = get_logger("lifecycle")


class NotCopyableError(InvalidStateError, TypeError):
    """A planned object was pickled or copied (a ``TypeError``, as pickle raises for objects
    it cannot pickle)."""


class StatefulObject:
    """Base class: ``plan`` before ``execute``; ``free()`` once; usable as a context manager.

    Examples
    --------
    >>> class Thing(StatefulObject):
    ...     def _release(self):
    ...         print("released")
    >>> with Thing() as t:
    ...     t._mark_planned()
    ...     t._require_planned("execute")
    released
    >>> t.free()  # idempotent
    """

    _planned: bool = False
    _freed: bool = False

    # A planned object holds library plans, descriptors and device memory that only this
    # process can use: it is neither pickled nor copied (a typed error, not ctypes' own).
    def __reduce_ex__(self, protocol):
        raise NotCopyableError(
            f"{type(self).__name__} objects cannot be pickled or copied (they hold library "
            "plans and device memory of this process), got a request to pickle one; create a "
            "new one from the same arguments instead")

    def __copy__(self):
        self.__reduce_ex__(2)

    def __deepcopy__(self, memo):
        self.__reduce_ex__(2)

    def _mark_planned(self) -> None:
        self._planned = True

    def _require_valid(self, method: str) -> None:
        if self._freed:
            raise InvalidStateError(
                f"{type(self).__name__}.{method}() cannot be called after free()")

    def _require_planned(self, method: str) -> None:
        if self._freed:
            self._require_valid(method)
        if not self._planned:
            raise InvalidStateError(
                f"{type(self).__name__}.{method}() requires plan() to be called first")

    def _release(self) -> None:
        """Free native resources (descriptors, plans, workspaces). Override in subclasses."""

    def free(self) -> None:
        """Release every resource this object holds; safe to call more than once."""
        if self._freed:
            return
        self._freed = True
        self._planned = False
        self._release()

    @property
    def is_freed(self) -> bool:
        """``True`` once :meth:`free` has been called (or the object was used as a context
        manager and its ``with`` block ended); the object then holds no resources and every
        method but ``free`` raises :class:`~cuweave.InvalidStateError`."""
        return self._freed

    def __enter__(self):
        self._require_valid("__enter__")
        return self

    def __exit__(self, *exc) -> None:
        self.free()

    def __del__(self):
        try:
            self.free()
        except Exception as e:  # never raise from a finalizer
            try:
                _log.debug("cleanup of %s failed: %s", type(self).__name__, e)
            except Exception:
                pass
