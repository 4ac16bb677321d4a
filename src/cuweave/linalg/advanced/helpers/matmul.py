"""Host-side helpers for narrow-precision matmuls: FP4 packing and block-scale layouts.

cuBLASLt reads MXFP8 and NVFP4 block scales in one interleaved 1-D layout: the scale matrix of
an operand (one scale per block of 32 (MXFP8) or 16 (NVFP4) consecutive elements along the
blocked axis) is cut into tiles of 128 rows x 4 block-columns, each tile is stored as 512
consecutive bytes with row ``r`` and block-column ``c`` at ``(r % 32) * 16 + (r // 32) * 4 +
c``, tiles follow each other block-column-tile fastest, and each matrix of a batch follows the
previous one. These helpers hide that layout: offsets, conversion from and to N-D scales,
expansion to the operand's shape, and FP4 (E2M1) quantization and packing.

They work on torch tensors (CPU or CUDA, as nvmath-python's do) and run on any machine; torch
is imported when a helper is called.

Examples
--------
>>> import torch
>>> from cuweave.linalg.advanced.helpers.matmul import (
...     BlockScalingFormat, get_block_scale_offset, quantize_to_fp4, unpack_fp4)
>>> get_block_scale_offset((5, 2), (128, 128), BlockScalingFormat.NVFP4, axis=-1)
82
>>> x = torch.tensor([[0.4, -1.2, 2.6, 7.0]])
>>> unpack_fp4(quantize_to_fp4(x, axis=-1), axis=-1).tolist()
[[0.5, -1.0, 3.0, 6.0]]
"""

from __future__ import annotations

import enum
import math
import operator
from dataclasses import dataclass

from ...._internal.errors import InvalidOperandError

__all__ = [
    "BlockScalingFormat",
    "create_mxfp8_scale",
    "invert_mxfp8_scale",
    "apply_mxfp8_scale",
    "unpack_fp4",
    "quantize_to_fp4",
    "get_block_scale_offset",
    "to_block_scale",
    "expand_block_scale",
]

_TILE_ROWS, _TILE_COLS, _TILE_BYTES = 128, 4, 512
#: FP4 (E2M1) magnitudes by code (bit 3 is the sign)
_FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: midpoints between consecutive magnitudes (a value on one rounds to the even code)
_FP4_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


class BlockScalingFormat(str, enum.Enum):
    """Block scaling format of a narrow-precision operand (its block size and scale dtype)."""

    NVFP4 = "NVFP4"
    MXFP8 = "MXFP8"

    def __str__(self) -> str:
        return self.value


_BLOCK = {BlockScalingFormat.NVFP4: 16, BlockScalingFormat.MXFP8: 32}
_SCALE_DTYPES = {BlockScalingFormat.NVFP4: ("float8_e4m3fn", "uint8"),
                 BlockScalingFormat.MXFP8: ("uint8",)}
_FORMATS_OF_DTYPE = {"float4_e2m1fn_x2": (BlockScalingFormat.NVFP4,),
                     "float8_e4m3fn": (BlockScalingFormat.MXFP8,),
                     "float8_e5m2": (BlockScalingFormat.MXFP8,)}


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the helpers document torch tensors
        msg = "cuweave.linalg.advanced.helpers needs torch (pip install torch)"
        raise ImportError(msg) from e
    return torch


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _check_tensor(x, name: str, dtypes=None):
    torch = _torch()
    if not isinstance(x, torch.Tensor):
        raise InvalidOperandError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if dtypes is not None and _dtype_name(x) not in dtypes:
        raise TypeError(f"{name} must have dtype {' or '.join('torch.' + d for d in dtypes)}, "
                        f"got {x.dtype}")
    return x


def _check_format(fmt) -> BlockScalingFormat:
    try:
        return BlockScalingFormat(fmt)
    except ValueError:
        raise InvalidOperandError(f"block_scaling_format must be one of "
                                  f"{[f.value for f in BlockScalingFormat]}, got {fmt!r}") from None


def _check_axis(axis, where: str) -> int:
    if axis not in (-1, -2) or isinstance(axis, bool):
        raise InvalidOperandError(f"axis must be -1 or -2{where}, got {axis!r}")
    return axis


