"""``Algorithm``: one cuBLASLt algorithm (``cublasLtMatmulAlgo_t``), picklable and configurable."""

from __future__ import annotations

import ctypes

import numpy as np

from ..._bindings import cublaslt as lt
from ..._internal.errors import InvalidOperandError

__all__ = ["Algorithm", "matmul_heuristic_result_dtype"]

#: one ``cublasLtMatmulHeuristicResult_t`` as a NumPy record (``Algorithm.as_numpy``): the
#: 64 opaque bytes of the algorithm, then the workspace size, state and waves count
matmul_heuristic_result_dtype = np.dtype([
    ("algo", "<u8", (8,)), ("workspace_size", "<u8"), ("state", "<i4"),
    ("waves_count", "<f4"), ("reserved", "<i4", (4,))])
assert matmul_heuristic_result_dtype.itemsize == ctypes.sizeof(lt.HeuristicResult)

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

    Users do not normally make one: :meth:`Matmul.plan` and :meth:`Matmul.autotune` return
    them, and :meth:`from_numpy` or pickling brings saved ones back.

    Parameters
    ----------
    data : bytes or None
        The 64 opaque bytes of a ``cublasLtMatmulAlgo_t``, or ``None`` for the CPU
        algorithm.
    workspace_size : int, optional
        The workspace in bytes the algorithm needs, as cuBLASLt's heuristics reported it
        (kept as the ``workspace_size`` attribute). The default is 0.
    waves_count : float, optional
        cuBLASLt's estimate of the GPU occupancy: the ratio of the thread blocks launched to
        those that fit on the GPU at once (kept as ``waves_count``). The default is 0.0.

    Raises
    ------
    InvalidOperandError
        If ``data`` is neither ``None`` nor 64 bytes.

    Examples
    --------
    >>> from cuweave.linalg.advanced import Algorithm
    >>> Algorithm.cpu()
    Algorithm(cpu)
    >>> a = Algorithm(bytes(64), workspace_size=1024)
    >>> a.is_cpu, a.algorithm_id, a.workspace_size
    (False, 0, 1024)
    """

    __slots__ = ("_data", "workspace_size", "waves_count", "_algo")

    def __init__(self, data: bytes | None, workspace_size: int = 0, waves_count: float = 0.0):
        if data is not None and (not isinstance(data, bytes | bytearray | memoryview)
                                 or len(data) != ctypes.sizeof(lt.MatmulAlgo)):
            raise InvalidOperandError(
                f"data must be the {ctypes.sizeof(lt.MatmulAlgo)} bytes of a "
                f"cublasLtMatmulAlgo_t (or None for the CPU algorithm), got {data!r:.60}")
        self._data = bytes(data) if data is not None else None
        self.workspace_size = int(workspace_size)
        self.waves_count = float(waves_count)
        self._algo = None

    @classmethod
    def from_heuristic(cls, result) -> Algorithm:
        """The algorithm of one result of cuBLASLt's heuristics.

        Parameters
        ----------
        result : cuweave._bindings.cublaslt.HeuristicResult
            One ``cublasLtMatmulHeuristicResult_t`` filled by
            ``cublasLtMatmulAlgoGetHeuristic``: its algorithm bytes, workspace size and
            waves count are copied.

        Returns
        -------
        Algorithm
        """
        return cls(bytes(result.algo), result.workspaceSize, result.wavesCount)

    @classmethod
    def cpu(cls) -> Algorithm:
        """The single algorithm of the CPU backend (``is_cpu``; ``algorithm_id == -1``).

        Returns
        -------
        Algorithm

        Examples
        --------
        >>> from cuweave.linalg.advanced import Algorithm
        >>> Algorithm.cpu().algorithm_id
        -1
        """
        return cls(None)

    @property
    def is_cpu(self) -> bool:
        """``True`` for the CPU backend's algorithm (which has no cuBLASLt structure and no
        configuration), ``False`` for a cuBLASLt algorithm."""
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
        """The cuBLASLt algorithm ID (``CUBLASLT_ALGO_CONFIG_ID``, the first field of the
        opaque structure), or -1 for the CPU algorithm. Algorithms with the same ID differ
        only in their configuration (tile, stages, split-K, ...)."""
        if self._data is None:
            return -1
        return int.from_bytes(self._data[:4], "little", signed=True)

    @property
    def capabilities(self) -> dict:
        """What this algorithm supports, as a dict from ``CUBLASLT_ALGO_CAP_*`` names (without
        the prefix, such as ``"SPLITK_SUPPORT"`` or ``"TILE_IDS"``) to cuBLASLt's values;
        attributes this cuBLASLt version does not know are left out. Read from the GPU
        library each time; empty for the CPU algorithm."""
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

    def as_numpy(self) -> np.ndarray:
        """A copy of this algorithm as a one-element array of
        ``matmul_heuristic_result_dtype``, which ``np.save(..., allow_pickle=False)``
        can store; :meth:`from_numpy` makes the algorithm again.

        Examples
        --------
        >>> import numpy as np
        >>> from cuweave.linalg.advanced import Algorithm
        >>> record = np.zeros(1, Algorithm.dtype)
        >>> record["workspace_size"] = 1024
        >>> Algorithm.from_numpy(record).as_numpy()["workspace_size"].item()
        1024
        """
        if self._data is None:
            raise InvalidOperandError("algorithm must be a cuBLASLt algorithm to be saved as "
                                      "an array, got the CPU algorithm")
        out = np.zeros(1, matmul_heuristic_result_dtype)
        out["algo"] = np.frombuffer(self.__getstate__()["data"], "<u8")
        out["workspace_size"] = self.workspace_size
        out["waves_count"] = self.waves_count
        return out

    @classmethod
    def from_numpy(cls, array) -> Algorithm:
        """The algorithm :meth:`as_numpy` saved.

        Parameters
        ----------
        array : numpy.ndarray
            One record of ``matmul_heuristic_result_dtype`` (e.g. loaded with
            ``np.load``).

        Returns
        -------
        Algorithm
        """
        arr = np.asarray(array)
        if arr.dtype != matmul_heuristic_result_dtype or arr.size != 1:
            raise InvalidOperandError(
                f"array must be one record of matmul_heuristic_result_dtype, got dtype "
                f"{arr.dtype} with {arr.size} elements")
        rec = arr.reshape(1)[0]
        return cls(np.ascontiguousarray(rec["algo"]).tobytes(), int(rec["workspace_size"]),
                   float(rec["waves_count"]))

    #: the record type of :meth:`as_numpy`
    dtype = matmul_heuristic_result_dtype

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
