"""Which adapter serves which array package: filled by the adapter modules as they are imported.

A leaf module (it imports nothing of cuweave), so that the array records (:mod:`.arrays`) and
memory (:mod:`.memory`) can look an adapter up without importing the adapters themselves.
"""

from __future__ import annotations

__all__ = ["ADAPTERS", "BY_MODULE", "adapter"]

#: package name (``Operand.package``) -> adapter; ``None`` (no package) is the generic one
ADAPTERS: dict = {}
#: top-level module of an array's type -> adapter, for packages found by their module (JAX)
BY_MODULE: dict = {}


def adapter(package: str | None):
    """The adapter of ``Operand.package`` ``package`` (the generic one for any other)."""
    found = ADAPTERS.get(package)
    return found if found is not None else ADAPTERS[None]