@dataclass(frozen=True)
class _Geometry:
    """The logical operand shape, its blocked axis and block size."""

    shape: tuple
    axis: int
    block: int

    @property
    def batch(self) -> tuple:
        return self.shape[:-2]

    @property
    def outer(self) -> int:  # the unblocked one of the last two axes
        return self.shape[-2] if self.axis == -1 else self.shape[-1]

    @property
    def blocks(self) -> int:  # blocks along the blocked axis
        return (self.shape[-1] if self.axis == -1 else self.shape[-2]) // self.block

    @property
    def per_matrix(self) -> int:
        return self.outer * self.blocks

    @property
    def count(self) -> int:
        return math.prod(self.batch) * self.per_matrix

    @property
    def scale_shape(self) -> tuple:
        """Shape of the N-D scales: the operand's with the blocked axis divided by the block."""
        s = list(self.shape)
        s[self.axis] //= self.block
        return tuple(s)


def _geometry(operand_or_shape, fmt, axis) -> _Geometry:
    """The geometry of an operand (axis inferred from its layout) or of a logical shape."""
    torch = _torch()
    fmt = _check_format(fmt)
    if isinstance(operand_or_shape, torch.Tensor):
        x = operand_or_shape
        dt = _dtype_name(x)
        if dt in _FORMATS_OF_DTYPE and fmt not in _FORMATS_OF_DTYPE[dt]:
            raise InvalidOperandError(f"block_scaling_format must be "
                                      f"{' or '.join(map(str, _FORMATS_OF_DTYPE[dt]))} for a "
                                      f"{dt} operand, got {fmt}")
        if x.ndim < 2:
            raise InvalidOperandError(f"operand_or_shape must have at least 2 dimensions, got "
                                      f"shape {tuple(x.shape)}")
        inferred = -1 if x.stride(-1) == 1 else -2 if x.stride(-2) == 1 else None
        if axis is None:
            if inferred is None:
                raise InvalidOperandError("axis must be given for an operand that is neither "
                                          f"row- nor column-major, got strides {x.stride()}")
            axis = inferred
        shape = list(x.shape)
        if dt == "float4_e2m1fn_x2":  # two values per byte along the contiguous axis
            shape[inferred if inferred is not None else axis] *= 2
        shape = tuple(shape)
    else:
        if axis is None:
            raise InvalidOperandError("axis must be -1 or -2 when operand_or_shape is a shape, "
                                      "got None")
        try:
            shape = tuple(_extent(s) for s in operand_or_shape)
        except TypeError:
            raise InvalidOperandError(f"operand_or_shape must be a torch.Tensor or a tuple of "
                                      f"ints, got {operand_or_shape!r}") from None
        if len(shape) < 2 or min(shape) < 1:
            raise InvalidOperandError(f"operand_or_shape must have at least 2 positive "
                                      f"extents, got {shape}")
    axis = _check_axis(axis, "")
    g = _Geometry(shape, axis, _BLOCK[fmt])
    blocked = shape[axis]
    if g.outer % _TILE_ROWS or blocked % (g.block * _TILE_COLS):
        raise InvalidOperandError(
            f"operand_or_shape must have its unblocked extent divisible by {_TILE_ROWS} and its "
            f"blocked extent (axis {axis}) by {g.block * _TILE_COLS} for {fmt}, got {shape}")
    return g


def _extent(v) -> int:
    if isinstance(v, bool):
        raise TypeError("bool is not an extent")
    return operator.index(v)


