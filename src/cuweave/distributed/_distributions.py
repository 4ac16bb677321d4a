"""Distributions: how a global array is split into the local arrays of the processes.

Every distribution here is a Cartesian product: process ``r`` owns, along each dimension ``d``,
an increasing list of global indices ``I_d(r)``, and its local array holds the global elements
``[I_0(r)] x [I_1(r)] x ...`` in that order. :class:`Layout` is that list for every process;
all data movement (redistribution, the FFT transposes, the matmul gathers) is planned from two
layouts, whatever the distribution classes were.
"""

from __future__ import annotations

import copy as _copy
import math
from collections.abc import Sequence
from enum import IntEnum

import numpy as np

from .._internal.errors import InvalidOptionError
from ._errors import BindDistributionError, ConvertDistributionError
from ._runtime import require_context

__all__ = ["ProcessGrid", "Distribution", "Slab", "Box", "BlockCyclic", "BlockNonCyclic",
           "Layout"]


def _nranks() -> int:
    return require_context().nranks


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _check_shape(name, shape) -> tuple[int, ...]:
    if not isinstance(shape, Sequence) or not all(_is_int(x) and x >= 0 for x in shape):
        raise InvalidOptionError(f"{name} must be a sequence of non-negative ints, got {shape!r}")
    return tuple(int(x) for x in shape)


class ProcessGrid:
    """An N-D grid of the processes (used by the block-cyclic distributions).

    Parameters
    ----------
    shape : sequence of int, optional
        The grid's shape; its product is the number of processes.
    layout : ProcessGrid.Layout, optional
        Rank order in the grid (needed when more than one dimension is partitioned).
    process_array : numpy.ndarray, optional
        A custom arrangement: ``process_array[i, j]`` is the rank at grid position ``(i, j)``.
    """

    class Layout(IntEnum):
        """Rank order in a process grid."""

        COL_MAJOR = 0
        ROW_MAJOR = 1

    def __init__(self, *, shape=None, layout=None, process_array=None):
        nranks = _nranks()
        if process_array is None:
            if shape is None:
                raise InvalidOptionError("shape must be given when process_array is None, "
                                         "got None")
            self._shape = _check_shape("shape", shape)
            if layout is None:
                if nranks not in self._shape:
                    raise InvalidOptionError(
                        "layout must be a ProcessGrid.Layout when more than one dimension is "
                        f"partitioned, got None (shape {self._shape})")
                layout = ProcessGrid.Layout.ROW_MAJOR
            if not isinstance(layout, ProcessGrid.Layout):
                raise InvalidOptionError(f"layout must be a ProcessGrid.Layout, got {layout!r}")
            self._process_array = None
        else:
            arr = np.asarray(process_array)
            if shape is not None and tuple(shape) != arr.shape:
                raise InvalidOptionError(
                    f"shape must match process_array.shape {arr.shape}, got {shape!r}")
            if layout is not None:
                raise InvalidOptionError(
                    f"layout must be None with a process_array, got {layout!r}")
            if sorted(arr.ravel().tolist()) != list(range(nranks)):
                raise InvalidOptionError(
                    f"process_array must hold each rank 0..{nranks - 1} once, got {arr.tolist()!r}")
            self._shape = arr.shape
            self._process_array = arr
        self._layout = layout
        if math.prod(self._shape) != nranks:
            raise InvalidOptionError(
                f"shape must have {nranks} elements (the number of processes), got {self._shape}")
        self._nranks = nranks

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape."""
        return self._shape

    @property
    def layout(self):
        """The grid's :class:`ProcessGrid.Layout`, or ``None`` for a custom arrangement."""
        return self._layout

    @property
    def process_array(self):
        """The custom arrangement, or ``None``."""
        return self._process_array

    def coordinates(self, rank: int) -> tuple[int, ...]:
        """The grid position of a process (a cuweave extension).

        Parameters
        ----------
        rank : int
            The process.

        Returns
        -------
        tuple of int
        """
        if self._process_array is not None:
            return tuple(int(i) for i in np.argwhere(self._process_array == rank)[0])
        order = "F" if self._layout == ProcessGrid.Layout.COL_MAJOR else "C"
        return tuple(int(i) for i in np.unravel_index(rank, self._shape, order=order))

    def __eq__(self, other):
        if not isinstance(other, ProcessGrid) or self._shape != other._shape:
            return False
        if self._process_array is not None or other._process_array is not None:
            return (self._process_array is not None and other._process_array is not None
                    and np.array_equal(self._process_array, other._process_array))
        return self._nranks in self._shape or self._layout == other._layout

    def __hash__(self):
        return hash(self._shape)

    def __repr__(self):
        layout = None if self._layout is None else self._layout.name
        return f"ProcessGrid(shape={self._shape}, layout={layout})"


