"""Matrix qualifiers: what structure each operand of :func:`~cuweave.linalg.matmul` has.

A qualifier is one record of :data:`matrix_qualifiers_dtype` (nvmath-python's generic layout:
``abbreviation``, ``conjugate``, ``uplo``, ``diag``, ``incx``); a ``qualifiers`` argument is an
array of two (``a``, ``b``) or three (``a``, ``b``, ``c``) of them. The constructor classes make
valid records (``TriangularMatrixQualifier.create(uplo=FillMode.UPPER)``) and check them
(:meth:`is_valid`). :func:`parse_qualifiers` is the one place a user's array is validated.

This dtype is not :data:`cuweave.linalg.advanced.matrix_qualifiers_dtype` (cuBLASLt's
``structure``/``is_conjugate`` records): nvmath-python has the two different layouts too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..._internal.errors import InvalidOptionError
from ._options import DiagType, FillMode

__all__ = ["matrix_qualifiers_dtype", "MatrixQualifier", "GeneralMatrixQualifier",
           "DiagonalMatrixQualifier", "SymmetricMatrixQualifier", "HermitianMatrixQualifier",
           "TriangularMatrixQualifier", "Qualifier", "parse_qualifiers"]

#: one record per operand: the structure's two-letter abbreviation (``ge``, ``dg``, ``sy``,
#: ``he``, ``tr``), whether the operand is conjugated, the triangle that holds the data
#: (:class:`FillMode`), whether a triangular matrix has a unit diagonal (:class:`DiagType`) and
#: the direction a diagonal is read in (``incx``: 1 forward, -1 reversed)
matrix_qualifiers_dtype = np.dtype([("abbreviation", "U2"), ("conjugate", np.bool_),
                                    ("uplo", np.int_), ("diag", np.int_), ("incx", np.int_)])

#: a NumPy array of :data:`matrix_qualifiers_dtype` records
MatrixQualifier = np.ndarray


class _Constructor:
    """Base of the qualifier classes: :meth:`create` makes records, :meth:`is_valid` checks."""

    abbreviation: ClassVar[str] = ""

    def __init__(self):
        raise RuntimeError(f"{type(self).__name__} is not instantiated: call "
                           f"{type(self).__name__}.create() for a qualifier record")

    @classmethod
    def _record(cls, conjugate=False, uplo=FillMode.FULL, diag=DiagType.NON_UNIT, incx=0):
        if not isinstance(conjugate, bool | np.bool_):
            raise InvalidOptionError(f"conjugate must be a bool, got {conjugate!r}")
        return np.array((cls.abbreviation, bool(conjugate), int(uplo), int(diag), int(incx)),
                        dtype=matrix_qualifiers_dtype)

    @classmethod
    def is_valid(cls, other) -> np.bool_:
        """Whether every record of ``other`` is a valid qualifier of this class.

        Parameters
        ----------
        other : numpy.ndarray
            A record, or an array of records, of dtype :data:`matrix_qualifiers_dtype`.

        Returns
        -------
        ``numpy.bool_``
            True when ``other`` has that dtype, this class's abbreviation and valid fields.
        """
        other = np.asarray(other)
        return np.bool_(other.dtype == matrix_qualifiers_dtype
                        and bool(np.all(other["abbreviation"] == cls.abbreviation))
                        and bool(np.all(cls._fields_ok(other))))

    @classmethod
    def _fields_ok(cls, other):
        return np.ones(other.shape, bool)

    @classmethod
    def to_string(cls, other) -> str:
        """A readable form of the record ``other``.

        Parameters
        ----------
        other : numpy.ndarray
            One record of dtype :data:`matrix_qualifiers_dtype`.

        Returns
        -------
        str
            ``"(abbreviation, conjugate=..., uplo=..., diag=..., incx=...)"``.
        """
        uplo, diag = int(other["uplo"]), int(other["diag"])
        uplo_s = FillMode(uplo).name if uplo in FillMode._value2member_map_ else str(uplo)
        diag_s = DiagType(diag).name if diag in DiagType._value2member_map_ else str(diag)
        return (f"({other['abbreviation']}, conjugate={bool(other['conjugate'])}, "
                f"uplo={uplo_s}, diag={diag_s}, incx={int(other['incx'])})")


def _uplo(uplo):
    try:
        value = FillMode(int(uplo))
    except (ValueError, TypeError):
        value = None
    if value not in (FillMode.LOWER, FillMode.UPPER):
        raise InvalidOptionError(f"uplo must be FillMode.LOWER or FillMode.UPPER, got {uplo!r}")
    return value


def _triangle_ok(other):
    return (other["uplo"] == FillMode.LOWER) | (other["uplo"] == FillMode.UPPER)


class GeneralMatrixQualifier(_Constructor):
    """A general (dense, unstructured) matrix.

    Examples
    --------
    >>> from cuweave.linalg import GeneralMatrixQualifier
    >>> GeneralMatrixQualifier.create()["abbreviation"]
    array('ge', dtype='<U2')
    """

    abbreviation = "ge"

    @classmethod
    def create(cls, conjugate: bool = False) -> np.ndarray:
        """A record of a general matrix.

        Parameters
        ----------
        conjugate : bool, optional
            Whether the operand is used conjugated (complex data; default False).
        Returns
        -------
        numpy.ndarray
            A 0-d record of dtype :data:`matrix_qualifiers_dtype`.
        """
        return cls._record(conjugate)


class DiagonalMatrixQualifier(_Constructor):
    """A diagonal matrix, given as the 1-D array of its diagonal.

    ``incx=-1`` reads the diagonal backwards (element ``i`` of the diagonal is ``x[n-1-i]``).

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import DiagonalMatrixQualifier, matmul, matrix_qualifiers_dtype
    >>> q = np.array([DiagonalMatrixQualifier.create(), (("ge", False, 2, 0, 0))],
    ...              dtype=matrix_qualifiers_dtype)
    >>> matmul(np.array([1.0, 2.0]), np.ones((2, 3)), qualifiers=q, execution="cpu").tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    """

    abbreviation = "dg"

    @classmethod
    def create(cls, conjugate: bool = False, incx: int = 1) -> np.ndarray:
        """A record of a diagonal matrix.

        Parameters
        ----------
        conjugate : bool, optional
            Whether the operand is used conjugated (complex data; default False).
        incx : {1, -1}, optional
            The direction the diagonal is read in: 1 forward (default), -1 backward.

        Returns
        -------
        numpy.ndarray
            A 0-d record of dtype :data:`matrix_qualifiers_dtype`.
        """
        if incx not in (-1, 1) or isinstance(incx, bool):
            raise InvalidOptionError(f"incx must be 1 or -1, got {incx!r}")
        return cls._record(conjugate, incx=incx)

    @classmethod
    def _fields_ok(cls, other):
        return (other["incx"] == 1) | (other["incx"] == -1)


class SymmetricMatrixQualifier(_Constructor):
    """A symmetric matrix whose data is the triangle ``uplo`` (the other is never read).

    Examples
    --------
    >>> from cuweave.linalg import SymmetricMatrixQualifier, FillMode
    >>> int(SymmetricMatrixQualifier.create(uplo=FillMode.UPPER)["uplo"])
    1
    """

    abbreviation = "sy"

    @classmethod
    def create(cls, conjugate: bool = False, uplo=FillMode.LOWER) -> np.ndarray:
        """A record of a symmetric matrix.

        Parameters
        ----------
        conjugate : bool, optional
            Whether the operand is used conjugated (complex data; default False).
        uplo : FillMode, optional
            Which triangle holds the data: ``FillMode.LOWER`` (default) or
            ``FillMode.UPPER``.

        Returns
        -------
        numpy.ndarray
            A 0-d record of dtype :data:`matrix_qualifiers_dtype`.
        """
        return cls._record(conjugate, uplo=_uplo(uplo))

    _fields_ok = classmethod(lambda cls, other: _triangle_ok(other))


class HermitianMatrixQualifier(_Constructor):
    """A Hermitian matrix whose data is the triangle ``uplo`` (the other is never read; the
    imaginary parts of the diagonal are taken as zero). Real operands are symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> from cuweave.linalg import HermitianMatrixQualifier, matmul, matrix_qualifiers_dtype
    >>> a = np.array([[2.0, 0.0], [1j, 3.0]])  # the lower triangle holds the data
    >>> q = np.array([HermitianMatrixQualifier.create(), (("ge", False, 2, 0, 0))],
    ...              dtype=matrix_qualifiers_dtype)
    >>> matmul(a, np.eye(2, dtype=complex), qualifiers=q, execution="cpu").tolist()
    [[(2+0j), -1j], [1j, (3+0j)]]
    """

    abbreviation = "he"

    @classmethod
    def create(cls, conjugate: bool = False, uplo=FillMode.LOWER) -> np.ndarray:
        """A record of a Hermitian matrix.

        Parameters
        ----------
        conjugate : bool, optional
            Whether the operand is used conjugated (complex data; default False).
        uplo : FillMode, optional
            Which triangle holds the data: ``FillMode.LOWER`` (default) or
            ``FillMode.UPPER``.

        Returns
        -------
        numpy.ndarray
            A 0-d record of dtype :data:`matrix_qualifiers_dtype`.
        """
        return cls._record(conjugate, uplo=_uplo(uplo))

    _fields_ok = classmethod(lambda cls, other: _triangle_ok(other))


class TriangularMatrixQualifier(_Constructor):
    """A triangular matrix: the triangle ``uplo`` (the other is never read), with a unit
    diagonal that is not read when ``diag`` is ``DiagType.UNIT``.

    Examples
    --------
    >>> from cuweave.linalg import DiagType, TriangularMatrixQualifier
    >>> q = TriangularMatrixQualifier.create(diag=DiagType.UNIT)
    >>> TriangularMatrixQualifier.to_string(q)
    '(tr, conjugate=False, uplo=LOWER, diag=UNIT, incx=0)'
    """

    abbreviation = "tr"

    @classmethod
    def create(cls, conjugate: bool = False, uplo=FillMode.LOWER,
               diag=DiagType.NON_UNIT) -> np.ndarray:
        """A record of a triangular matrix.

        Parameters
        ----------
        conjugate : bool, optional
            Whether the operand is used conjugated (complex data; default False).
        uplo : FillMode, optional
            Which triangle holds the data: ``FillMode.LOWER`` (default) or
            ``FillMode.UPPER``.
        diag : DiagType, optional
            ``DiagType.NON_UNIT`` (default: the diagonal is read) or ``DiagType.UNIT`` (taken
            as ones, never read).

        Returns
        -------
        numpy.ndarray
            A 0-d record of dtype :data:`matrix_qualifiers_dtype`.
        """
        try:
            d = DiagType(int(diag))
        except (ValueError, TypeError):
            d = None
        if d is None:
            raise InvalidOptionError(f"diag must be DiagType.UNIT or DiagType.NON_UNIT, "
                                     f"got {diag!r}")
        return cls._record(conjugate, uplo=_uplo(uplo), diag=d)

    @classmethod
    def _fields_ok(cls, other):
        return _triangle_ok(other) & ((other["diag"] == DiagType.UNIT)
                                      | (other["diag"] == DiagType.NON_UNIT))


_CLASSES = {c.abbreviation: c for c in (GeneralMatrixQualifier, DiagonalMatrixQualifier,
                                        SymmetricMatrixQualifier, HermitianMatrixQualifier,
                                        TriangularMatrixQualifier)}


@dataclass(frozen=True)
class Qualifier:
    """A validated qualifier record as plain values (hashable: part of plan keys)."""

    kind: str  # "ge", "dg", "sy", "he", "tr"
    conjugate: bool = False
    lower: bool = True
    unit: bool = False
    incx: int = 1


GENERAL = Qualifier("ge")


def _one(rec, name: str) -> Qualifier:
    kind = str(rec["abbreviation"])
    cls = _CLASSES.get(kind)
    if cls is None:
        raise InvalidOptionError(f"{name} abbreviation must be one of {sorted(_CLASSES)}, "
                                 f"got {kind!r}")
    if not cls._fields_ok(rec):
        what = {"dg": "incx must be 1 or -1", "tr": "uplo must be LOWER or UPPER and diag "
                "UNIT or NON_UNIT"}.get(kind, "uplo must be FillMode.LOWER or FillMode.UPPER")
        raise InvalidOptionError(f"{name} must be a valid {cls.__name__} record ({what}), "
                                 f"got {cls.to_string(rec)}")
    return Qualifier(kind, bool(rec["conjugate"]), int(rec["uplo"]) == FillMode.LOWER,
                     int(rec["diag"]) == DiagType.UNIT, int(rec["incx"]) if kind == "dg" else 1)


def parse_qualifiers(qualifiers, has_c: bool) -> tuple[Qualifier, Qualifier, Qualifier]:
    """Validate a user's ``qualifiers`` and return one :class:`Qualifier` per operand."""
    if qualifiers is None:
        return GENERAL, GENERAL, GENERAL
    q = qualifiers
    if not isinstance(q, np.ndarray) or q.dtype != matrix_qualifiers_dtype:
        got = f"dtype {q.dtype}" if isinstance(q, np.ndarray) else type(q).__name__
        raise InvalidOptionError("qualifiers must be a numpy array of "
                                 f"cuweave.linalg.matrix_qualifiers_dtype, got {got}")
    lengths = (2, 3) if not has_c else (3,)
    if q.ndim != 1 or q.shape[0] not in lengths:
        raise InvalidOptionError(
            f"qualifiers must have length {' or '.join(map(str, lengths))} (one record per "
            f"operand{'' if has_c else ', c optional'}), got shape {q.shape}")
    out = [_one(q[i], f"qualifiers[{i}]") for i in range(q.shape[0])]
    if len(out) == 2:
        out.append(GENERAL)
    if out[2].kind != "ge":
        raise InvalidOptionError("qualifiers[2] (c) must be a GeneralMatrixQualifier, got "
                                 f"{_CLASSES[out[2].kind].__name__}")
    if out[2].conjugate:
        raise InvalidOptionError("qualifiers[2] (c) must not be conjugate, got conjugate=True")
    if out[0].kind != "ge" and out[1].kind != "ge":
        raise InvalidOptionError(
            "qualifiers must leave a or b general (one structured operand per product, as "
            f"cuBLAS), got {out[0].kind!r} and {out[1].kind!r}")
    return out[0], out[1], out[2]
