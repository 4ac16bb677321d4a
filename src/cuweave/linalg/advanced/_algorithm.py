"""``Algorithm``: one cuBLASLt algorithm (``cublasLtMatmulAlgo_t``), picklable and configurable."""

from __future__ import annotations

import ctypes

from ..._bindings import cublaslt as lt

__all__ = ["Algorithm"]

_CONFIG = {
    "tile": lt.AlgoConfigAttribute.TILE_ID,
    "stages": lt.AlgoConfigAttribute.STAGES_ID,
    "split_k": lt.AlgoConfigAttribute.SPLITK_NUM,
    "reduction_scheme": lt.AlgoConfigAttribute.REDUCTION_SCHEME,
    "cta_swizzling": lt.AlgoConfigAttribute.CTA_SWIZZLING,
    "custom_option": lt.AlgoConfigAttribute.CUSTOM_OPTION,
    "inner_shape": lt.AlgoConfigAttribute.INNER_SHAPE_ID,
    "cluster_shape": lt.AlgoConfigAttribute.CLUSTER_SHAPE_ID,
}


class Algorithm:
    """A matmul algorithm from :meth:`Matmul.plan`, in heuristic (or autotuned) order.

    The 64 opaque bytes of ``cublasLtMatmulAlgo_t`` are kept, so an ``Algorithm`` pickles and
    can be handed back through ``plan(algorithms=[...])`` (with the same cuBLASLt version) to
    skip the heuristics. Configuration attributes (``tile``, ``stages``, ``split_k``,
    ``reduction_scheme``, ``cta_swizzling``, ``custom_option``, ``inner_shape``,
    ``cluster_shape``) are readable and settable; ``capabilities`` is a dict of the
    ``CUBLASLT_ALGO_CAP_*`` values. The CPU backend has a single algorithm with
    ``algorithm_id == -1`` and no configuration.
    """

    __slots__ = ("_data", "workspace_size", "waves_count", "_algo")

    def __init__(self, data: bytes | None, workspace_size: int = 0, waves_count: float = 0.0):
        self._data = bytes(data) if data is not None else None
        self.workspace_size = int(workspace_size)
        self.waves_count = float(waves_count)
        self._algo = None

    @classmethod
    def from_heuristic(cls, result) -> Algorithm:
        return cls(bytes(result.algo), result.workspaceSize, result.wavesCount)

    @classmethod
    def cpu(cls) -> Algorithm:
        return cls(None)

    @property
    def is_cpu(self) -> bool:
        return self._data is None

    @property
    def algo(self) -> lt.MatmulAlgo:
        """The ``cublasLtMatmulAlgo_t`` structure (kept alive by this object)."""
        if self._algo is None:
            if self._data is None:
                raise TypeError("the CPU algorithm has no cuBLASLt structure")
            self._algo = lt.MatmulAlgo.from_buffer_copy(self._data)
        return self._algo

    @property
    def algorithm_id(self) -> int:
        if self._data is None:
            return -1
        return int.from_bytes(self._data[:4], "little", signed=True)

    @property
    def capabilities(self) -> dict:
        if self._data is None:
            return {}
        caps = {}
        for attr in lt.AlgoCapAttribute:
            try:
                caps[attr.name] = lt.algo_cap_get_attribute(self.algo, attr)
            except Exception:  # attribute unknown to this cuBLASLt version
                continue
        return caps

    def _get(self, name):
        if self._data is None:
            return None
        return lt.algo_config_get_attribute(self.algo, _CONFIG[name])

    def _set(self, name, value):
        if self._data is None:
            raise TypeError(f"{name} cannot be set on the CPU algorithm")
        lt.algo_config_set_attribute(self.algo, _CONFIG[name], int(value))
        self._data = bytes(self._algo)

    def config(self) -> dict:
        """All configuration attributes as a dict."""
        return {name: self._get(name) for name in _CONFIG}

    def __getstate__(self):
        data = bytes(self._algo) if self._algo is not None else self._data
        return {"data": data, "workspace_size": self.workspace_size,
                "waves_count": self.waves_count}

    def __setstate__(self, state):
        self._data = state["data"]
        self.workspace_size = state["workspace_size"]
        self.waves_count = state["waves_count"]
        self._algo = None

    def __eq__(self, other):
        return isinstance(other, Algorithm) and self.__getstate__() == other.__getstate__()

    def __hash__(self):
        return hash(self.__getstate__()["data"])

    def __repr__(self) -> str:
        if self._data is None:
            return "Algorithm(cpu)"
        return (f"Algorithm(id={self.algorithm_id}, workspace={self.workspace_size}, "
                f"waves={self.waves_count:.2f})")

    def ref(self):
        """``ctypes.byref`` of the structure for the hot path."""
        return ctypes.byref(self.algo)


def _make_property(name):
    return property(lambda self: self._get(name), lambda self, v: self._set(name, v),
                    doc=f"``CUBLASLT_ALGO_CONFIG_{_CONFIG[name].name}``")


for _name in _CONFIG:
    setattr(Algorithm, _name, _make_property(_name))