class Distribution:
    """How a global array is split across processes (base class)."""

    @property
    def ndim(self) -> int | None:
        """The dimensionality this distribution applies to (``None``: any)."""
        raise NotImplementedError

    def shape(self, rank: int, global_shape: Sequence[int] | None = None) -> tuple[int, ...]:
        """The local shape on process ``rank`` of a global array of ``global_shape``.

        Parameters
        ----------
        rank : int
            The process, in ``[0, number of processes)``.
        global_shape : sequence of int, optional
            The global array's shape (required, except for :class:`Box`).

        Returns
        -------
        tuple of int
        """
        nranks = _nranks()
        if not _is_int(rank) or not 0 <= rank < nranks:
            raise InvalidOptionError(f"rank must be an int in [0, {nranks}), got {rank!r}")
        if global_shape is None:
            raise InvalidOptionError("global_shape must be given for an unbound distribution, "
                                     "got None")
        gshape = _check_shape("global_shape", global_shape)
        self._check_ndim(len(gshape))
        return tuple(len(ix) for ix in self._index_sets(int(rank), nranks, gshape))

    def global_indices(self, rank: int, global_shape) -> tuple[np.ndarray, ...]:
        """A cuweave extension: the global indices, per axis, of the elements process ``rank``
        holds, in local order (``x[np.ix_(*d.global_indices(rank, x.shape))]`` is that process's
        block).

        Parameters
        ----------
        rank : int
            The process, in ``[0, number of processes)``.
        global_shape : sequence of int
            The global array's shape.

        Returns
        -------
        tuple of numpy.ndarray
            One array of indices per axis.

        Examples
        --------
        >>> Slab.X.global_indices(1, (5, 2))[0].tolist()  # doctest: +SKIP
        [3, 4]
        """
        self.shape(rank, global_shape)
        return self._index_sets(int(rank), _nranks(), tuple(global_shape))

    def copy(self) -> Distribution:
        """A shallow copy."""
        return _copy.copy(self)

    def to(self, cls, /, *, ndim=None, copy=False) -> Distribution:
        """This distribution as an equivalent one of another type (see subclasses).

        Parameters
        ----------
        cls : type
            A :class:`Distribution` subclass (``Slab``, ``Box``, ``BlockNonCyclic``, ...).
        ndim : int, optional
            The dimensionality of the arrays it applies to (at least this distribution's).
        copy : bool
            Return a copy when no conversion is needed (default: ``self``).

        Returns
        -------
        Distribution

        Raises
        ------
        ConvertDistributionError
            When no equivalent distribution of type ``cls`` exists.
        """
        if not isinstance(cls, type) or not issubclass(cls, Distribution) or cls is Distribution:
            raise InvalidOptionError(f"cls must be a Distribution subclass, got {cls!r}")
        if ndim is not None and (not _is_int(ndim) or ndim < (self.ndim or 1)):
            raise InvalidOptionError(
                f"ndim must be an int >= the distribution's dimensionality, got {ndim!r}")
        if type(self) is cls and (ndim is None or ndim == self.ndim):
            return self.copy() if copy else self
        return self._convert(cls, ndim)

    def _convert(self, cls, ndim):
        raise ConvertDistributionError(f"{self} cannot be converted to {cls.__name__}")

    def _check_ndim(self, ndim: int) -> None:
        if self.ndim is not None and self.ndim != ndim:
            raise BindDistributionError(
                f"{self} applies to {self.ndim}-D arrays, got a {ndim}-D one")

    def _index_sets(self, rank, nranks, global_shape):
        raise NotImplementedError

    def _infer_global_shape(self, local_shapes, nranks) -> tuple[int, ...]:
        raise NotImplementedError


