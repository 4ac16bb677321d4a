"""CPU backend of :mod:`cuweave.linalg.advanced`: NumPy BLAS plus fused, blocked epilogs.

The engine hands :func:`execute_cpu` a problem already canonicalized into cuBLASLt's frame (see
:mod:`cuweave.linalg.advanced._epilogs` for the frame and the aux formats, which are the
GPU's). The GEMM runs in NumPy's BLAS (threads limited through threadpoolctl when
``num_threads`` is given) straight into the result when its storage type is the compute type;
otherwise into one float accumulator. Everything after the GEMM — ``alpha``, ``beta * C``, the
bias, aux outputs, the activation or its derivative, bias gradients and the final rounding to
the result's dtype — is applied in one pass over cache-sized blocks of the result, so the
epilog needs no temporaries beyond a few block-sized scratch buffers. Results of at least
:data:`PARALLEL_MIN_ELEMENTS` elements spread the blocks over a thread pool (``num_threads``
workers, else one per available core; NumPy's ufuncs release the GIL).

Compute types (``cuweave._bindings.library_types.ComputeType``) behave as follows:

* ``COMPUTE_32F`` / ``_PEDANTIC``: inputs decoded to float32 (complex64), float32 BLAS.
* ``COMPUTE_32F_FAST_16F`` / ``_FAST_16BF`` / ``_FAST_TF32``: as ``COMPUTE_32F`` after rounding
  each input element (round to nearest even) to float16 / bfloat16 / tf32 (10-bit mantissa).
* ``COMPUTE_64F`` / ``_PEDANTIC``: float64 (complex128) BLAS.
* ``COMPUTE_16F`` / ``_PEDANTIC``: float32 BLAS whose result is rounded to float16 before
  ``alpha``/``beta``/the epilog (the CPU does not emulate the 16-bit running sum).
* ``COMPUTE_32I``: not supported on the CPU.

The result is rounded to its storage dtype once, at the end.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np

from ..._bindings.library_types import ComputeType
from ..._internal.dtypes import NUMPY_NATIVE, from_float32, to_float32
from ..._internal.errors import InvalidOptionError
from ._epilogs import (
    AUX_FORMATS,
    GELU_COEFF,
    GELU_SCALE,
    aux_dtype,
    bias_dtype,
    epilog_spec,
)

__all__ = [
    "execute_cpu",
    "pack_relu_mask",
    "unpack_relu_mask",
    "gelu",
    "gelu_grad",
    "round_operand",
    "act_identity",
    "act_relu",
    "act_gelu",
    "act_drelu",
    "act_dgelu",
]

#: elements per epilog block (fits L2 with the scratch buffers)
BLOCK_ELEMENTS = 1 << 15
#: results smaller than this run the epilog on the calling thread only
PARALLEL_MIN_ELEMENTS = 1 << 18
#: the same two knobs for *light* epilogs (no GELU: bias, ReLU, masks, which are memory-bound
#: and need no scratch): larger blocks mean fewer Python steps, and threads only pay off on
#: large results, since the BLAS threads are still spinning right after the GEMM
BLOCK_ELEMENTS_LIGHT = 1 << 17
PARALLEL_MIN_ELEMENTS_LIGHT = 1 << 22
_HEAVY = frozenset(["gelu", "dgelu"])

_CT = ComputeType
_F64 = frozenset([_CT.COMPUTE_64F, _CT.COMPUTE_64F_PEDANTIC])
_F32 = frozenset([_CT.COMPUTE_32F, _CT.COMPUTE_32F_PEDANTIC, _CT.COMPUTE_32F_FAST_16F,
                  _CT.COMPUTE_32F_FAST_16BF, _CT.COMPUTE_32F_FAST_TF32, _CT.COMPUTE_16F,
                  _CT.COMPUTE_16F_PEDANTIC])
#: input rounding applied by each "fast" compute type
_INPUT_ROUNDING = {_CT.COMPUTE_32F_FAST_16F: "float16", _CT.COMPUTE_32F_FAST_16BF: "bfloat16",
                   _CT.COMPUTE_32F_FAST_TF32: "tf32"}
_RESULT_ROUNDING = {_CT.COMPUTE_16F: "float16", _CT.COMPUTE_16F_PEDANTIC: "float16"}


# --------------------------------------------------------------------------- point-wise math
def gelu(x: np.ndarray, out: np.ndarray | None = None, scratch: np.ndarray | None = None):
    """tanh-approximated GELU of ``x`` (into ``out``, which may be ``x``).

    Evaluated as ``x / (1 + exp(-2u))``, ``u = s (x + c x³)``, which equals
    ``x (1 + tanh(u)) / 2`` and is cheaper (``exp`` is faster than ``tanh`` in NumPy).
    """
    out = np.empty_like(x) if out is None else out
    t = np.empty_like(x) if scratch is None else scratch
    with np.errstate(over="ignore"):
        np.multiply(x, x, out=t)
        t *= -2 * GELU_SCALE * GELU_COEFF
        t -= 2 * GELU_SCALE
        t *= x
        np.exp(t, out=t)
        t += 1
        np.divide(x, t, out=out)
    return out


def gelu_grad(x: np.ndarray, out: np.ndarray | None = None, scratch=None):
    """Derivative of :func:`gelu` at ``x`` (into ``out``, which must not be ``x``).

    Uses ``gelu'(x) = (1 + t) * (1/2 + w * (1 - t))`` with ``t = tanh(s (x + c x³))`` and
    ``w = s x (1 + 3 c x²) / 2``.
    """
    out = np.empty_like(x) if out is None else out
    t = np.empty_like(x) if scratch is None else scratch
    np.multiply(x, x, out=t)
    t *= GELU_COEFF
    t += 1
    t *= x
    t *= GELU_SCALE
    np.tanh(t, out=t)
    np.multiply(x, x, out=out)
    out *= 3 * GELU_COEFF
    out += 1
    out *= x
    out *= 0.5 * GELU_SCALE
    np.subtract(1, t, out=t)
    out *= t
    out += 0.5
    np.subtract(2, t, out=t)
    out *= t
    return out


#: elements rounded per step: the temporaries stay in cache and are reused (no page faults)
_ROUND_CHUNK = 1 << 16


def round_operand(x: np.ndarray, kind: str, inplace: bool = True) -> np.ndarray:
    """Round float32/complex64 ``x`` to ``"float16"``, ``"bfloat16"`` or ``"tf32"`` values.

    In place by default; with ``inplace=False`` the rounded values go to a new array and ``x``
    is left alone (no copy of ``x`` is made first). Contiguous arrays go in cache-sized chunks.
    """
    if x.size <= _ROUND_CHUNK or not (x.flags.c_contiguous or x.flags.f_contiguous):
        return _round_block(x, kind, inplace)
    out = x if inplace else np.empty_like(x)
    src, dst = x.reshape(-1, order="A"), out.reshape(-1, order="A")  # views, same order
    for lo in range(0, src.size, _ROUND_CHUNK):
        dst[lo:lo + _ROUND_CHUNK] = _round_block(src[lo:lo + _ROUND_CHUNK], kind, False)
    return out


def _round_block(x: np.ndarray, kind: str, inplace: bool) -> np.ndarray:
    r = x.view(np.float32) if x.dtype == np.complex64 else x
    keep = 16 if kind == "bfloat16" else 13           # dropped low mantissa bits
    bits = r.view(np.uint32)
    rounded = bits & np.uint32(1 << keep)              # round to nearest even, in place:
    rounded >>= np.uint32(keep)                        # bits + (half - 1 + lsb) ...
    rounded += np.uint32((1 << (keep - 1)) - 1)
    rounded += bits
    rounded &= np.uint32(~((1 << keep) - 1) & 0xFFFFFFFF)  # ... with the low bits cleared
    if kind == "float16":  # tf32's 10-bit mantissa plus float16's exponent range
        _float16_range(r, rounded.view(np.float32))
    nan = np.isnan(r)
    if nan.any():
        np.copyto(rounded, bits, where=nan)
    if not inplace:
        out = rounded.view(np.float32)
        return out.view(np.complex64) if x.dtype == np.complex64 else out
    np.copyto(bits, rounded)
    return x


def _float16_range(r: np.ndarray, rounded: np.ndarray) -> None:
    """Apply float16's exponent range to ``rounded`` (``r`` rounded to 10 mantissa bits).

    Bit-exact with ``r.astype(float16)`` (round to nearest even) and several times faster:
    magnitudes from 65520 overflow to infinity; below 2**-14 the float16 subnormal grid
    (multiples of 2**-24) applies.
    """
    mag = np.abs(r)
    if mag.size == 0:
        return
    if not np.max(mag) < 65520.0:  # also taken when a NaN is present
        big = mag >= 65520.0
        rounded[big] = np.copysign(np.float32(np.inf), r[big])
    small = mag < 2.0**-14
    if small.any():
        rounded[small] = np.round(r[small] * np.float32(2.0**24)) * np.float32(2.0**-24)


# --------------------------------------------------------------------------- relu bitmask
def pack_relu_mask(mask: np.ndarray) -> np.ndarray:
    """Pack a boolean ``(*batch, m, n)`` mask into the ``relu_aux`` layout.

    Returns a ``uint8`` array of shape ``(*batch, roundup(m, 128) // 8, n)``, column-major in
    the last two axes, bit ``i % 8`` (LSB first) of byte ``i // 8`` holding ``mask[..., i, j]``;
    padding is 0.
    """
    mask = np.asarray(mask, dtype=bool)
    *batch, m, n = mask.shape
    ld = AUX_FORMATS["relu_aux"].rows(m)
    out = np.zeros((*batch, n, ld), dtype=np.uint8)
    packed = np.packbits(mask.swapaxes(-1, -2), axis=-1, bitorder="little")
    out[..., : packed.shape[-1]] = packed
    return out.swapaxes(-1, -2)


def unpack_relu_mask(aux: np.ndarray, m: int) -> np.ndarray:
    """Boolean ``(*batch, m, n)`` mask from a ``relu_aux`` bitmask (inverse of the packing)."""
    aux = np.asarray(aux)
    bits = np.unpackbits(aux, axis=-2, count=m, bitorder="little")
    return bits.astype(bool)


# --------------------------------------------------------------------------- blocks
class _Block:
    """A block of rows ``lo:hi`` of the work view (lt rows, or lt columns when ``t``)."""

    __slots__ = ("b", "lo", "hi", "t")

    def __init__(self, b, lo, hi, t):
        self.b, self.lo, self.hi, self.t = b, lo, hi, t

    def mn(self, x2d):
        """Block-aligned view of a cuBLASLt-frame ``(rows, cols)`` matrix of this batch entry."""
        return x2d[:, self.lo:self.hi].T if self.t else x2d[self.lo:self.hi, :]

    def vec_m(self, v):
        """Block-aligned view of a length-``m`` vector broadcast over columns."""
        return v[None, :] if self.t else v[self.lo:self.hi, None]


def _bidx(arr, b):
    return b if arr.shape[0] > 1 else 0


def write_relu_aux(aux, x, blk, m, dtype):
    aux_b = aux[_bidx(aux, blk.b)]
    if blk.t:
        packed = np.packbits(x > 0, axis=-1, bitorder="little")
        aux_b[: packed.shape[1], blk.lo:blk.hi] = packed.T
    else:
        packed = np.packbits(x > 0, axis=0, bitorder="little")
        aux_b[blk.lo // 8: blk.lo // 8 + packed.shape[0], :] = packed


def read_relu_aux(aux, x, blk, m, dtype):
    aux_b = aux[_bidx(aux, blk.b)]
    if blk.t:
        return np.unpackbits(aux_b[:, blk.lo:blk.hi].T, axis=-1, count=m, bitorder="little")
    rows = blk.hi - blk.lo
    src = aux_b[blk.lo // 8: blk.lo // 8 + -(-rows // 8), :]
    return np.unpackbits(src, axis=0, count=rows, bitorder="little")


def write_gelu_aux(aux, x, blk, m, dtype):
    _store(blk.mn(aux[_bidx(aux, blk.b)][:m]), x, dtype)


def read_gelu_aux(aux, x, blk, m, dtype):
    return _load(blk.mn(aux[_bidx(aux, blk.b)][:m]), dtype, x.dtype)




# --------------------------------------------------------------------------- activations
def act_identity(x, aux, scratch):
    """No point-wise stage."""


def act_relu(x, aux, scratch):
    """``max(x, 0)`` in place, NaN → 0 (cuBLASLt's behaviour)."""
    np.fmax(x, 0, out=x)


def act_gelu(x, aux, scratch):
    """tanh GELU in place."""
    gelu(x, out=x, scratch=scratch[0])


def act_drelu(x, aux, scratch):
    """Multiply by the unpacked ReLU mask (``aux``: 0/1 ``uint8`` block)."""
    np.multiply(x, aux, out=x)


def act_dgelu(x, aux, scratch):
    """Multiply by ``gelu'(aux)`` (``aux``: decoded GELU inputs of the block)."""
    g = gelu_grad(aux, out=scratch[0], scratch=scratch[1])
    np.multiply(x, g, out=x)


# --------------------------------------------------------------------------- dtype plumbing
def _load(x, name, dtype):
    """Decode host storage of dtype ``name`` to ``dtype`` (no copy when already ``dtype``)."""
    if x.dtype == dtype and name in NUMPY_NATIVE:
        return x
    if name in NUMPY_NATIVE:
        return x.astype(dtype)
    return to_float32(x, name).astype(dtype, copy=False)


def _store(dst, x, name):
    """Round ``x`` to ``name`` and write it into ``dst`` (host storage of ``name``)."""
    if name in NUMPY_NATIVE:
        np.copyto(dst, x, casting="unsafe")
        return
    enc = from_float32(np.asarray(x, dtype=np.float32), name)
    if enc.dtype != dst.dtype:
        enc = enc.view(dst.dtype)
    np.copyto(dst, enc)


def _compute_dtype(compute_type, complex_):
    ct = ComputeType(compute_type)
    if ct in _F64:
        return np.dtype(np.complex128 if complex_ else np.float64)
    if ct in _F32:
        return np.dtype(np.complex64 if complex_ else np.float32)
    raise InvalidOptionError(
        "compute_type must be a floating-point ComputeType on the CPU, "
        f"got {ct.name}"
    )


def _prepare(x, name, dtype, rounding, conj):
    """Operand decoded to the compute dtype, rounded per the compute type, conjugated."""
    if x.ndim == 3 and x.shape[0] > 1 and x.strides[0] == 0:
        one = _prepare(x[:1], name, dtype, rounding, conj)
        return np.broadcast_to(one, x.shape)
    y = _load(x, name, dtype)
    fresh = y is not x
    if rounding and rounding != name:
        viewable = y.dtype == np.float32 or (y.ndim and y.strides[-1] == y.itemsize)
        if fresh or not viewable:
            y = round_operand(y if fresh else y.copy(), rounding)
        else:  # round into a new array: the caller's operand is never modified
            y = round_operand(y, rounding, inplace=False)
        fresh = True
    if conj:
        y = np.conjugate(y, out=y) if fresh else np.conjugate(y)
    return y


def _batched(arr, tail_shape, writebacks):
    """``arr`` as ``(batch, *tail_shape)``: a view, or a copy registered for write-back."""
    v = arr.view()
    try:
        v.shape = (-1, *tail_shape)
    except AttributeError:  # batch axes not mergeable without a copy
        v = np.reshape(arr, (-1, *tail_shape)).copy()
        writebacks.append((v, arr))
    return v


@contextmanager
def _blas_threads(num_threads):
    """BLAS threads limited to ``num_threads`` for the block, restored after it.

    threadpoolctl's limits are process-wide and OpenBLAS's thread count must not change while
    another limited call's GEMM runs, so calls with ``num_threads`` take turns for their BLAS
    part (the epilog pass runs concurrently); each restores what it found.
    """
    if num_threads is None:
        yield
        return
    global _CONTROLLER
    with _LIMIT_LOCK:
        if _CONTROLLER is None:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER = ThreadpoolController()
        with _CONTROLLER.limit(limits=int(num_threads), user_api="blas"):
            yield


_LIMIT_LOCK = threading.Lock()
_CONTROLLER = None
_POOL = None
_POOL_LOCK = threading.Lock()


def _epilog_workers(num_threads):
    if num_threads is not None:
        return max(1, int(num_threads))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _pool():
    """Process-wide thread pool for the epilog pass (NumPy ufuncs release the GIL)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor

            _POOL = ThreadPoolExecutor(max_workers=_epilog_workers(None),
                                       thread_name_prefix="cuweave-epilog")
        return _POOL


# --------------------------------------------------------------------------- driver
def _accumulator(d, name, dtype, c):
    """(work view, transposed?, direct?) — the GEMM output, oriented row-contiguous."""
    batch, m, n = d.shape
    item = d.itemsize
    native = name in NUMPY_NATIVE and d.dtype == dtype
    native = native and (c is None or not np.may_share_memory(c, d))
    if native and d.strides[-1] == item:
        return d, False, True
    if native and d.strides[-2] == item:
        return d.swapaxes(-1, -2), True, True
    if d.strides[-2] == item and d.strides[-1] != item:
        return np.empty((batch, n, m), dtype), True, False
    return np.empty((batch, m, n), dtype), False, False


def _gemm(a, b, work, t):
    if t:
        np.matmul(b.swapaxes(-1, -2), a.swapaxes(-1, -2), out=work)
    else:
        np.matmul(a, b, out=work)


def execute_cpu(a, b, c, d, *, alpha, beta, epilog, bias=None, aux_in=None, aux_out=None,
                dtypes, compute_type, conj_a=False, conj_b=False, num_threads=None,
                aux_scale=None) -> None:
    """Compute ``d = epilog(alpha * op(a) @ op(b) + beta * c [+ bias])`` in cuBLASLt's frame.

    Parameters
    ----------
    a, b : numpy.ndarray
        ``(batch, m, k)`` and ``(batch, k, n)`` host views (batch stride may be 0).
    c : numpy.ndarray or None
        ``(batch, m, n)`` (broadcast strides allowed); used when ``beta != 0``.
    d : numpy.ndarray
        Writable ``(batch, m, n)`` view of the result; written in place.
    alpha, beta : scalar
    epilog : MatmulEpilog, int, str, EpilogSpec or None
    bias : numpy.ndarray, optional
        ``(batch or 1, m)``.
    aux_in : numpy.ndarray, optional
        ``relu_aux`` / ``gelu_aux`` of the forward pass (aux layout).
    aux_out : dict, optional
        Aux name → preallocated array in the aux layout; filled.
    dtypes : dict
        Canonical dtype names for ``"a"``, ``"b"``, ``"c"``, ``"d"``; optional ``"bias"``,
        ``"aux_in"`` and one entry per aux output name (default: the aux dtype rules).
    compute_type : ComputeType
    conj_a, conj_b : bool
        Conjugate ``a`` / ``b``.
    num_threads : int, optional
        BLAS threads for this call (threadpoolctl); ``None`` leaves them alone.
    aux_scale : float, optional
        The aux matrix output is stored multiplied by it (an fp8 ``gelu_aux``).
    """
    spec = epilog_spec(epilog)
    batch, m, k = a.shape
    n = b.shape[-1]
    ct = ComputeType(compute_type)
    dtype = _compute_dtype(ct, np.dtype(d.dtype).kind == "c" or dtypes["d"].startswith("complex"))
    rounding = _INPUT_ROUNDING.get(ct)
    aux_out = dict(aux_out or {})
    with _blas_threads(num_threads):
        a_c = _prepare(a, dtypes["a"], dtype, rounding, conj_a)
        b_c = _prepare(b, dtypes["b"], dtype, rounding, conj_b)
        work, t, direct = _accumulator(d, dtypes["d"], dtype, c if beta else None)
        _gemm(a_c, b_c, work, t)
    state = _EpilogState(spec, m, n, d, dtypes, dtype, alpha, beta, c, bias, aux_in, aux_out,
                         _RESULT_ROUNDING.get(ct))
    state.aux_scale = None if aux_scale is None or aux_scale == 1 else dtype.type(aux_scale)
    state.run(work, t, direct, num_threads)
    state.operand_bgrad(a_c, b_c)
    state.finish()


class _EpilogState:
    """Everything the blocked epilog pass needs, decoded once."""

    def __init__(self, spec, m, n, d, dtypes, dtype, alpha, beta, c, bias, aux_in, aux_out,
                 result_rounding):
        self.spec, self.m, self.n, self.d, self.dtypes = spec, m, n, d, dtypes
        self.dtype = dtype
        self.alpha = None if alpha is None or alpha == 1 else dtype.type(alpha)
        self.beta = None if c is None or beta is None or beta == 0 else dtype.type(beta)
        self.c = c if self.beta is not None else None
        self.result_rounding = result_rounding
        self.bias = None
        if spec.bias and bias is not None:
            name = dtypes.get("bias") or bias_dtype(dtypes["d"], ab_dtype=dtypes["a"],
                                                    c_dtype=dtypes.get("c"))
            self.bias = _load(bias, name, dtype).reshape(-1, m)
        self.aux_in = None
        if spec.aux_input:
            fmt = AUX_FORMATS[spec.aux_input]
            self.aux_read = fmt.cpu("read")
            self.aux_in = np.reshape(aux_in, (-1, fmt.rows(m), n))
            self.aux_in_dtype = dtypes.get("aux_in") or self._aux_dtype(spec.aux_input)
        self.aux_w = None
        self.writebacks = []
        if spec.aux_output:
            fmt = AUX_FORMATS[spec.aux_output]
            self.aux_write = fmt.cpu("write")
            self.aux_w = _batched(aux_out[spec.aux_output], (fmt.rows(m), n), self.writebacks)
            self.aux_w_dtype = dtypes.get(spec.aux_output) or self._aux_dtype(spec.aux_output)
            self.aux_w[:, fmt.used_rows(m):, :] = 0   # padding
        self.bgrad = None
        if spec.bgrad_source == "d":
            self.bgrad = np.zeros((d.shape[0], m), dtype)
        self.aux_out = aux_out
        self.kernel = spec.cpu
        self.aux_scale = None

    def _aux_dtype(self, name):
        dt = self.dtypes
        return aux_dtype(name, dt["d"], ab_dtype=dt["a"], c_dtype=dt.get("c"))

    def run(self, work, t, direct, num_threads=None):
        """Apply the epilog block by block (over threads when the result is large)."""
        batch, outer, inner = work.shape
        heavy = self.spec.activation in _HEAVY
        block, parallel_min = ((BLOCK_ELEMENTS, PARALLEL_MIN_ELEMENTS) if heavy else
                               (BLOCK_ELEMENTS_LIGHT, PARALLEL_MIN_ELEMENTS_LIGHT))
        rows = max(8, (block // max(inner, 1)) // 8 * 8)
        blocks = [_Block(b, lo, min(outer, lo + rows), t)
                  for b in range(batch) for lo in range(0, outer, rows)]
        workers = min(_epilog_workers(num_threads), len(blocks))
        if batch * outer * inner < parallel_min:
            workers = 1
        shape = (min(rows, outer), inner)
        with np.errstate(over="ignore", under="ignore"):
            if workers == 1:
                self._run_blocks(work, blocks, direct, shape, self.bgrad)
                return
            queue = iter(blocks)  # shared: each worker pulls the next block (dynamic schedule)
            partial = [None if self.bgrad is None or not t else np.zeros_like(self.bgrad)
                       for _ in range(workers)]
            pool = _pool()
            futures = [pool.submit(self._run_blocks, work, queue, direct, shape,
                                   self.bgrad if p is None else p) for p in partial]
            for f in futures:
                f.result()
        for p in partial:
            if p is not None:
                self.bgrad += p

    def _run_blocks(self, work, blocks, direct, shape, bgrad):
        scratch = [np.empty(shape, self.dtype) for _ in range(2)]
        with np.errstate(over="ignore", under="ignore"):  # thread-local: set per worker
            for blk in blocks:
                x = work[blk.b, blk.lo:blk.hi]
                self._block(x, blk, [buf[: blk.hi - blk.lo] for buf in scratch], bgrad)
                if not direct:
                    _store(blk.mn(self.d[blk.b]), x, self.dtypes["d"])

    def _block(self, x, blk, scratch, bgrad):
        m = self.m
        if self.result_rounding:
            np.copyto(x, x.astype(self.result_rounding))
        if self.alpha is not None:
            x *= self.alpha
        if self.c is not None:
            cb = _load(blk.mn(self.c[_bidx(self.c, blk.b)]), self.dtypes["c"], self.dtype)
            if self.beta == 1:
                x += cb
            else:
                x += self.beta * cb
        if self.bias is not None:
            x += blk.vec_m(self.bias[_bidx(self.bias, blk.b)])
        if self.aux_w is not None:
            self.aux_write(self.aux_w, x if self.aux_scale is None else x * self.aux_scale, blk,
                           m, self.aux_w_dtype)
        aux = None
        if self.aux_in is not None:
            aux = self.aux_read(self.aux_in, x, blk, m, self.aux_in_dtype)
        self.kernel(x, aux, scratch)
        if bgrad is not None:
            if blk.t:
                bgrad[blk.b] += x.sum(axis=0)
            else:
                bgrad[blk.b, blk.lo:blk.hi] = x.sum(axis=1)

    def operand_bgrad(self, a_c, b_c):
        """Fill the bias-gradient output (from ``D``, ``op(A)`` or ``op(B)``)."""
        spec = self.spec
        if spec.bgrad_source is None:
            return
        if spec.bgrad_source == "d":
            vec = self.bgrad
        else:
            src, axis = (a_c, -1) if spec.bgrad_source == "a" else (b_c, -2)
            if src.shape[0] > 1 and src.strides[0] == 0:
                src = src[:1]
            vec = src.sum(axis=axis)
        out = self.aux_out[spec.bgrad_output]
        length = vec.shape[-1]
        view = _batched(out, (length,), self.writebacks)
        name = self.dtypes.get(spec.bgrad_output) or self._aux_dtype(spec.bgrad_output)
        _store(view, np.broadcast_to(vec, view.shape), name)

    def finish(self):
        """Copy outputs that could not be viewed in place back to the caller's arrays."""
        for tmp, orig in self.writebacks:
            orig[...] = tmp.reshape(orig.shape)
