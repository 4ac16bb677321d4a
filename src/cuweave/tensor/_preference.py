"""The plan preference of a contraction (nvmath-python's ``ContractionPlanPreference``)."""

from __future__ import annotations

from .._bindings.cutensor import Algo, AutotuneMode, CacheMode, JitMode
from .._internal.errors import InvalidOptionError, InvalidStateError
from .._internal.options import check_enum

__all__ = ["ContractionPlanPreference"]

#: attribute -> (enum class or None for an int, the value cuTENSOR starts from or None)
_ATTRIBUTES = {
    "autotune_mode": (AutotuneMode, AutotuneMode.NONE),
    "cache_mode": (CacheMode, CacheMode.PEDANTIC),
    "incremental_count": (None, None),
    "algo": (Algo, Algo.DEFAULT),
    "kernel_rank": (None, 0),
    "jit": (JitMode, JitMode.NONE),
    "gpu_arch": (None, None),
}


class ContractionPlanPreference:
    """Preferences for :meth:`BinaryContraction.plan` / :meth:`TernaryContraction.plan`.

    Reached through the ``plan_preference`` property of a contraction; values set here take
    effect at the next ``plan()``. Attributes (cuTENSOR's plan-preference attributes):
    ``autotune_mode`` (:class:`ContractionAutotuneMode`), ``cache_mode``
    (:class:`ContractionCacheMode`), ``incremental_count`` (kernels tried by incremental
    autotuning), ``algo`` (:class:`ContractionAlgo`, or a GEMM-like algorithm >= 0),
    ``kernel_rank`` (0: the best kernel of the performance model, 1: the second...), ``jit``
    (:class:`ContractionJitMode`) and ``gpu_arch`` (``10 * major + minor``). Values never
    set read as cuTENSOR's defaults (``None`` where cuTENSOR documents none). Using it after
    the contraction's ``free()`` raises ``RuntimeError``.

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.tensor import BinaryContraction, ContractionAlgo
    >>> a, b = np.ones((4, 5)), np.ones((5, 3))
    >>> with BinaryContraction("ij,jk->ik", a, b, execution="cpu") as c:
    ...     c.plan_preference.algo = ContractionAlgo.TTGT
    ...     c.plan()
    ...     print(c.plan_preference.algo.name, c.execute().sum())
    TTGT 60.0
    """

    __slots__ = ("_owner", "_values")

    def __init__(self, owner):
        self._owner = owner
        self._values: dict = {}

    def _check(self):
        if self._owner.is_freed:
            raise InvalidStateError("ContractionPlanPreference cannot be used after its "
                                    "contraction's free()")

    def values(self) -> dict:
        """The values set so far (attribute -> value)."""
        return dict(self._values)

    def _get(self, name):
        self._check()
        return self._values.get(name, _ATTRIBUTES[name][1])

    def _set(self, name, value):
        self._check()
        enum = _ATTRIBUTES[name][0]
        if enum is Algo and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            self._values[name] = int(value)  # a specific GEMM-like algorithm
            return
        if enum is not None:
            value = check_enum(value, enum, name)
        elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidOptionError(f"{name} must be a non-negative int, got {value!r}")
        self._values[name] = value


def _property(name):
    return property(lambda self: self._get(name), lambda self, v: self._set(name, v),
                    doc=f"The plan preference {name!r}.")


for _name in _ATTRIBUTES:
    setattr(ContractionPlanPreference, _name, _property(_name))
del _name