def _slab_bounds(extent: int, rank: int, nranks: int) -> tuple[int, int]:
    """[lo, hi) of ``rank`` when ``extent`` is split so the first ``extent % nranks`` processes
    get one more element."""
    base, extra = divmod(extent, nranks)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


class Slab(Distribution):
    """Partition of one axis: process ``r`` owns the ``r``-th contiguous slab.

    With ``S`` elements along ``partition_dim`` and ``P`` processes, the first ``S % P``
    processes hold ``S // P + 1`` of them and the others ``S // P``.

    Parameters
    ----------
    partition_dim : int
        The partitioned axis (``Slab.X``, ``Slab.Y`` and ``Slab.Z`` are 0, 1 and 2).
    ndim : int, optional
        The dimensionality of the arrays it applies to (``None``: any above
        ``partition_dim``).

    Examples
    --------
    >>> Slab.X.partition_dim, Slab.Y.partition_dim, Slab.Z.partition_dim
    (0, 1, 2)
    """

    X: Slab
    Y: Slab
    Z: Slab

    def __init__(self, partition_dim: int, ndim: int | None = None):
        if not _is_int(partition_dim) or partition_dim < 0:
            raise InvalidOptionError(f"partition_dim must be an int >= 0, got {partition_dim!r}")
        if ndim is not None and (not _is_int(ndim) or ndim <= partition_dim):
            raise InvalidOptionError(f"ndim must be an int > partition_dim, got {ndim!r}")
        self._partition_dim = int(partition_dim)
        self._ndim = ndim

    @property
    def partition_dim(self) -> int:
        """The partitioned axis."""
        return self._partition_dim

    @property
    def ndim(self) -> int | None:
        """The dimensionality it applies to (``None``: any)."""
        return self._ndim

    @property
    def name(self) -> str:
        """``'Slab.X'``, ``'Slab.Y'``, ``'Slab.Z'`` or ``'Slab'``."""
        return {0: "Slab.X", 1: "Slab.Y", 2: "Slab.Z"}.get(self._partition_dim, "Slab")

    def __eq__(self, other):
        if not isinstance(other, Slab) or other._partition_dim != self._partition_dim:
            return False
        return self._ndim is None or other._ndim is None or self._ndim == other._ndim

    def __hash__(self):
        return self._partition_dim

    def __repr__(self):
        return f"Slab(partition_dim={self._partition_dim}, ndim={self._ndim})"

    def _check_ndim(self, ndim):
        super()._check_ndim(ndim)
        if self._partition_dim >= ndim:
            raise BindDistributionError(
                f"{self.name} partitions axis {self._partition_dim}, which a {ndim}-D array "
                "does not have")

    def _index_sets(self, rank, nranks, global_shape):
        sets = [np.arange(n, dtype=np.int64) for n in global_shape]
        lo, hi = _slab_bounds(global_shape[self._partition_dim], rank, nranks)
        sets[self._partition_dim] = np.arange(lo, hi, dtype=np.int64)
        return tuple(sets)

    def _infer_global_shape(self, local_shapes, nranks):
        p = self._partition_dim
        first = local_shapes[0]
        for r, shp in enumerate(local_shapes):
            if any(a != b for d, (a, b) in enumerate(zip(shp, first)) if d != p):
                raise BindDistributionError(
                    f"the local shapes must agree on every axis but the partitioned one "
                    f"({p}) under {self.name}: process 0 has {first}, process {r} has {shp}")
        return tuple(sum(s[p] for s in local_shapes) if d == p else n
                     for d, n in enumerate(first))

    def _convert(self, cls, ndim):
        ndim = ndim if ndim is not None else self._ndim
        if cls is Slab:
            return Slab(self._partition_dim, ndim)
        if issubclass(cls, BlockCyclic) and ndim is not None:
            grid = tuple(_nranks() if d == self._partition_dim else 1 for d in range(ndim))
            return BlockNonCyclic(ProcessGrid(shape=grid))
        return super()._convert(cls, ndim)


