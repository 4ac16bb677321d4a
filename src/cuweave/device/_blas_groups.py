"""cuBLASDx tensor device functions generated in groups, when a kernel is linked.

A kernel calls one libmathdx function per distinct tensor operation (``copy`` of A, of B,
``clear``, ``execute``, ``copy_fragment``, ...). Each used to be one libmathdx code generation
(an NVRTC compilation that parses cuBLASDx again): five functions cost ~60 s on 2 cores. Here
numba's lowering only *requests* a function (its symbol is ours, so the call can be emitted
right away) and links a lazy LTO-IR object; the first time the linker reads that object, every
function requested so far for the same GEMM description is generated in **one** compilation
(~22 s for those five). Functions whose arguments include tensor structs or ``int*`` are
called through small C++ forwarding functions (:func:`._blas_mathdx.shim_source`, one NVRTC
compilation of a few tens of milliseconds per group): numba's direct calls of struct-by-value
functions (and of functions whose pointer types differed) ended up as indirect calls after the
link, never inlined. A request made after its description's group was generated starts a new
group (a second compilation); :func:`._warm.warm_kernels` lists every kernel's requests first.

On disk (:mod:`._cache`) a group is two entries (the functions' LTO-IR, the shims' LTO-IR) and
every request an index entry naming its group, so a request generated once is found by any
later process. A process links each request from exactly one group (``_claims``): a cached
group is used only when none of its requests is already claimed by another group, so two
groups defining one symbol are never linked together.
"""

from __future__ import annotations

import functools
import threading
from typing import NamedTuple

from . import _blas_mathdx, _cache
from ._blas_options import value_type_code

__all__ = ["Request", "require", "generate", "is_cached", "forget"]

_lock = threading.RLock()
_claims: dict = {}   # request key -> Group linked for it in this process
_open: dict = {}     # GEMM description -> Group still collecting requests
_loaded: dict = {}   # group key -> Group read from the disk cache
_WORDS = {"CLEAR": "zero"}   # libmathdx's own word for the function in its symbols


class Request(NamedTuple):
    """One device function a kernel calls: ``kind`` over ``tensors`` of ``mm``."""

    mm: object
    kind: str
    tensors: tuple
    copy_alignment: int | None
    abi: str
    key: str
    symbol: str
    shim: str | None

    @classmethod
    def make(cls, mm, kind: str, tensors: tuple, copy_alignment, abi: str) -> Request:
        """The request of a call with argument kinds ``abi`` (see ``_blas_numba._abi``)."""
        key = _cache.make_key([list(mm._resolved.key()), "function", kind,
                               [list(t) for t in tensors], copy_alignment, abi,
                               _blas_mathdx.cache_versions()])
        word = _WORDS.get(kind, kind.lower())
        symbol = f"cublasdx_{word}_cw{key[:20]}"
        shim = f"{symbol}_shim" if set(abi) - {"p"} else None
        return cls(mm, kind, tuple(tensors), copy_alignment, abi, key, symbol, shim)


@functools.lru_cache(maxsize=1)
def _code_class():
    from numba.cuda import LTOIR

    class GroupCode(LTOIR):
        """numba's LTO-IR object of one part of a group; ``data`` generates the group."""

        def __init__(self, group: Group, part: str):
            super().__init__(None, name=f"cuweave_blas_{part}_{id(group):x}.ltoir")
            self.group, self.part = group, part

        @property
        def data(self):
            return self.group.ltoir(self.part)

        @property
        def symbols(self) -> tuple:
            return self.group.symbols(self.part)

    return GroupCode


class Group:
    """Device functions of one GEMM description generated (or loaded) together."""

    def __init__(self, spec_key, key=None, code=None, shims=None, symbols=((), ())):
        self.spec_key, self.key = spec_key, key
        self.requests: dict = {}
        self.request_keys: tuple = ()   # of a group read from the disk cache
        self._code, self._shims, self._symbols = code, shims, symbols
        self._generate_lock = threading.Lock()
        cls = _code_class()
        self.parts = (cls(self, "code"), cls(self, "shims"))

    def ltoir(self, part: str) -> bytes:
        """The LTO-IR of ``part`` ('code' or 'shims'), generating the group on first use."""
        with self._generate_lock:
            if self._code is None:
                with _lock:  # no request joins once generation starts
                    if _open.get(self.spec_key) is self:
                        del _open[self.spec_key]
                    requests = list(self.requests.values())
                self._code, self._shims, self.key = generate(requests)
                self._symbols = (tuple(r.symbol for r in requests),
                                 tuple(r.shim for r in requests if r.shim))
        return self._code if part == "code" else self._shims

    def symbols(self, part: str) -> tuple:
        """Symbols defined by ``part`` (known once generated or loaded)."""
        return self._symbols[0 if part == "code" else 1]


