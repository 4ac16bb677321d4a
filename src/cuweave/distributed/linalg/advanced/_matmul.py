"""Distributed matrix products (nvmath-python's ``nvmath.distributed.linalg.advanced``).

``D = F(alpha * op(A) @ op(B) + beta * C)`` where every matrix is distributed across processes
(``Slab``, ``BlockCyclic``/``BlockNonCyclic`` over a ``ProcessGrid``, or boxes) and ``op`` is
the transpose (conjugate transpose) the qualifiers ask for. Each process gathers the rows of
``op(A)`` and the columns of ``op(B)`` its block of ``D`` needs (one all-to-all per operand,
planned from the distributions: MPI on CPU ranks, NCCL between GPUs) and runs the local GEMM
engine (CPU, or cuBLASLt on GPU operands) with the epilog on its block. Every epilog of
:class:`MatmulEpilog` is supported, described by the single-process engine's epilog table: those
acting elementwise on ``D`` (bias along its rows, ReLU/GELU, their aux outputs, which are this
process's block's) need nothing more; the bias gradients (BGRADA, BGRADB, DRELU_BGRAD,
DGELU_BGRAD) reduce across processes and are summed with one allreduce (see ``_bgrad``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np

from ...._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ...._internal.logging import get_logger
from ....linalg.advanced._binding import frame_constraints
from ....linalg.advanced._epilogs import (
    MatmulEpilog,
    aux_layout,
    epilog_spec,
    validate_epilog,
    validate_epilog_inputs,
)
from ....linalg.advanced._layout import aux_frames
from ..._distributions import Layout
from ..._exchange import ExchangePlan
from ..._runtime import agree, require_context
from ..._spec import (
    check_same,
    coerce_distribution,
    coerce_options,
    dtype_name,
    local_operand,
    resolve_layout,
)
from ._bgrad import plan_bias_gradient, reduce_bias_gradient

__all__ = ["MatmulOptions", "Matmul", "matmul", "matrix_qualifiers_dtype"]

_log = get_logger("distributed.matmul")

matrix_qualifiers_dtype = np.dtype([("structure", object), ("is_transpose", "<i1"),
                                    ("is_conjugate", "<i1")])
_DTYPES = ("float16", "float32", "float64", "complex64", "complex128")


@dataclasses.dataclass
class MatmulOptions:
    """Options of the distributed :class:`Matmul` and :func:`matmul`.

    Attributes
    ----------
    inplace : bool or None
        Write the result into ``c`` (default: ``True`` when ``c`` is given).
    compute_type, scale_type : optional
        Passed to the local GEMM engine.
    result_type, algo_type, sm_count_communication : optional
        Accepted for compatibility (GPU-only meaning).
    result_amax, block_scaling : bool
        Must be ``False`` (narrow precision is not distributed yet).
    logger : logging.Logger or None
    blocking : {True, 'auto'}
        Host operands always block; GPU results are ordered on the package's current stream.
    """

    inplace: bool | None = None
    compute_type: Any = None
    scale_type: Any = None
    result_type: Any = None
    algo_type: Any = None
    result_amax: bool = False
    block_scaling: bool = False
    sm_count_communication: int = 0
    logger: object = None
    blocking: Literal[True, "auto"] = "auto"

    def __post_init__(self):
        if self.inplace is not None and not isinstance(self.inplace, bool):
            raise InvalidOptionError(f"inplace must be a bool or None, got {self.inplace!r}")
        if self.blocking not in (True, "auto"):
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")
        if self.result_amax or self.block_scaling:
            raise InvalidOptionError("result_amax and block_scaling must be False (narrow "
                                     "precision is not distributed yet), got True")

    def _key(self):
        return (self.inplace, repr(self.compute_type), repr(self.scale_type))


def _qualifiers(value, count: int):
    """``[(is_transpose, is_conjugate)] * count`` from a qualifiers array (or None)."""
    if value is None:
        return [(False, False)] * count
    q = np.asarray(value)
    if (q.dtype.names is None or "is_transpose" not in q.dtype.names or q.ndim != 1
            or len(q) not in (2, 3)):
        raise InvalidOptionError(
            "qualifiers must be a 1-D array of 2 or 3 elements of matrix_qualifiers_dtype, got "
            f"{value!r}")
    out = []
    for i in range(count):
        if i >= len(q):
            out.append((False, False))
            continue
        t, c = bool(q[i]["is_transpose"]), bool(q[i]["is_conjugate"])
        if c and not t:
            raise InvalidOptionError(
                f"qualifiers[{i}]['is_conjugate'] needs qualifiers[{i}]['is_transpose'] "
                "(a conjugate transpose), got is_conjugate without is_transpose")
        out.append((t, c))
    if len(q) == 3 and bool(q[2]["is_transpose"]):
        raise InvalidOptionError("qualifiers[2] (c) must not be transposed, got is_transpose")
    return out


class Matmul:
    """A planned distributed matrix product (collective: every process makes the same calls).

    Parameters
    ----------
    a, b : array
        This process's blocks of ``A`` and ``B`` (host: NumPy or CPU torch; GPU: CuPy or CUDA
        torch on the process's device, where bfloat16 is accepted too).
    c : array, optional
        This process's block of ``C`` (distributed like the result).
    distributions : sequence of 3 Distribution
        Of ``a``, ``b`` (as passed, before the qualifiers' transposes) and the result/``c``.
    alpha, beta : float, optional
    qualifiers : numpy array of ``matrix_qualifiers_dtype``, optional
        ``is_transpose`` / ``is_conjugate`` of ``a`` and ``b``.
    quantization_scales : None
        Must be ``None`` (narrow precision is not distributed yet).
    options : MatmulOptions or dict, optional
    stream : optional
        Accepted for compatibility.

    Examples
    --------
    >>> # mpiexec -n 4: A split on rows, B on columns, D on rows  # doctest: +SKIP
    >>> with Matmul(a, b, distributions=[Slab.X, Slab.Y, Slab.X]) as mm:  # doctest: +SKIP
    ...     mm.plan()
    ...     d = mm.execute()
    """

    def __init__(self, a, b, /, c=None, *, distributions, alpha=None, beta=None,
                 qualifiers=None, quantization_scales=None, options=None, stream=None):
        self._group = require_context().process_group
        self.options = coerce_options(options, MatmulOptions)
        self._log = self.options.logger or _log
        self._freed, self._plans, self._spec, self._bgrad = False, None, None, None
        if quantization_scales is not None:
            raise InvalidOptionError("quantization_scales must be None (narrow precision is "
                                     f"not distributed yet), got {quantization_scales!r}")
        gathered = agree(self._group, self._describe, a, b, c, distributions, alpha, beta,
                         qualifiers)
        agree(self._group, self._resolve, gathered)

    def _describe(self, a, b, c, distributions, alpha, beta, qualifiers):
        what = "distributed matmul"
        ops = [local_operand(a, "a", what), local_operand(b, "b", what),
               None if c is None else local_operand(c, "c", what)]
        if not isinstance(distributions, (list, tuple)) or len(distributions) != 3:
            raise InvalidOptionError(
                f"distributions must be a sequence of 3 distributions (a, b, result), got "
                f"{distributions!r}")
        dists = [coerce_distribution(d, f"distributions[{i}]")
                 for i, d in enumerate(distributions)]
        spaces = [o.backend.name for o in ops if o is not None]
        if len(set(spaces)) > 1:
            raise InvalidOperandError(
                f"a, b and c must live in one memory space, got {spaces!r} (cpu: host arrays, "
                "cuda: GPU arrays)")
        pkgs = [o.package for o in ops if o is not None]
        if spaces[0] == "cuda" and len(set(pkgs)) > 1:
            raise InvalidOperandError(f"a, b and c must be arrays of one GPU package, got {pkgs!r}")
        allowed = _DTYPES + (("bfloat16",) if spaces[0] == "cuda" else ())
        for name, op in zip("abc", ops):
            if op is not None and (len(op.shape) != 2 or dtype_name(op.dtype) not in allowed):
                raise InvalidOperandError(
                    f"{name} must be a 2-D array of {', '.join(allowed)}, got shape {op.shape} "
                    f"{dtype_name(op.dtype)}")
        if ops[0].dtype != ops[1].dtype:
            raise InvalidOperandError(f"b must have a's dtype {dtype_name(ops[0].dtype)}, "
                                      f"got {dtype_name(ops[1].dtype)}")
        if ops[2] is not None and beta is None:
            raise InvalidOptionError("beta must be given with c, got None")
        for name, v in (("alpha", alpha), ("beta", beta)):
            if v is not None and not isinstance(v, (int, float, complex, np.number)):
                raise InvalidOptionError(f"{name} must be a number or None, got {v!r}")
        quals = _qualifiers(qualifiers, 2)
        self._ops, self._alpha, self._beta, self._quals = ops, alpha, beta, quals
        return ([None if o is None else o.describe() for o in ops], dists, quals,
                self.options._key(), alpha, beta)

    def _resolve(self, gathered):
        n = self._group.nranks
        for i, what in ((2, "qualifiers"), (3, "options"), (4, "alpha"), (5, "beta")):
            check_same(gathered, i, what)
        descs = [g[0] for g in gathered]
        if len({d[2] is None for d in descs}) != 1:
            raise InvalidOperandError("c must be given on every process or on none")
        for j, name in enumerate("ab"):
            check_same([d[j] for d in descs], 1, f"{name} dtype")
            check_same([d[j] for d in descs], 3, f"{name} memory space ('cpu' or 'cuda')")
        layouts = [resolve_layout(f"distributions[{j}] ({name})", [g[1][j] for g in gathered],
                                  [d[j][0] for d in descs], n) for j, name in enumerate("ab")]
        (ta, _), (tb, _) = self._quals
        ga = layouts[0].global_shape[::-1] if ta else layouts[0].global_shape
        gb = layouts[1].global_shape[::-1] if tb else layouts[1].global_shape
        if ga[1] != gb[0] or ga[1] == 0:
            raise InvalidOperandError(
                f"op(a) and op(b) must have a common non-zero inner dimension: op(a) is {ga}, "
                f"op(b) is {gb} (global shapes)")
        m, k, nn = ga[0], ga[1], gb[1]
        dists_c = [g[1][2] for g in gathered]
        c_shapes = None if descs[0][2] is None else [d[2][0] for d in descs]
        lc = resolve_layout("distributions[2] (result)", dists_c, c_shapes, n,
                            global_shape=(m, nn))
        full_k = np.arange(k, dtype=np.int64)
        need_a = [((s[0], full_k) if not ta else (full_k, s[0])) for s in lc.sets]
        need_b = [((full_k, s[1]) if not tb else (s[1], full_k)) for s in lc.sets]
        rank = self._group.rank
        self._layout_c = lc
        self._exchanges = tuple(
            ExchangePlan(src, Layout(src.global_shape, need), rank)
            for src, need in zip(layouts, (need_a, need_b)))
        self.mnk = (m, nn, k)

    def _check_live(self):
        if self._freed:
            raise InvalidStateError("this Matmul was freed; create a new one")

    def plan(self, *, preferences=None, epilog=None, epilog_inputs=None, stream=None):
        """Choose the epilog (and its local inputs). Collective.

        ``epilog_inputs`` hold this process's share: ``bias``, its rows of ``D``; ``relu_aux``
        / ``gelu_aux``, the aux output the forward product returned on this process. The bias
        gradients come back in the aux dict: ``bgrada``, ``drelu_bgrad``, ``dgelu_bgrad`` of
        this process's rows of ``D`` (shape ``(rows,)``), ``bgradb`` whole (``(N,)``, the same
        on every process), each summed over the processes.

        Parameters
        ----------
        preferences : optional
            Accepted for compatibility (the local products choose their algorithms).
        epilog : MatmulEpilog, optional
            The fused epilog (as in :mod:`cuweave.linalg.advanced`).
        epilog_inputs : dict, optional
            This process's share of the epilog's inputs (above).
        stream : optional
                Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()
        planned = []  # kept only once every process has accepted its inputs
        agree(self._group, lambda *args: planned.append(self._plan_local(*args)), epilog,
              epilog_inputs)
        self._spec, self._epilog_inputs, self._bgrad = planned[0]
        self._log.info("distributed matmul planned: m, n, k = %s, epilog %s", self.mnk,
                       self._spec.name)

    def _plan_local(self, epilog, epilog_inputs) -> tuple:
        """``(spec, local epilog inputs, bias-gradient plan)`` after checking this process's
        inputs."""
        spec = epilog_spec(epilog)
        inputs = validate_epilog_inputs(spec, epilog_inputs)
        a = self._ops[0]
        m, n, k = self.mnk
        if spec.epilog != MatmulEpilog.DEFAULT:
            validate_epilog(spec, dtype=dtype_name(a.dtype))
        if spec.bgrad_output and 0 in (m, n):
            raise InvalidOperandError(
                f"m and n (the global result's shape) must be non-zero for epilog {spec.name}, "
                f"got {(m, n)!r}")
        if a.backend.name == "cuda" and k < spec.min_k:
            raise InvalidOperandError(f"k must be >= {spec.min_k} for epilog {spec.name} (a "
                                      f"cuBLASLt restriction), got {k!r}")
        rows, cols = self._layout_c.local_shape(self._group.rank)
        if spec.bias:
            inputs["bias"] = self._local_bias(inputs["bias"], rows)
        if spec.aux_input:
            name = spec.aux_input
            inputs[name] = self._local_aux(spec, inputs[name], rows, cols)
        return spec, inputs or None, plan_bias_gradient(spec, self._layout_c, self._group.rank)

    def _local_input(self, x, key: str):
        op = local_operand(x, f"epilog_inputs[{key!r}]", "distributed matmul")
        a = self._ops[0]
        if op.backend is not a.backend:
            raise InvalidOperandError(
                f"epilog_inputs[{key!r}] must live where a does ({a.backend.name}), got "
                f"{op.backend.name}")
        return op

    def _local_bias(self, bias, rows: int):
        arr = self._local_input(bias, "bias").array
        if math.prod(arr.shape) != rows:
            raise InvalidOperandError(
                f"epilog_inputs['bias'] must hold this process's {rows} result rows, got "
                f"shape {arr.shape}")
        return arr.reshape(rows)

    def _local_aux(self, spec, aux, rows: int, cols: int):
        """The forward pass's aux output of this process's block, checked before any work as
        the single-process engine checks it (dtype, layout in either frame, and for a square
        block the array the forward pass returned)."""
        from ...._internal.packages import wrap_operand

        name = spec.aux_input
        op = self._local_input(aux, name)
        result = dtype_name(self._ops[0].dtype)
        want = aux_layout(name, rows, cols, (), result)[2]
        desc = wrap_operand(op.array, f"epilog_inputs[{name!r}]")
        if desc.dtype != want:
            raise InvalidOperandError(
                f"epilog_inputs[{name!r}] dtype must be {want!r} (the {name} output of the "
                f"forward pass), got {desc.dtype!r}")
        if not (rows and cols):  # an empty block: its (empty) aux is not read
            if desc.size:
                raise InvalidOperandError(
                    f"epilog_inputs[{name!r}] must be empty (this process's block of the result "
                    f"is {rows} x {cols}), got shape {desc.shape}")
            return op.array
        frames = aux_frames(name, desc.shape, desc.strides, rows, cols, (), result)  # raises
        if len(frames) > 1:  # a square block: the frame is the forward pass's (raises if lost)
            frame_constraints(spec, {name: desc}, rows, cols, (), result)
        return op.array

    def reset_operands(self, *, a=None, b=None, c=None, alpha=None, beta=None,
                       quantization_scales=None, epilog_inputs=None, stream=None):
        """Use new operands of the same local shapes, dtypes and packages. Collective.

        Parameters
        ----------
        a, b, c : array, optional
            New local blocks (``None``: keep the planned one).
        alpha, beta : float, optional
            New scalars (``None``: keep them).
        quantization_scales : None
                Must be ``None`` (narrow precision is not distributed yet).
        epilog_inputs : dict, optional
            New local epilog inputs (checked as in :meth:`plan`).
        stream : optional
                Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()

        def check(a, b, c, alpha, beta, epilog_inputs):
            new = list(self._ops)
            for j, (name, x) in enumerate((("a", a), ("b", b), ("c", c))):
                if x is None:
                    continue
                op = local_operand(x, name, "distributed matmul")
                if new[j] is None or op.describe() != new[j].describe():
                    raise InvalidOperandError(
                        f"{name} must match the planned operand "
                        f"{None if new[j] is None else new[j].describe()}, got {op.describe()}")
                new[j] = op
            planned = None if epilog_inputs is None else self._plan_local(self._spec,
                                                                          epilog_inputs)
            pending.append((new, planned))

        pending = []  # applied only once every process has accepted its inputs
        agree(self._group, check, a, b, c, alpha, beta, epilog_inputs)
        self._ops, planned = pending[0]
        if planned is not None:
            self._spec, self._epilog_inputs, self._bgrad = planned
        self._alpha = self._alpha if alpha is None else alpha
        self._beta = self._beta if beta is None else beta

    def execute(self, *, release_workspace=False, stream=None):
        """Compute this process's block of the result (Fortran-ordered, like cuBLASMp's) and,
        with an epilog that has them, its aux outputs (in the operands' package). Collective.

        Parameters
        ----------
        release_workspace : bool
            Accepted for compatibility (nothing is kept between calls).
        stream : optional
                Accepted for compatibility: GPU work runs on the package's current stream.

        Returns
        -------
        array or (array, dict)
            The local result, with the aux outputs when the epilog has them.
        """
        self._check_live()
        if self._spec is None:
            raise InvalidStateError("execute() needs plan() first")
        a, b, c = self._ops
        backend = a.backend
        out, aux = self._local_product(backend, a, b, c)
        if self._bgrad is not None:
            partial = aux.pop(self._bgrad.name, None)
            aux[self._bgrad.name] = reduce_bias_gradient(backend, self._group, self._bgrad,
                                                         partial, a.array)
        inplace = self.options.inplace if self.options.inplace is not None else c is not None
        if inplace and c is not None:
            c.array[...] = out
            result = c.backend.wrap(c.array, c.package)
        else:
            result = backend.wrap(out, a.package)
        if aux is None:
            return result
        return result, {key: backend.wrap(v, a.package) for key, v in aux.items()}

    def _local_product(self, backend, a, b, c):
        """``(this process's block of D, its aux dict or None)``: the gathers and the local
        GEMM with the epilog (an empty block: zeros, and aux outputs of its empty shape)."""
        ablk = backend.exchange(self._group, self._exchanges[0], a.array)
        bblk = backend.exchange(self._group, self._exchanges[1], b.array)
        (ta, ca), (tb, cb) = self._quals
        ablk, bblk = backend.op(ablk, ta, ca), backend.op(bblk, tb, cb)
        shape = self._layout_c.local_shape(self._group.rank)
        spec = self._spec
        if 0 in shape:
            aux = None if not spec.outputs else {}
            if spec.aux_output:
                ashape, _, dtype = aux_layout(spec.aux_output, *shape, (), dtype_name(a.dtype))
                aux[spec.aux_output] = backend.zeros(
                    ablk, ashape, None if dtype == dtype_name(a.dtype) else np.dtype(dtype),
                    order="F")
            return backend.zeros_like_result(ablk, bblk, shape), aux
        res = backend.matmul_local(
            ablk, bblk, None if c is None else c.array, alpha=self._alpha,
            beta=self._beta if c is not None else None,
            epilog=None if spec.epilog == MatmulEpilog.DEFAULT else spec.epilog,
            epilog_inputs=self._epilog_inputs)
        out, aux = res if isinstance(res, tuple) else (res, None)
        return backend.fortran(out), aux

    def free(self):
        """Release everything; the object cannot be used afterwards."""
        self._exchanges = None
        self._freed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()


def matmul(a, b, /, c=None, *, distributions, alpha=None, beta=None, epilog=None,
           epilog_inputs=None, qualifiers=None, quantization_scales=None, options=None,
           preferences=None, stream=None):
    """Distributed ``F(alpha * op(a) @ op(b) + beta * c)``; see :class:`Matmul`. Collective.

    Parameters
    ----------
    a, b : array
        This process's blocks of ``A`` and ``B``.
    c : array, optional
        This process's block of ``C``.
    distributions : sequence of 3 Distribution
        Of ``a``, ``b`` and the result (see :class:`Matmul`).
    alpha, beta : float, optional
        The scalars.
    epilog : MatmulEpilog, optional
        The fused epilog (as in :mod:`cuweave.linalg.advanced`).
    epilog_inputs : dict, optional
        This process's share of the epilog's inputs (see :meth:`Matmul.plan`).
    qualifiers : numpy array of ``matrix_qualifiers_dtype``, optional
        ``is_transpose`` / ``is_conjugate`` of ``a`` and ``b``.
    quantization_scales : None
        Must be ``None`` (narrow precision is not distributed yet).
    options : MatmulOptions or dict, optional
        See :class:`MatmulOptions`.
    preferences : optional
        Accepted for compatibility.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array or (array, dict)
        As :meth:`Matmul.execute`.

    Examples
    --------
    >>> d = matmul(a, b, distributions=[Slab.X, Slab.Y, Slab.X])  # doctest: +SKIP
    """
    with Matmul(a, b, c, distributions=distributions, alpha=alpha, beta=beta,
                qualifiers=qualifiers, quantization_scales=quantization_scales,
                options=options, stream=stream) as mm:
        mm.plan(preferences=preferences, epilog=epilog, epilog_inputs=epilog_inputs,
                stream=stream)
        return mm.execute(stream=stream)