Slab.X = Slab(0)
Slab.Y = Slab(1)
Slab.Z = Slab(2)


class Box(Distribution):
    """This process's box ``[lower, upper)`` of the global array (a custom distribution).

    The boxes of all processes must tile the global array (whose shape is their bounding box,
    starting at the origin) without overlapping.

    Parameters
    ----------
    lower : sequence of int
        The box's first global index along each axis.
    upper : sequence of int
        One past its last index along each axis (``>= lower``).

    Examples
    --------
    >>> b = Box((0, 2), (4, 4))
    >>> b.box_shape
    (4, 2)
    """

    def __init__(self, lower: Sequence[int], upper: Sequence[int]):
        lower = _check_shape("lower", lower)
        upper = _check_shape("upper", upper)
        if len(lower) != len(upper):
            raise InvalidOptionError(
                f"upper must have as many coordinates as lower ({len(lower)}), got {upper!r}")
        if not all(u >= lo for lo, u in zip(lower, upper)):
            raise InvalidOptionError(f"upper must be >= lower coordinatewise, got lower={lower} "
                                     f"upper={upper}")
        self._lower, self._upper = lower, upper

    @classmethod
    def coerce(cls, value, name: str) -> Box:
        """A Box or a ``(lower, upper)`` pair as a Box (a cuweave extension).

        Parameters
        ----------
        value : Box or (lower, upper)
            What was given.
        name : str
            The parameter's name, for the error message.

        Returns
        -------
        Box
        """
        if isinstance(value, Box):
            return value
        if isinstance(value, Sequence) and len(value) == 2:
            return cls(value[0], value[1])
        raise InvalidOptionError(f"{name} must be a Box or a (lower, upper) pair, got {value!r}")

    @property
    def lower(self) -> tuple[int, ...]:
        """The box's first global index along each axis."""
        return self._lower

    @property
    def upper(self) -> tuple[int, ...]:
        """One past the box's last global index along each axis."""
        return self._upper

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self._lower)

    @property
    def box_shape(self) -> tuple[int, ...]:
        """``upper - lower`` along each axis."""
        return tuple(u - lo for lo, u in zip(self._lower, self._upper))

    def shape(self, rank=None, global_shape=None) -> tuple[int, ...]:
        """The box's shape (the local shape of the process that holds it).

        Parameters
        ----------
        rank, global_shape : optional
            Accepted for :meth:`Distribution.shape`'s signature; not needed.

        Returns
        -------
        tuple of int
        """
        return self.box_shape

    def __iter__(self):
        return iter((self._lower, self._upper))

    def __getitem__(self, index):
        return (self._lower, self._upper)[index]

    def __eq__(self, other):
        return isinstance(other, Box) and (self._lower, self._upper) == (other._lower,
                                                                        other._upper)

    def __hash__(self):
        return hash((self._lower, self._upper))

    def __repr__(self):
        return f"Box(lower={self._lower}, upper={self._upper})"

    def _index_sets(self, rank, nranks, global_shape):
        return tuple(np.arange(lo, u, dtype=np.int64) for lo, u in zip(self._lower, self._upper))

    def _infer_global_shape(self, local_shapes, nranks, boxes=None):
        lower = np.min([b.lower for b in boxes], axis=0)
        if np.any(lower != 0):
            raise BindDistributionError(
                f"the boxes must start at the origin, their lowest corner is {tuple(lower)}")
        return tuple(int(x) for x in np.max([b.upper for b in boxes], axis=0))

    def _convert(self, cls, ndim):
        if cls is Box:
            extra = ndim - self.ndim
            return Box(self._lower + (0,) * extra, self._upper + (1,) * extra)
        return super()._convert(cls, ndim)