def _offsets(g: _Geometry, batch_flat, outer, block):
    """Interleaved offsets of scales (batch index, unblocked index, block index)."""
    tiles_per_row = g.blocks // _TILE_COLS
    tile = (outer // _TILE_ROWS) * tiles_per_row + block // _TILE_COLS
    inner = (outer % 32) * 16 + ((outer % _TILE_ROWS) // 32) * 4 + block % _TILE_COLS
    return batch_flat * g.per_matrix + tile * _TILE_BYTES + inner


def _all_offsets(g: _Geometry, device):
    """Offsets of every N-D scale, shaped like ``g.scale_shape``."""
    torch = _torch()
    idx = [torch.arange(n, device=device) for n in g.scale_shape]
    grids = torch.meshgrid(*idx, indexing="ij") if idx else []
    b = torch.zeros(g.scale_shape, dtype=torch.int64, device=device)
    for grid, n in zip(grids[:-2], g.batch):
        b = b * n + grid
    rows, cols = grids[-2], grids[-1]
    outer, block = (rows, cols) if g.axis == -1 else (cols, rows)
    return _offsets(g, b, outer, block)


def get_block_scale_offset(index, operand_or_shape, block_scaling_format, *, axis=None):
    """Offset, in the interleaved 1-D scales, of the scale of one block (or of many).

    Parameters
    ----------
    index : tuple of int or of integer tensors
        ``(*batch, row, block)`` for ``axis=-1`` or ``(*batch, block, column)`` for
        ``axis=-2``: the block's position in the N-D scales (see :func:`to_block_scale`).
    operand_or_shape : torch.Tensor or tuple of int
        The operand (its blocked axis is inferred from its layout) or its logical shape.
    block_scaling_format : BlockScalingFormat or str
    axis : {-1, -2}, optional
        The blocked axis (required with a shape).

    Returns
    -------
    int or torch.Tensor
    """
    g = _geometry(operand_or_shape, block_scaling_format, axis)
    if not isinstance(index, tuple) or len(index) != len(g.shape):
        raise InvalidOperandError(f"index must be a tuple of {len(g.shape)} indices, got "
                                  f"{index!r}")
    scalar = all(isinstance(i, int) and not isinstance(i, bool) for i in index)
    if scalar:
        for i, (v, n) in enumerate(zip(index, g.scale_shape)):
            if not 0 <= v < n:
                raise InvalidOperandError(f"index[{i}] must be in [0, {n}), got {v}")
    b = 0
    for v, n in zip(index[:-2], g.batch):
        b = b * n + v
    outer, block = (index[-2], index[-1]) if g.axis == -1 else (index[-1], index[-2])
    return _offsets(g, b, outer, block)


def to_block_scale(scale_tensor, operand_or_shape, block_scaling_format, *, axis=None,
                   out=None):
    """Copy N-D scales (shaped like the operand with the blocked axis divided by the block
    size) into cuBLASLt's interleaved 1-D layout; returns ``out`` (new if ``None``).

    ``scale_tensor[..., i, j]`` (``axis=-1``) is the scale of the block
    ``operand[..., i, j*block:(j+1)*block]``; the result can be passed as the operand's
    block scales of a block-scaled matmul.

    Parameters
    ----------
    scale_tensor : torch.Tensor
        The N-D scales, of the operand's logical shape with the blocked axis divided by the
        block size: ``torch.float8_e4m3fn`` or ``torch.uint8`` (read as e4m3) for NVFP4,
        ``torch.uint8`` (UE8M0 exponents) for MXFP8.
    operand_or_shape : torch.Tensor or tuple of int
        The operand the scales apply to, or its logical shape (unpacked: an FP4 operand's
        packed extent doubled). The unblocked extent must be a multiple of 128 and the
        blocked one of 4 blocks.
    block_scaling_format : BlockScalingFormat or str
        ``"NVFP4"`` (blocks of 16 elements) or ``"MXFP8"`` (blocks of 32); checked against an
        operand's dtype.
    axis : {-1, -2}, optional
        The operand's blocked axis: -1 when blocks run along rows (as for ``a`` of a matmul),
        -2 when they run along columns (as for ``b``). Required when ``operand_or_shape`` is a
        shape; inferred from an operand's layout (the contiguous one of its last two axes)
        when omitted.
    out : torch.Tensor, optional
        A 1-D tensor of ``scale_tensor``'s dtype and device, with one element per block, to
        copy into. ``None`` (the default) makes a new one.

    Returns
    -------
    torch.Tensor
        ``out``: the scales in the interleaved 1-D layout, ``scale_tensor``'s dtype.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import to_block_scale
    >>> scales = torch.full((128, 4), 127, dtype=torch.uint8)  # 2**0 for each block
    >>> to_block_scale(scales, (128, 128), "MXFP8", axis=-1).shape
    torch.Size([512])
    """
    torch = _torch()
    fmt = _check_format(block_scaling_format)
    _check_tensor(scale_tensor, "scale_tensor", _SCALE_DTYPES[fmt])
    g = _geometry(operand_or_shape, fmt, axis)
    if tuple(scale_tensor.shape) != g.scale_shape:
        raise InvalidOperandError(f"scale_tensor must have shape {g.scale_shape}, got "
                                  f"{tuple(scale_tensor.shape)}")
    if out is None:
        out = torch.empty(g.count, dtype=scale_tensor.dtype, device=scale_tensor.device)
    else:
        _check_tensor(out, "out", (_dtype_name(scale_tensor),))
        if tuple(out.shape) != (g.count,) or out.device != scale_tensor.device:
            raise InvalidOperandError(f"out must be a 1-D tensor of {g.count} elements on "
                                      f"{scale_tensor.device}, got shape {tuple(out.shape)} on "
                                      f"{out.device}")
    offsets = _all_offsets(g, scale_tensor.device).reshape(-1)
    out.view(torch.uint8)[offsets] = scale_tensor.reshape(-1).view(torch.uint8)
    return out


def _scale_values(scales_1d, g: _Geometry, fmt, device):
    """The N-D scales (float64 values, and the raw bytes) gathered from the 1-D layout."""
    torch = _torch()
    if scales_1d.ndim != 1 or scales_1d.numel() != g.count:
        raise InvalidOperandError(f"scales_1d must be a 1-D tensor of {g.count} scales for "
                                  f"shape {g.shape}, got shape {tuple(scales_1d.shape)}")
    raw = scales_1d.to(device).view(torch.uint8)[_all_offsets(g, device)]
    if fmt is BlockScalingFormat.MXFP8:
        values = torch.exp2(raw.to(torch.float64) - 127.0)
        values[raw == 255] = math.nan
    else:
        values = raw.view(torch.float8_e4m3fn).to(torch.float64)
    return values, raw


def _expand(t, g: _Geometry):
    return t.repeat_interleave(g.block, dim=g.axis)


def _smallest(values, candidates, what: str, requested=None):
    """The first candidate dtype that holds ``values`` without overflow or underflow (or
    ``requested``, checked)."""
    torch = _torch()
    finite, nonzero = torch.isfinite(values), values != 0

    def fits(dt):
        cast = values.to(dt).to(torch.float64)
        return not bool(((finite & ~torch.isfinite(cast)) | (nonzero & (cast == 0))).any())

    if requested is not None:
        if not fits(requested):
            raise InvalidOperandError(f"output_dtype {requested} cannot hold the {what} without "
                                      "overflow or underflow")
        return requested
    for dt in candidates:
        if fits(dt):
            return dt
    raise InvalidOperandError(f"no dtype can hold the {what}")  # pragma: no cover


def _output_dtype(output_dtype, allowed: tuple):
    torch = _torch()
    if output_dtype == "smallest":
        return None
    if not isinstance(output_dtype, torch.dtype) or _dtype_name_of(output_dtype) not in allowed:
        raise InvalidOperandError(f"output_dtype must be 'smallest' or one of "
                                  f"{['torch.' + a for a in allowed]}, got {output_dtype!r}")
    return output_dtype


def _dtype_name_of(dt) -> str:
    return str(dt).removeprefix("torch.")


def expand_block_scale(scales_1d, operand_or_shape, block_scaling_format, *, axis=None,
                       output_dtype="smallest", device=None):
    """Expand interleaved 1-D block scales to the operand's full shape (each element gets the
    scale of its block). ``"smallest"``: uint8 exponents (MXFP8) or float8_e4m3fn (NVFP4).

    Useful to dequantize by hand: multiply the expanded scales with the operand or result
    element by element.

    Parameters
    ----------
    scales_1d : torch.Tensor
        The scales in cuBLASLt's interleaved 1-D layout, one per block:
        ``torch.float8_e4m3fn`` or ``torch.uint8`` (read as e4m3) for NVFP4, ``torch.uint8``
        (UE8M0 exponents) for MXFP8.
    operand_or_shape : torch.Tensor or tuple of int
        The operand, or its logical shape (unpacked): the shape of the result.
    block_scaling_format : BlockScalingFormat or str
        ``"NVFP4"`` (blocks of 16 elements) or ``"MXFP8"`` (blocks of 32); checked against an
        operand's dtype.
    axis : {-1, -2}, optional
        The operand's blocked axis: -1 when blocks run along rows (as for ``a`` of a matmul),
        -2 when they run along columns (as for ``b``). Required when ``operand_or_shape`` is a
        shape; inferred from an operand's layout (the contiguous one of its last two axes)
        when omitted.
    output_dtype : "smallest" or torch.dtype, optional
        The result's dtype: for NVFP4 ``torch.float8_e4m3fn``, ``float16``, ``float32`` or
        ``float64``; for MXFP8 ``torch.uint8`` (the exponents as stored), ``float16``,
        ``float32`` or ``float64`` (the scale values). It must hold every scale without
        overflow or underflow, else an error is raised. ``"smallest"`` (the default) keeps the
        stored type (uint8 exponents or float8_e4m3fn).
    device : {"cuda", "cpu"} or None, optional
        Where the result lives; ``None`` (the default): ``scales_1d``'s device.

    Returns
    -------
    torch.Tensor
        The scale of each element, of ``operand_or_shape``'s shape.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import expand_block_scale
    >>> scales = torch.full((512,), 128, dtype=torch.uint8)  # 2**1 for each block
    >>> full = expand_block_scale(scales, (128, 128), "MXFP8", axis=-1,
    ...                           output_dtype=torch.float32)
    >>> full.shape, full.unique().tolist()
    (torch.Size([128, 128]), [2.0])
    """
    torch = _torch()
    fmt = _check_format(block_scaling_format)
    _check_tensor(scales_1d, "scales_1d", _SCALE_DTYPES[fmt])
    if device is not None and device not in ("cuda", "cpu"):
        raise InvalidOperandError(f"device must be None, 'cuda' or 'cpu', got {device!r}")
    g = _geometry(operand_or_shape, fmt, axis)
    native = "uint8" if fmt is BlockScalingFormat.MXFP8 else "float8_e4m3fn"
    requested = _output_dtype(output_dtype, (native, "float16", "float32", "float64"))
    values, raw = _scale_values(scales_1d, g, fmt, device or scales_1d.device)
    if requested is None or _dtype_name_of(requested) == native:
        nd = raw if fmt is BlockScalingFormat.MXFP8 else raw.view(torch.float8_e4m3fn)
        return _expand(nd, g)
    dt = _smallest(values, (), "scales", requested)
    return _expand(values.to(dt), g)


def create_mxfp8_scale(x, exponent, stream=None):
    """MXFP8 block scales applying ``2**exponent`` to the whole of ``x`` (interleaved 1-D
    uint8, on ``x``'s device; ``stream``: a torch stream or handle to create it on).

    Parameters
    ----------
    x : torch.Tensor
        The operand the scales are for (its blocked axis is inferred from its layout; its
        unblocked extent must be a multiple of 128 and its blocked one of 128).
    exponent : int
        The scale is ``2**exponent``, an int in [-127, 128].
    stream : torch.cuda.Stream or int, optional
        The stream (or its handle) to create the scales on, for a CUDA ``x``. ``None`` (the
        default): torch's current stream.

    Returns
    -------
    torch.Tensor
        One uint8 UE8M0 exponent (``exponent + 127``) per block of 32 elements, in
        cuBLASLt's interleaved 1-D layout, on ``x``'s device.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import create_mxfp8_scale
    >>> scales = create_mxfp8_scale(torch.zeros(128, 128), 3)
    >>> scales.shape, scales.unique().tolist()
    (torch.Size([512]), [130])
    """
    torch = _torch()
    _check_tensor(x, "x")
    if (not isinstance(exponent, int) or isinstance(exponent, bool)
            or not -127 <= exponent <= 128):
        raise InvalidOperandError(f"exponent must be an int in [-127, 128], got {exponent!r}")
    g = _geometry(x, BlockScalingFormat.MXFP8, None)
    if stream is None or not x.is_cuda:
        return torch.full((g.count,), exponent + 127, dtype=torch.uint8, device=x.device)
    if isinstance(stream, torch.cuda.Stream):
        with torch.cuda.stream(stream):
            return torch.full((g.count,), exponent + 127, dtype=torch.uint8, device=x.device)
    from ..._internal._torch import TORCH  # a handle (0: torch's default stream)

    return TORCH.on_stream(int(stream), x.device.index, torch.full, (g.count,), exponent + 127,
                           dtype=torch.uint8, device=x.device)


def invert_mxfp8_scale(mx_scales):
    """Reciprocals of MXFP8 (UE8M0) scales: ``2**(127 - e)`` for every ``2**(e - 127)``,
    NaN (255) staying NaN.

    Parameters
    ----------
    mx_scales : torch.Tensor
        MXFP8 scales: ``torch.uint8`` UE8M0 exponents, of any shape (the interleaved 1-D
        layout included: the order is kept).

    Returns
    -------
    torch.Tensor
        A new uint8 tensor of ``mx_scales``'s shape holding the reciprocal scales (clamped to
        the representable range).

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import invert_mxfp8_scale
    >>> invert_mxfp8_scale(torch.tensor([127, 130, 255], dtype=torch.uint8)).tolist()
    [127, 124, 255]
    """
    torch = _torch()
    _check_tensor(mx_scales, "mx_scales", ("uint8",))
    inv = (254 - mx_scales.to(torch.int16)).clamp(0, 254).to(torch.uint8)
    return torch.where(mx_scales == 255, mx_scales, inv)


def apply_mxfp8_scale(x, scales_1d, output_dtype="smallest"):
    """``x`` times its MXFP8 block scales, computed in float64 and returned in the smallest
    of float16/float32/float64 that holds the result (or ``output_dtype``, checked).

    For checking results by hand (slow and memory hungry); to get a wider result from a
    matmul, ask for it with ``MatmulOptions.result_type`` instead.

    Parameters
    ----------
    x : torch.Tensor
        The values to scale (an MXFP8 operand or result, or any tensor of that shape); its
        blocked axis is inferred from its layout.
    scales_1d : torch.Tensor
        Its MXFP8 block scales, ``torch.uint8`` UE8M0 exponents in cuBLASLt's interleaved
        1-D layout (one per block of 32 elements).
    output_dtype : "smallest" or torch.dtype, optional
        ``torch.float16``, ``torch.float32`` or ``torch.float64``: the result's dtype, which
        must hold the result without overflow or underflow (else an error is raised).
        ``"smallest"`` (the default) picks the narrowest one that does.

    Returns
    -------
    torch.Tensor
        ``x`` with each block multiplied by its scale.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import (
    ...     apply_mxfp8_scale, create_mxfp8_scale)
    >>> x = torch.ones(128, 128)
    >>> y = apply_mxfp8_scale(x, create_mxfp8_scale(x, -2))
    >>> y.dtype, y.unique().tolist()
    (torch.float16, [0.25])
    """
    torch = _torch()
    _check_tensor(x, "x")
    _check_tensor(scales_1d, "scales_1d", ("uint8",))
    requested = _output_dtype(output_dtype, ("float16", "float32", "float64"))
    g = _geometry(x, BlockScalingFormat.MXFP8, None)
    values, _ = _scale_values(scales_1d, g, BlockScalingFormat.MXFP8, x.device)
    result = x.to(torch.float64) * _expand(values, g)
    dt = _smallest(result, (torch.float16, torch.float32, torch.float64), "scaled values",
                   requested)
    return result.to(dt)


def quantize_to_fp4(x, axis):
    """Round float32 ``x`` to the nearest FP4 (E2M1) values (ties to even, saturating at
    +-6) and pack two per byte along ``axis`` into ``torch.float4_e2m1fn_x2``.

    ``axis=-1``: ``(..., Q)`` -> ``(..., Q//2)`` row-major; ``axis=-2``: ``(..., P, Q)`` ->
    ``(..., P//2, Q)`` column-major. The packed extent must be even; NaN is refused.

    Meant for experiments and tests with FP4 matmuls; for quantizing whole models, tools
    made for it (torchao, bitsandbytes) are better suited.

    Parameters
    ----------
    x : torch.Tensor
        float32 values, 1-D or more (``axis=-2`` needs 2-D or more).
    axis : {-1, -2}
        The axis whose consecutive pairs are packed into one byte: -1 (the last) or -2 (the
        second to last).

    Returns
    -------
    torch.Tensor
        A ``torch.float4_e2m1fn_x2`` tensor on ``x``'s device, ``axis`` halved.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import quantize_to_fp4
    >>> quantize_to_fp4(torch.zeros(4, 6), axis=-2).shape
    torch.Size([2, 6])
    """
    torch = _torch()
    _check_tensor(x, "x", ("float32",))
    axis = _check_axis(axis, "")
    if x.ndim < -axis:
        raise InvalidOperandError(f"axis must be -1 for a 1-D x, got {axis}")
    if x.shape[axis] % 2:
        raise InvalidOperandError(f"x must have an even extent along axis {axis}, got shape "
                                  f"{tuple(x.shape)}")
    if bool(torch.isnan(x).any()):
        raise InvalidOperandError("x must not contain NaN (FP4 E2M1 has no NaN)")
    mag = x.abs()
    bounds = torch.tensor(_FP4_MIDPOINTS, dtype=torch.float32, device=x.device)
    code = torch.bucketize(mag, bounds)  # a tie goes to the lower code ...
    tie = torch.isin(mag, bounds) & (code % 2 == 1)
    code = code + tie.to(code.dtype)  # ... unless that one is odd
    code = (code | (torch.signbit(x).to(code.dtype) << 3)).to(torch.uint8)
    lo, hi = code.unflatten(x.ndim + axis, (-1, 2)).unbind(x.ndim + axis + 1)
    packed = lo | (hi << 4)
    if axis == -2:  # column-major: the packed axis is the contiguous one
        packed = packed.transpose(-1, -2).contiguous().transpose(-1, -2)
    else:
        packed = packed.contiguous()
    return packed.view(torch.float4_e2m1fn_x2)


def unpack_fp4(fp4_tensor, axis):
    """Decode a ``torch.float4_e2m1fn_x2`` tensor packed along ``axis`` to float32 (that
    extent doubled).

    The inverse of :func:`quantize_to_fp4`'s packing: ``(..., Q)`` becomes ``(..., 2*Q)``
    for ``axis=-1`` and ``(..., P, Q)`` becomes ``(..., 2*P, Q)`` for ``axis=-2``.

    Parameters
    ----------
    fp4_tensor : torch.Tensor
        Packed FP4 values (``torch.float4_e2m1fn_x2``), two per byte.
    axis : {-1, -2}
        The axis the values were packed along: -1 (the last) or -2 (the second to last).

    Returns
    -------
    torch.Tensor
        float32 values on ``fp4_tensor``'s device, ``axis`` doubled.

    Examples
    --------
    >>> import torch
    >>> from cuweave.linalg.advanced.helpers.matmul import quantize_to_fp4, unpack_fp4
    >>> unpack_fp4(quantize_to_fp4(torch.tensor([[1.4], [-7.0]]), axis=-2), axis=-2).tolist()
    [[1.5], [-6.0]]
    """
    torch = _torch()
    _check_tensor(fp4_tensor, "fp4_tensor", ("float4_e2m1fn_x2",))
    axis = _check_axis(axis, "")
    if fp4_tensor.ndim < -axis:
        raise InvalidOperandError(f"axis must be -1 for a 1-D fp4_tensor, got {axis}")
    raw = fp4_tensor.view(torch.uint8)
    lut = torch.tensor(_FP4_VALUES + tuple(-v for v in _FP4_VALUES), dtype=torch.float32,
                       device=fp4_tensor.device)
    at = raw.ndim + axis  # the packed axis; its two values become one new axis after it
    codes = torch.stack((raw & 0xF, raw >> 4), dim=at + 1).flatten(at, at + 1)
    return lut[codes.to(torch.int64)]
