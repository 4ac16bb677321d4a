"""``cuweave.device.Matmul``: a cuBLASDx block GEMM callable inside a user's numba kernel.

Code generation: NVIDIA's libmathdx runtime generator (``nvidia-libmathdx-cu13`` 0.4.2, which
carries cuBLASDx 0.8), not NVRTC on the cuBLASDx headers of ``nvidia-mathdx``: the newest
``nvidia-mathdx`` wheel (25.6) carries cuBLASDx 0.4, without the opaque-tensor device functions,
accumulators and pipelines that nvmath-python 1.0's surface is built on, while libmathdx
generates exactly those (copy, clear, axpby, partitioner queries, accumulators) as ``extern "C"``
functions with a C ABI and answers traits through a documented C API; NVRTC on the headers was
not faster either (14.7 s for one 32x32x32 fp32 configuration on the 2-core development machine).

Where the time goes (CPU seconds there, one new 24x40x28 fp32 configuration): libmathdx's
traits are one NVRTC compilation (~3.8 s) and the execute's LTO-IR another (~6.7 s). Asking
for libmathdx's name of the generated function costs a third compilation, so the symbol is
ours; a description with a given block dimension takes its traits from cuBLASDx's defaults
(``_derived``, compared with libmathdx's in the tests) and compiles only its code. Every
configuration is cached on disk (traits, layout traits and each generated device function), so
a configuration seen before builds in milliseconds, and traits never need a GPU.
:func:`~cuweave.device.warm_cache` compiles many configurations in parallel processes, and
``cuweave.device._warm.warm_kernels`` every device function a set of kernels calls.

A kernel (nvmath-python 1.0's surface; only the import changes)::

    MM = Matmul(size=(32, 16, 64), precision=np.float32, data_type="real",
                arrangement=("row_major", "col_major", "col_major"), block_size=64)

    @cuda.jit
    def kernel(a, b, c, alpha, beta):
        sa = cuda.shared.array(MM.a_size, np.float32)   # traits are compile-time constants
        ...
        MM.execute(alpha, sa, sb, beta, sc)             # C = alpha A B + beta C in shared memory

    kernel[1, MM.block_dim, 0, MM.get_shared_storage_size()](...)
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from .._internal.errors import InvalidOptionError
from .._internal.logging import get_logger
from . import _cache
from ._blas_layout import _LAYOUTS, Layout
from ._blas_options import (
    MAX_ALIGNMENT,
    Alignment,
    Arrangement,
    LeadingDimension,
    MatmulSpec,
    Precision,
    TransposeMode,
)
from ._kernel_object import KernelObject, register_kernel_type
from ._parallel import generate_in_processes, with_sm
from .common_cuda import ComputeCapability, Dim3

__all__ = ["Matmul", "matmul", "Layout", "SharedStorageCalc", "MAX_ALIGNMENT", "Precision",
           "Arrangement", "TransposeMode", "LeadingDimension", "Alignment",
           "get_current_device_cc", "warm_matmul_cache"]

_log = get_logger("device.matmul")
_lock = threading.Lock()

def get_current_device_cc() -> ComputeCapability:
    """Compute capability of the current CUDA device (raises CudaUnavailableError without one)."""
    from ._options import default_sm

    sm = default_sm()
    return ComputeCapability(sm // 100, (sm // 10) % 10)


class SharedStorageCalc:
    """Running size of a shared-memory buffer holding several aligned parts.

    Examples
    --------
    >>> calc = SharedStorageCalc()
    >>> calc.add(16, 4, 100)     # alignment, element size, element count
    >>> calc.add(8, 24)          # alignment, bytes
    >>> calc.get()
    424
    """

    def __init__(self):
        self._memory = 0

    def add(self, *args) -> None:
        """Add one aligned part: ``add(alignment, size_bytes)``,
        ``add(alignment, elem_size, count)`` or ``add(alignment, elem_size, layout)``.

        Parameters
        ----------
        *args
            ``alignment`` (bytes, a positive int) and either the part's size in bytes, or the
            size of one element in bytes and the number of elements (an int, or a
            :class:`Layout` whose ``cosize`` is taken).
        """
        if len(args) == 2:
            alignment, nbytes = args
        elif len(args) == 3:
            alignment, elem, count = args
            if isinstance(count, Layout):
                count = count.cosize
            if not isinstance(elem, (int, np.integer)) or elem <= 0:
                raise InvalidOptionError(f"elem_size must be a positive integer, got {elem!r}")
            if not isinstance(count, (int, np.integer)) or count <= 0:
                raise InvalidOptionError(
                    f"num_elements must be a positive integer or a Layout, got {count!r}")
            nbytes = elem * count
        else:
            raise InvalidOptionError(f"add takes 2 or 3 arguments, got {len(args)}")
        if not isinstance(alignment, (int, np.integer)) or alignment <= 0:
            raise InvalidOptionError(f"alignment must be a positive integer, got {alignment!r}")
        if not isinstance(nbytes, (int, np.integer)) or nbytes <= 0:
            raise InvalidOptionError(f"matrix_size_bytes must be a positive integer, "
                                     f"got {nbytes!r}")
        self._memory = -(-self._memory // alignment) * alignment + int(nbytes)

    def get(self) -> int:
        """Total bytes so far."""
        return self._memory


def _versions():
    from ._blas_mathdx import cache_versions

    return cache_versions()


def _derived(spec: MatmulSpec) -> dict | None:
    """Traits of a description whose block dimension is given and whose leading dimensions
    are given or left to the default, without asking libmathdx (one NVRTC compilation, ~3 s
    of a new configuration's ~9 s here): cuBLASDx's defaults are the operand's element size
    for alignments and its rows (column-major) or columns (row-major) for leading dimensions,
    and such a block runs exactly its threads. ``None`` when cuBLASDx must suggest something.
    The tests compare these with libmathdx's traits; descriptions cuBLASDx does not support
    are then reported when their code is generated."""
    if not isinstance(spec.block_dim, tuple) or spec.leading_dimension == "suggested":
        return None
    cplx = 2 if spec.is_complex else 1
    orders = spec.storage_orders()
    dims = (spec.a_dim, spec.b_dim, spec.c_dim)
    ld = spec.leading_dimension or tuple(d[1] if o == "row_major" else d[0]
                                         for d, o in zip(dims, orders))
    x, y, z = spec.block_dim
    return {
        "value_types": list(spec.precision),
        "block_dim": [x, y, z],
        "leading_dimension": list(ld),
        "alignment": list(spec.alignment or [np.dtype(p).itemsize * cplx
                                             for p in spec.precision]),
        "arrangement": list(orders),
        "max_threads_per_block": x * y * z,
    }


def _resolve(spec: MatmulSpec) -> dict:
    """Traits of ``spec`` with suggested block_dim / leading dimensions resolved (cached)."""
    from . import _blas_mathdx

    def build(key):
        bd = spec.block_dim if isinstance(spec.block_dim, tuple) else None
        ld = spec.leading_dimension if isinstance(spec.leading_dimension, tuple) else None
        traits = _blas_mathdx.traits(spec, bd, ld)
        if spec.block_dim == "suggested" or spec.leading_dimension == "suggested":
            bd = traits["suggested_block_dim"] if spec.block_dim == "suggested" else bd
            ld = (traits["suggested_leading_dimension"]
                  if spec.leading_dimension == "suggested" else ld)
            traits = {**_blas_mathdx.traits(spec, bd, ld),
                      "suggested_block_dim": traits["suggested_block_dim"],
                      "suggested_leading_dimension": traits["suggested_leading_dimension"]}
        return {"traits": traits, "symbol": None, "ltoir": None}

    return _cache.cached([list(spec.key()), "traits", _versions()], build)["traits"]


_KERNEL_ATTRIBUTES = frozenset({
    "a_dim", "b_dim", "c_dim", "a_size", "b_size", "c_size", "block_dim", "block_size",
    "max_threads_per_block", "leading_dimension", "a_value_type", "b_value_type",
    "c_value_type", "value_type", "alignment", "size", "with_pipeline",
    "enable_input_streaming",
})


class Matmul(KernelObject):
    """A GEMM ``C = alpha * op(A) @ op(B) + beta * C`` computed by one thread block (cuBLASDx).

    Parameters
    ----------
    size : (m, n, k)
        Problem size.
    precision : dtype or (a, b, c)
        ``numpy.float16``, ``numpy.float32``, ``numpy.float64`` or a signed or unsigned
        integer type of 8 to 64 bits (real GEMMs; e.g. int8 A and B with an int32 C) for all
        or each operand.
    data_type : {'real', 'complex'}
    sm : int or ComputeCapability, optional
        Target architecture; default: the current device's.
    block_size : int or 'suggested', optional
        Threads in the block (exclusive with ``block_dim``).
    block_dim : Dim3, tuple or 'suggested', optional
    leading_dimension : (lda, ldb, ldc) or 'suggested', optional
    arrangement : (a, b, c) of 'row_major'/'col_major'
        Exactly one of ``arrangement`` and (deprecated) ``transpose_mode`` is required.
    transpose_mode : (a, b) of 'non_transposed'/'transposed'/'conj_transposed'
    alignment : (a, b, c), optional
        Bytes, multiples of the element size, at most 16 (``MAX_ALIGNMENT``).
    function : 'MM'
    static_block_dim : bool
    execution : 'Block'
    with_pipeline, enable_input_streaming : bool
        cuBLASDx's pipelined execution (TMA/asynchronous tile streaming through shared memory,
        see :meth:`suggest_device_pipeline`) and its input streaming.

    Notes
    -----
    Traits come from libmathdx on the CPU (no GPU needed) and are cached on disk. Inside a
    numba kernel the object's traits are compile-time constants and ``MM.execute(...)`` links
    the generated cuBLASDx code: ``execute(alpha, smem_a, smem_b, beta, smem_c)`` on arrays in
    shared memory laid out with ``leading_dimension`` (the pointer API),
    ``execute(alpha, a, lda, b, ldb, beta, c, ldc)`` with leading dimensions chosen at run
    time, or on opaque tensors (``execute(smem_a, smem_b, rmem_c)`` accumulates into a register
    fragment or an accumulator; see :func:`cuweave.device.make_tensor`). Launch with
    ``MM.block_dim`` threads.

    Examples
    --------
    >>> import numpy as np
    >>> MM = Matmul((32, 16, 64), np.float32, "real", sm=90, block_size=64,
    ...             arrangement=("row_major", "col_major", "col_major"))  # doctest: +SKIP
    >>> MM.block_dim, MM.leading_dimension  # doctest: +SKIP
    (Dim3(x=64, y=1, z=1), LeadingDimension(a=64, b=64, c=32))
    """

    def __init__(self, size, precision, data_type, *, sm=None, block_size=None, block_dim=None,
                 leading_dimension=None, transpose_mode=None, arrangement=None, alignment=None,
                 function="MM", static_block_dim=False, execution="Block", with_pipeline=False,
                 enable_input_streaming=False):
        if sm is None:
            from ._options import default_sm

            sm = default_sm()
        spec = MatmulSpec.from_knobs(
            size, precision, data_type, sm=sm, block_size=block_size, block_dim=block_dim,
            leading_dimension=leading_dimension, transpose_mode=transpose_mode,
            arrangement=arrangement, alignment=alignment, function=function,
            static_block_dim=static_block_dim, execution=execution, with_pipeline=with_pipeline,
            enable_input_streaming=enable_input_streaming)
        from ._options import require_numba

        require_numba()
        self._spec = spec
        self._traits = _derived(spec) or _resolve(spec)
        t = self._traits
        self._resolved = spec.with_(block_dim=tuple(t["block_dim"]),
                                    leading_dimension=LeadingDimension(*t["leading_dimension"]))
        self._layouts = None
        register_kernel_type(Matmul)

    # ----- knobs ------------------------------------------------------------------------------
    @property
    def files(self) -> list:
        """Files to pass to ``cuda.jit(link=...)``: none (the functions link their code
        themselves; nvmath-python's kernels pass ``link=MM.files``)."""
        return []

    @property
    def size(self) -> tuple:
        """The problem size ``(m, n, k)``."""
        return self._spec.size

    @property
    def precision(self) -> Precision:
        """The precisions of A, B and C (NumPy types)."""
        return Precision(*(np.dtype(p).type for p in self._spec.precision))

    @property
    def data_type(self) -> str:
        """``'real'`` or ``'complex'``."""
        return self._spec.data_type

    @property
    def execution(self) -> str:
        """``'Block'``: the GEMM is computed by one thread block."""
        return self._spec.execution

    @property
    def function(self) -> str:
        """``'MM'``: matrix multiplication."""
        return self._spec.function

    @property
    def sm(self) -> ComputeCapability:
        """The target architecture the code is generated for."""
        return ComputeCapability(self._spec.sm // 100, (self._spec.sm // 10) % 10)

    @property
    def arrangement(self) -> Arrangement | None:
        """Row- or column-major order of A, B and C in shared memory (``None`` when
        ``transpose_mode`` was given)."""
        return self._spec.arrangement

    @property
    def transpose_mode(self) -> TransposeMode | None:
        """The deprecated ``transpose_mode`` given, else ``None`` (warns ``DeprecationWarning``)."""
        warnings.warn("transpose_mode is deprecated; use arrangement instead",
                      DeprecationWarning, stacklevel=2)
        return self._spec.transpose_mode

    @property
    def alignment(self) -> Alignment:
        """Byte alignment of A, B and C in shared memory."""
        return Alignment(*self._traits["alignment"])

    @property
    def static_block_dim(self) -> bool:
        """Whether the kernel is launched with exactly ``block_dim`` (lets cuBLASDx
        specialize the code)."""
        return self._spec.static_block_dim

    @property
    def with_pipeline(self) -> bool:
        """Whether the GEMM runs through cuBLASDx pipelines (:meth:`suggest_device_pipeline`)."""
        return self._spec.with_pipeline

    @property
    def enable_input_streaming(self) -> bool:
        """Whether cuBLASDx's input streaming is on (pipelined GEMMs)."""
        return self._spec.enable_input_streaming

    def suggest_device_pipeline(self, pipeline_depth, a, b):
        """A pipeline streaming tiles of device arrays through shared memory.

        Needs ``with_pipeline=True``; pass the result to a kernel compiled with
        ``extensions=cuweave.device.cublasdx_numba.pipeline_extensions``.

        Parameters
        ----------
        pipeline_depth : int
            Shared-memory stages (0: the deepest that fits).
        a, b : device arrays
            A (m x k, or m x k x batch) and B (k x n, or k x n x batch).

        Returns
        -------
        cuweave.device.DevicePipeline
        """
        from ._blas_pipeline import DevicePipeline

        try:
            from . import cublasdx_numba  # noqa: F401 - types the pipeline in kernels
        except ImportError:  # pragma: no cover - Matmul already needs numba
            pass
        return DevicePipeline(self, pipeline_depth, a, b)

    # ----- traits -----------------------------------------------------------------------------
    @property
    def block_dim(self) -> Dim3:
        """The block dimension to launch the kernel with."""
        return Dim3(*self._traits["block_dim"])

    @property
    def block_size(self) -> int:
        """Threads in the block (the product of ``block_dim``)."""
        x, y, z = self.block_dim
        return x * y * z

    @property
    def max_threads_per_block(self) -> int:
        """The most threads per block the generated code allows."""
        return int(self._traits["max_threads_per_block"])

    @property
    def leading_dimension(self) -> LeadingDimension:
        """Leading dimensions of A, B and C in shared memory."""
        return LeadingDimension(*self._traits["leading_dimension"])

    def _value_type(self, i):
        name = self._traits["value_types"][i]
        if self._spec.is_complex and name == "float16":
            from .types import complex32  # float16x2 in kernels (imports numba when present)

            return complex32
        if self._spec.is_complex:
            return {"float32": np.complex64, "float64": np.complex128}[name]
        return np.dtype(name).type

    a_value_type = property(lambda self: self._value_type(0), doc="NumPy type of A's elements.")
    b_value_type = property(lambda self: self._value_type(1), doc="NumPy type of B's elements.")
    c_value_type = property(lambda self: self._value_type(2), doc="NumPy type of C's elements.")

    @property
    def value_type(self):
        """The common element type when A, B and C share one (else AttributeError)."""
        types = {self._value_type(i) for i in range(3)}
        if len(types) != 1:
            raise AttributeError("value_type is defined only when A, B and C share a precision; "
                                 "use a_value_type/b_value_type/c_value_type")
        return types.pop()

    a_dim = property(lambda self: self._spec.a_dim, doc="Shape of A (rows, columns).")
    b_dim = property(lambda self: self._spec.b_dim, doc="Shape of B (rows, columns).")
    c_dim = property(lambda self: self._spec.c_dim, doc="Shape of C (rows, columns).")

    def _orders(self):
        if self._spec.arrangement is not None:
            return tuple(self._traits["arrangement"])
        return ("col_major",) * 3

    def _sizes(self, ld) -> tuple:
        dims = (self.a_dim, self.b_dim, self.c_dim)
        return tuple(x * (d[1] if o == "col_major" else d[0])
                     for x, d, o in zip(ld, dims, self._orders()))

    a_size = property(lambda self: self._sizes(self.leading_dimension)[0],
                      doc="Elements of A in shared memory (with its leading dimension).")
    b_size = property(lambda self: self._sizes(self.leading_dimension)[1],
                      doc="Elements of B in shared memory.")
    c_size = property(lambda self: self._sizes(self.leading_dimension)[2],
                      doc="Elements of C in shared memory.")

    def _storage(self, args, n: int, what: str) -> int:
        if not args:
            sizes = self._sizes(self.leading_dimension)[:n]
        elif len(args) == n and all(isinstance(a, (int, np.integer)) for a in args):
            sizes = self._sizes(tuple(args) + (0,) * (3 - n))[:n]
        elif len(args) == n and all(isinstance(a, Layout) for a in args):
            sizes = tuple(a.cosize for a in args)
        else:
            raise InvalidOptionError(f"{what} takes no arguments or {n} leading dimensions or "
                                     f"{n} Layouts, got {args!r}")
        calc = SharedStorageCalc()
        for i, size in enumerate(sizes):
            item = np.dtype(self._value_type(i)).itemsize
            calc.add(self.alignment[i], item, size)
        return calc.get()

    def get_shared_storage_size(self, *args) -> int:
        """Shared-memory bytes for A, B and C, each aligned.

        Parameters
        ----------
        *args
            Nothing (the leading dimensions of the object), ``lda, ldb, ldc`` or three
            :class:`Layout` objects.

        Returns
        -------
        int
        """
        return self._storage(args, 3, "get_shared_storage_size")

    def get_shared_storage_size_ab(self, *args) -> int:
        """Shared-memory bytes for A and B only, each aligned.

        Parameters
        ----------
        *args
            Nothing (the leading dimensions of the object), ``lda, ldb`` or two
            :class:`Layout` objects.

        Returns
        -------
        int
        """
        return self._storage(args, 2, "get_shared_storage_size_ab")

    @property
    def shared_memory_size(self) -> int:
        """``get_shared_storage_size()`` (nvmath-python's earlier name)."""
        return self.get_shared_storage_size()

    def valid(self, *knobs):
        """Valid values of knobs, as an iterator of tuples (one value per knob).

        Parameters
        ----------
        *knobs : str
            ``'block_dim'`` (the only knob asked of a GEMM: cuBLASDx's suggestion).
        """
        import itertools

        if not knobs or any(k != "block_dim" for k in knobs):
            raise InvalidOptionError(f"knobs must be 'block_dim', got {knobs!r}")
        suggested = _resolve(self._spec)["suggested_block_dim"]  # libmathdx's (cached)
        return itertools.product(*[[Dim3(*suggested)] for _ in knobs])

    # ----- layouts (tensor API) ---------------------------------------------------------------
    def _layout_traits(self) -> dict:
        if self._layouts is None:
            from . import _blas_mathdx

            def build(key):
                kinds = {m: (getattr(_blas_mathdx.TensorKind, k), None)
                         for m, (k, _, s) in _LAYOUTS.items() if s != "gmem"}
                info = _blas_mathdx.tensor_traits(self._resolved, self._resolved.block_dim,
                                                  kinds)
                return {"traits": info, "symbol": None, "ltoir": None}

            self._layouts = _cache.cached([list(self._resolved.key()), "layouts", _versions()],
                                   build)["traits"]
        return self._layouts

    def _layout(method):  # noqa: N805 - method factory used in the class body only
        gmem = _LAYOUTS[method][2] == "gmem"

        if gmem:
            def get(self, leading_dimension=None):
                return Layout(self, method, leading_dimension)
            doc = (f"The :class:`Layout` of cuBLASDx's ``{method}()``.\n\n"
                   "Parameters\n----------\nleading_dimension : int, optional\n"
                   "    The leading dimension of the array in global memory (default: the "
                   "operand's).\n")
        else:
            def get(self):
                return Layout(self, method)
            doc = f"The :class:`Layout` of cuBLASDx's ``{method}()``."
        get.__name__ = method
        get.__doc__ = doc
        return get

    for _m in _LAYOUTS:
        locals()[_m] = _layout(_m)
    del _m, _layout

    # ----- inside kernels ---------------------------------------------------------------------
    def _kernel_key(self) -> tuple:
        return self._resolved.key()

    def _kernel_attribute(self, name: str):
        if name in _KERNEL_ATTRIBUTES:
            return getattr(self, name)
        from . import _blas_numba

        if name in ("execute", "__call__"):  # MM(...) is nvmath-python's earlier spelling
            return _blas_numba.execute_function(self)
        if name in _LAYOUTS:
            return _blas_numba.layout_function(self, name)
        if name in ("suggest_accumulator", "get_accumulator") and self.with_pipeline:
            from . import cublasdx_numba

            return cublasdx_numba.accumulator_function(self, name == "suggest_accumulator")
        if name in ("suggest_accumulator", "get_accumulator"):
            from . import _blas_fragments

            return _blas_fragments.accumulator_function(self, name == "suggest_accumulator")
        raise AttributeError(name)

    def suggest_accumulator(self):
        """Inside kernels: a register accumulator in cuBLASDx's suggested partition (cleared);
        ``MM.execute(smem_a, smem_b, acc)`` adds ``A B`` to it."""
        raise RuntimeError("suggest_accumulator is a device function: call it inside a "
                           "@cuda.jit kernel")

    def get_accumulator(self):
        """Inside kernels: a register accumulator in the default partition (cleared)."""
        raise RuntimeError("get_accumulator is a device function: call it inside a @cuda.jit "
                           "kernel")

    def execute(self, *args):
        """Compute the GEMM; only callable inside a numba kernel (see the class notes).

        Parameters
        ----------
        *args
            ``alpha, smem_a, smem_b, beta, smem_c`` (the pointer API), ``alpha, a, lda, b,
            ldb, beta, c, ldc`` (leading dimensions chosen at run time), or
            ``smem_a, smem_b, rmem_c`` on opaque tensors (accumulating into a register
            fragment or accumulator).
        """
        raise RuntimeError("Matmul.execute is a device function: call it inside a @cuda.jit "
                           "kernel")

    def __repr__(self):
        s = self._spec
        return (f"Matmul(size={s.size}, precision={tuple(s.precision)}, "
                f"data_type={s.data_type!r}, sm={s.sm // 10}, block_dim={tuple(self.block_dim)}, "
                f"leading_dimension={tuple(self.leading_dimension)})")


_EXECUTE_APIS = (None, "static_leading_dimensions", "dynamic_leading_dimensions", "tensors")


def matmul(size, precision, data_type="real", *, compiler=None, code_type=None,
           execute_api=None, tensor_types=None, global_memory_alignment=None,
           **knobs) -> Matmul:
    """nvmath-python's earlier factory: a :class:`Matmul` (``compiler='numba'`` only).

    Parameters
    ----------
    size, precision, data_type
        As :class:`Matmul`'s.
    compiler : {'numba', None}
        The only compiler.
    code_type : object with ``cc``, or an SM value, optional
        Sets ``sm`` when ``sm`` is not given.
    execute_api : {'static_leading_dimensions', 'dynamic_leading_dimensions', 'tensors'}, optional
        Validated, otherwise unused: the form of ``MM.execute(...)`` follows its arguments.
    tensor_types : three str, optional
        Validated (``'suggested_smem_a'``, ``'smem_b'``, ``'rmem_c'``, ...), otherwise unused.
    global_memory_alignment : three powers of two, optional
        Byte alignments; validated, otherwise unused (copies take their alignment as
        ``copy(src, dst, alignment=...)``).
    **knobs
        :class:`Matmul`'s keyword arguments (``block_size``, ``arrangement``, ``sm``, ...).

    Returns
    -------
    Matmul
    """
    if compiler not in (None, "numba"):
        raise InvalidOptionError(f"compiler must be 'numba' or None, got {compiler!r}")
    if execute_api not in _EXECUTE_APIS:
        raise InvalidOptionError(f"execute_api must be one of {_EXECUTE_APIS[1:]} or None, "
                                 f"got {execute_api!r}")
    if global_memory_alignment is not None and (
            isinstance(global_memory_alignment, str) or
            not isinstance(global_memory_alignment, tuple | list) or
            len(global_memory_alignment) != 3 or
            any(isinstance(a, bool) or not isinstance(a, int | np.integer) or a <= 0 or a & (a - 1)
                for a in global_memory_alignment)):
        raise InvalidOptionError(f"global_memory_alignment must be three powers of two (bytes), "
                                 f"got {global_memory_alignment!r}")
    if tensor_types is not None:
        allowed = {"suggested_smem_a", "suggested_smem_b", "suggested_smem_c",
                   "suggested_rmem_c", "smem_a", "smem_b", "smem_c", "rmem_c"}
        if isinstance(tensor_types, str) or len(tensor_types) != 3 or \
                any(t not in allowed for t in tensor_types):
            raise InvalidOptionError(f"tensor_types must be 3 of {sorted(allowed)}, "
                                     f"got {tensor_types!r}")
    if code_type is not None and knobs.get("sm") is None:
        knobs["sm"] = getattr(code_type, "cc", code_type)
    return Matmul(size, precision, data_type, **knobs)


def _compile_worker(knobs: dict) -> str | None:
    """Process-pool worker: traits and the pointer execute of one configuration, into the disk
    cache; returns an error text or None (the parent raises it, typed, when it builds)."""
    try:
        mm = Matmul(**knobs)
        from . import _blas_numba

        _blas_numba._execute_code(mm)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def warm_matmul_cache(configs, max_workers=None) -> list[Matmul]:
    """Build several :class:`Matmul` objects at once (see :func:`cuweave.device.warm_cache`).

    Traits and the shared-memory ``execute`` of every configuration are generated in worker
    processes first, into the disk cache; every configuration is validated before anything
    compiles.

    Parameters
    ----------
    configs : iterable of dict
        :class:`Matmul`'s keyword arguments, one dict per object (``sm`` defaults to the
        current device's).
    max_workers : int, optional
        Worker processes (default: one per core).

    Returns
    -------
    list of Matmul
        The objects, in the order of ``configs``.
    """
    configs = with_sm(configs)
    for kw in configs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            MatmulSpec.from_knobs(**kw)  # validate everything before compiling anything
    generate_in_processes(_compile_worker, configs, max_workers, "device GEMM")
    return [Matmul(**kw) for kw in configs]


_TENSOR_FUNCTIONS = ("make_tensor", "make_fragment_like", "copy", "copy_fragment", "clear",
                     "axpby", "copy_wait", "OpaqueTensorType", "AccumulatorType")


def __getattr__(name):
    """The opaque-tensor functions live with numba (``_blas_numba``); imported on first use."""
    if name in _TENSOR_FUNCTIONS:
        from . import _blas_fragments, _blas_numba

        module = _blas_fragments if hasattr(_blas_fragments, name) else _blas_numba
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