def _block_indices(extent: int, block: int, coord: int, first: int, nprocs: int) -> np.ndarray:
    """Global indices owned by grid coordinate ``coord`` along one dimension."""
    if extent == 0:
        return np.zeros(0, np.int64)
    nblocks = -(-extent // block)
    owners = (first + np.arange(nblocks)) % nprocs
    mine = np.nonzero(owners == coord)[0]
    idx = (mine[:, None] * block + np.arange(block)[None, :]).ravel()
    return idx[idx < extent].astype(np.int64)


class BlockCyclic(Distribution):
    """PBLAS block-cyclic distribution over a :class:`ProcessGrid`.

    Along dimension ``d`` the global array is cut into blocks of ``block_sizes[d]``; block
    ``b`` belongs to grid coordinate ``(first_process[d] + b) % process_grid.shape[d]``.

    Parameters
    ----------
    process_grid : ProcessGrid
        The grid of processes.
    block_sizes : sequence of int
        One positive block size per grid dimension.
    first_process : sequence of int, optional
        The grid position holding the first block (default: the origin).
    """

    def __init__(self, process_grid: ProcessGrid, block_sizes: Sequence[int], *,
                 first_process: Sequence[int] | None = None):
        if not isinstance(process_grid, ProcessGrid):
            raise InvalidOptionError(f"process_grid must be a ProcessGrid, got {process_grid!r}")
        nd = len(process_grid.shape)
        if (not isinstance(block_sizes, Sequence) or len(block_sizes) != nd
                or not all(_is_int(x) and (x > 0 or (x == -1 and isinstance(self, BlockNonCyclic)))
                           for x in block_sizes)):
            raise InvalidOptionError(
                f"block_sizes must be {nd} positive ints (one per grid dimension), "
                f"got {block_sizes!r}")
        if first_process is None:
            first_process = (0,) * nd
        if (not isinstance(first_process, Sequence) or len(first_process) != nd
                or not all(_is_int(x) and 0 <= x < s
                           for x, s in zip(first_process, process_grid.shape))):
            raise InvalidOptionError(
                f"first_process must be a position in the grid of shape {process_grid.shape}, "
                f"got {first_process!r}")
        self._process_grid = process_grid
        self._block_sizes = tuple(int(x) for x in block_sizes)
        self._first_process = tuple(int(x) for x in first_process)

    @property
    def process_grid(self) -> ProcessGrid:
        """The grid of processes."""
        return self._process_grid

    @property
    def ndim(self) -> int:
        """The number of axes (the grid's)."""
        return len(self._process_grid.shape)

    @property
    def block_sizes(self) -> tuple[int, ...]:
        """The block size along each axis (-1: one block per process, BlockNonCyclic)."""
        return self._block_sizes

    @property
    def first_process(self) -> tuple[int, ...]:
        """The grid position holding the first block."""
        return self._first_process

    def __eq__(self, other):
        return (type(other) is type(self) and self._process_grid == other._process_grid
                and self._block_sizes == other._block_sizes
                and self._first_process == other._first_process)

    def __hash__(self):
        return hash((self._process_grid, self._block_sizes))

    def __repr__(self):
        return (f"{type(self).__name__}(process_grid={self._process_grid}, "
                f"block_sizes={self._block_sizes}, first_process={self._first_process})")

    def _blocks_for(self, global_shape):
        return self._block_sizes

    def _index_sets(self, rank, nranks, global_shape):
        coords = self._process_grid.coordinates(rank)
        blocks = self._blocks_for(global_shape)
        return tuple(_block_indices(n, b, c, f, p) for n, b, c, f, p in zip(
            global_shape, blocks, coords, self._first_process, self._process_grid.shape))

    def _infer_global_shape(self, local_shapes, nranks):
        grid = self._process_grid
        coords = [grid.coordinates(r) for r in range(nranks)]
        return tuple(sum(local_shapes[r][d] for r in range(nranks)
                         if all(c == 0 for e, c in enumerate(coords[r]) if e != d))
                     for d in range(self.ndim))

    def _convert(self, cls, ndim):
        grid = self._process_grid
        partitioned = [d for d, s in enumerate(grid.shape) if s > 1]
        if cls is Slab and isinstance(self, BlockNonCyclic) and len(partitioned) <= 1:
            return Slab(partitioned[0] if partitioned else 0, ndim or self.ndim)
        return super()._convert(cls, ndim)


class BlockNonCyclic(BlockCyclic):
    """Block distribution without cycles: one block per process along each dimension.

    The block size along ``d`` is ``ceil(n_d / process_grid.shape[d])`` (a cuweave extension:
    nvmath-python requires ``n_d`` to divide evenly; here the last processes may hold less, or
    nothing).

    Parameters
    ----------
    process_grid : ProcessGrid
        The grid of processes.
    first_process : sequence of int, optional
        The grid position holding the first block (default: the origin).
    """

    def __init__(self, process_grid: ProcessGrid, *, first_process=None):
        super().__init__(process_grid, (-1,) * len(process_grid.shape) if isinstance(
            process_grid, ProcessGrid) else (), first_process=first_process)

    def _blocks_for(self, global_shape):
        return tuple(max(1, -(-n // p)) for n, p in zip(global_shape, self._process_grid.shape))

    def __repr__(self):
        return (f"BlockNonCyclic(process_grid={self._process_grid}, "
                f"first_process={self._first_process})")


class Layout:
    """Global index sets of every process for one global shape (internal, a cuweave extension)."""

    def __init__(self, global_shape: tuple[int, ...], sets: list[tuple[np.ndarray, ...]]):
        self.global_shape = tuple(global_shape)
        self.sets = sets

    @classmethod
    def of(cls, distribution: Distribution, global_shape, nranks: int, boxes=None) -> Layout:
        """The layout of ``distribution``; Box distributions need every process's box."""
        if isinstance(distribution, Box):
            if boxes is None:
                raise ValueError("a Box layout needs the boxes of every process")
            return cls(global_shape, [b._index_sets(r, nranks, global_shape)
                                      for r, b in enumerate(boxes)])
        distribution._check_ndim(len(global_shape))
        return cls(global_shape, [distribution._index_sets(r, nranks, global_shape)
                                  for r in range(nranks)])

    @classmethod
    def gathered(cls, global_shape, nranks: int, root: int = 0) -> Layout:
        """Everything on ``root``; nothing elsewhere."""
        full = tuple(np.arange(n, dtype=np.int64) for n in global_shape)
        empty = tuple(np.zeros(0, np.int64) for _ in global_shape)
        return cls(global_shape, [full if r == root else empty for r in range(nranks)])

    def local_shape(self, rank: int) -> tuple[int, ...]:
        return tuple(len(ix) for ix in self.sets[rank])

    def transposed(self) -> Layout:
        """The layout of the 2-D transpose."""
        return Layout(self.global_shape[::-1], [s[::-1] for s in self.sets])

    def same_as(self, other: Layout) -> bool:
        return self.global_shape == other.global_shape and all(
            all(np.array_equal(a, b) for a, b in zip(s, o)) for s, o in zip(self.sets, other.sets))

    def check_partition(self, name: str) -> None:
        """Raise unless the processes' blocks tile the global array exactly once."""
        total = sum(math.prod(self.local_shape(r)) for r in range(len(self.sets)))
        if total != math.prod(self.global_shape):
            raise BindDistributionError(
                f"{name} must tile the global shape {self.global_shape} exactly: the processes "
                f"hold {total} elements, the global array has {math.prod(self.global_shape)}")
        for r, sets in enumerate(self.sets):
            for d, ix in enumerate(sets):
                if len(ix) and (ix[0] < 0 or ix[-1] >= self.global_shape[d]):
                    raise BindDistributionError(
                        f"{name} of process {r} lies outside the global shape "
                        f"{self.global_shape}")
        nr = len(self.sets)
        for r in range(nr):
            for s in range(r + 1, nr):
                if all(len(np.intersect1d(a, b, assume_unique=True))
                       for a, b in zip(self.sets[r], self.sets[s])):
                    raise BindDistributionError(
                        f"{name} of processes {r} and {s} overlap")
