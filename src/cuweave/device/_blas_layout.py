"""The layouts of a device :class:`~cuweave.device.Matmul`'s opaque cuBLASDx tensors.

``MM.suggest_layout_smem_a()`` and its siblings return a :class:`Layout`: the numbers a buffer
needs on the host, and inside kernels the argument of :func:`cuweave.device.make_tensor`. The
Matmul (``Layout.MM``) supplies the traits; the numba side (``_blas_numba``, ``_blas_fragments``,
``cublasdx_numba``) types and lowers these objects.
"""

from __future__ import annotations

import numpy as np

from .._internal.errors import InvalidOptionError
from ._blas_options import _INTEGERS
from ._kernel_object import KernelObject, register_kernel_type

__all__ = ["Layout", "_LAYOUTS"]

# Layout methods of Matmul -> (libmathdx tensor kind name, operand, memory space).
_LAYOUTS = {
    **{f"get_layout_gmem_{x}": (f"GMEM_{x.upper()}", x, "gmem") for x in "abc"},
    **{f"get_layout_smem_{x}": (f"SMEM_{x.upper()}", x, "smem") for x in "abc"},
    **{f"suggest_layout_smem_{x}": (f"SUGGESTED_SMEM_{x.upper()}", x, "smem") for x in "abc"},
    "suggest_layout_rmem_c": ("SUGGESTED_RMEM_C", "c", "rmem"),
    "get_layout_rmem_c": ("RMEM_C", "c", "rmem"),
    # register accumulators (MM.suggest_accumulator() / MM.get_accumulator() in kernels)
    "_suggest_accumulator_c": ("SUGGESTED_ACCUMULATOR_C", "c", "acc"),
    "_get_accumulator_c": ("ACCUMULATOR_C", "c", "acc"),
}


class Layout(KernelObject):
    """Layout of an opaque cuBLASDx tensor (``MM.suggest_layout_smem_a()``, ...): the numbers
    a buffer needs (``size``, ``cosize``, ``alignment``) and, inside kernels, the argument of
    :func:`cuweave.device.make_tensor`.

    Made by the :class:`Matmul`'s layout methods (``get_layout_gmem_a()``,
    ``suggest_layout_smem_b()``, ...), not directly.

    Parameters
    ----------
    mm : Matmul
        The GEMM whose operand is laid out.
    method : str
        The layout method's name (``'suggest_layout_smem_a'``, ...).
    leading_dimension : int, optional
        Global-memory layouts only: the leading dimension (default: the operand's).
    dtype : numpy dtype, optional
        Element type when it differs from the operand's (see :meth:`like`).
    """

    __slots__ = ("_mm", "_method", "_ld", "_info", "_dtype")

    def __init__(self, mm, method: str, leading_dimension=None, dtype=None):
        kind, operand, space = _LAYOUTS[method]
        if leading_dimension is not None and space != "gmem":
            raise InvalidOptionError(f"leading_dimension applies to global-memory layouts only, "
                                     f"got {leading_dimension!r} for {method}")
        if leading_dimension is not None and (
                isinstance(leading_dimension, bool) or
                not isinstance(leading_dimension, (int, np.integer)) or leading_dimension <= 0):
            raise InvalidOptionError(
                f"leading_dimension must be a positive integer, got {leading_dimension!r}")
        self._mm, self._method = mm, method
        self._ld = None if leading_dimension is None else int(leading_dimension)
        self._info = None if space == "gmem" else mm._layout_traits()[method]
        self._dtype = None
        if dtype is not None:
            dt = np.dtype(dtype)
            if dt.name not in ("float16", "float32", "float64", "complex64", "complex128",
                               *_INTEGERS):
                raise InvalidOptionError(f"dtype must be a float16/32/64, complex64/128 or "
                                         f"(u)int8-64 type, got {dtype!r}")
            if dt.type is not self._operand_type():
                self._dtype = dt.type
        register_kernel_type(Layout)

    def _operand_type(self):
        return getattr(self._mm, f"{self.operand}_value_type")

    def like(self, dtype) -> Layout:
        """The same layout (partition) over elements of another type.

        Parameters
        ----------
        dtype : numpy dtype
            float16/32/64, complex64/128 or a (u)int8-64 type.

        Returns
        -------
        Layout
        """
        return Layout(self._mm, self._method, self._ld, dtype)

    # ----- description ------------------------------------------------------------------------
    @property
    def MM(self):  # noqa: N802 - nvmath's name
        """The :class:`Matmul` this layout belongs to."""
        return self._mm

    @property
    def operand(self) -> str:
        """Which operand it lays out: ``'a'``, ``'b'`` or ``'c'``."""
        return _LAYOUTS[self._method][1]

    @property
    def memory_space(self) -> str:
        """Where the tensor lives: ``'gmem'``, ``'smem'`` or ``'rmem'`` (registers)."""
        return _LAYOUTS[self._method][2]

    @property
    def tensor_kind(self) -> str:
        """cuBLASDx's kind of layout: ``'gmem'``, ``'smem'`` or ``'suggested_smem'``, ..."""
        return _LAYOUTS[self._method][0]

    @property
    def dtype(self):
        """NumPy type of the elements (the operand's, unless made ``like`` another type)."""
        return self._operand_type() if self._dtype is None else self._dtype

    @property
    def value_type_override(self) -> str | None:
        """The element type's name when it differs from the operand's, else None."""
        return None if self._dtype is None else np.dtype(self._dtype).name

    @property
    def leading_dimension(self) -> int | None:
        """The global-memory leading dimension given, or None (taken from the array)."""
        return self._ld

    def _dims(self):
        return getattr(self._mm, f"{self.operand}_dim")

    @property
    def size(self) -> int:
        """Number of elements of the tensor (rows x columns of the operand)."""
        if self._info is None:
            r, c = self._dims()
            return r * c
        return int(self._info["logical_size"])

    @property
    def cosize(self) -> int:
        """Elements a buffer for this layout must hold."""
        if self._info is None:
            r, c = self._dims()
            order = self._mm._orders()["abc".index(self.operand)]
            ld = self._ld or (c if order == "row_major" else r)
            return ld * (r if order == "row_major" else c)
        return int(self._info["storage_bytes"]) // np.dtype(self._operand_type()).itemsize

    @property
    def alignment(self) -> int:
        """Required alignment in bytes of the buffer."""
        if self._info is None:
            return int(self._mm.alignment["abc".index(self.operand)])
        return int(self._info["alignment"])

    @property
    def uid(self) -> str:
        """libmathdx's opaque name of the tensor type (equal names: interchangeable)."""
        return self._info["name"] if self._info else f"gmem-{self.operand}"

    # ----- inside kernels ---------------------------------------------------------------------
    def _kernel_key(self) -> tuple:
        return (self._mm._kernel_key(), self._method, self._ld, self.value_type_override)

    def _kernel_attribute(self, name: str):
        if name in ("size", "cosize", "alignment"):
            return getattr(self, name)
        raise AttributeError(name)

    def __repr__(self):
        like = f", dtype={self.value_type_override}" if self._dtype is not None else ""
        return f"Layout({self._method}, size={self.size}, cosize={self.cosize}{like})"