def _kinds(request: Request) -> list:
    return [(getattr(_blas_mathdx.TensorKind, k), a,
             None if dt is None else value_type_code(dt)) for k, a, dt in request.tensors]


def generate(requests: list) -> tuple[bytes, bytes, str]:
    """Generate ``requests`` (one GEMM description) and store them in the disk cache.

    Returns the functions' LTO-IR, the shims' LTO-IR and the group's cache key. Unsupported
    descriptions raise :class:`~cuweave._internal.errors.InvalidOptionError`.
    """
    spec = requests[0].mm._resolved
    calls = [(getattr(_blas_mathdx.FunctionKind, r.kind), _kinds(r), r.copy_alignment)
             for r in requests]
    code, _ = _blas_mathdx.compile_functions(spec, spec.block_dim, calls,
                                             [r.symbol for r in requests])
    shims = _blas_mathdx.compile_shims([(r.shim, r.symbol, r.abi) for r in requests if r.shim],
                                       spec.sm)
    keys = sorted(r.key for r in requests)
    key = _cache.make_key(["blas-group", keys, _blas_mathdx.cache_versions()])
    traits = {"requests": keys, "symbols": [r.symbol for r in requests],
              "shims": [r.shim for r in requests if r.shim]}
    _cache.store(key, {"traits": traits, "symbol": None, "ltoir": code})
    _cache.store(_cache.make_key([key, "shims"]), {"traits": None, "symbol": None,
                                                   "ltoir": shims})
    for r in requests:  # index entries last: they never name a group missing from the cache
        _cache.store(r.key, {"traits": {"group": key}, "symbol": r.symbol, "ltoir": None})
    return code, shims, key


def _load_group(key: str, spec_key) -> Group | None:
    group = _loaded.get(key)
    if group is not None:
        return group
    entry = _cache.load(key)
    shims = _cache.load(_cache.make_key([key, "shims"]))
    if entry is None or shims is None or entry["ltoir"] is None or shims["ltoir"] is None:
        return None
    t = entry["traits"]
    group = Group(spec_key, key, entry["ltoir"], shims["ltoir"],
                  (tuple(t["symbols"]), tuple(t["shims"])))
    group.request_keys = tuple(t["requests"])
    _loaded[key] = group
    return group


def _cached_group(request: Request) -> Group | None:
    """The cached group holding ``request`` if it can be linked in this process (none of its
    requests is linked from another group); its requests are then claimed for it."""
    index = _cache.load(request.key)
    if index is None or not index.get("traits"):
        return None
    group = _load_group(index["traits"]["group"], request.mm._kernel_key())
    if group is None or request.key not in group.request_keys:
        return None
    if any(_claims.get(k, group) is not group for k in group.request_keys):
        return None   # one of its functions is linked from another group here
    for k in group.request_keys:
        _claims[k] = group
    return group


def require(request: Request) -> tuple:
    """The linkable objects (numba ``LTOIR``) that define ``request``'s symbols."""
    with _lock:
        group = _claims.get(request.key) or _cached_group(request)
        if group is None:
            spec_key = request.mm._kernel_key()
            group = _open.get(spec_key)
            if group is None:
                group = _open[spec_key] = Group(spec_key)
            group.requests[request.key] = request
            _claims[request.key] = group
        return group.parts


def is_cached(request: Request) -> bool:
    """Whether ``request`` is in the disk cache (with its group's code and shims)."""
    index = _cache.load(request.key)
    if not (index and index.get("traits")):
        return False
    key = index["traits"]["group"]
    return _cache.load(key) is not None and _cache.load(_cache.make_key([key, "shims"])) \
        is not None


def forget() -> None:
    """Drop this process's groups and claims (tests that clear the cache)."""
    with _lock:
        _claims.clear()
        _open.clear()
        _loaded.clear()
