"""The JAX adapter: JAX arrays in through DLPack, results back as JAX arrays.

JAX arrays are immutable, so the adapter differs from the others in two ways the engines see
through the :class:`~cuweave._internal.packages.Adapter` protocol only:

- :attr:`JaxAdapter.writable` is false: a JAX array is never an in-place target (``c`` of an
  in-place matmul, the operand of an in-place FFT); the engines refuse it before any work.
- results are made where cuweave can write them (a NumPy array on the host, a
  :class:`~cuweave._internal.arrays.DeviceArray` on a GPU) and :meth:`JaxAdapter.deliver`
  turns them into JAX arrays once the run's work is queued (host: ``jax.device_put`` on the
  CPU device; GPU: ``jax.dlpack.from_dlpack``, zero-copy, ordered after the run's stream by
  the DeviceArray's DLPack export; GPU JAX has not been run yet: no CUDA JAX on the GPU
  machine).

Operands are read through their DLPack export (``__dlpack__``; zero-copy on the CPU and on
GPUs): pointer, shape, strides, dtype (bfloat16 and fp8 included). Tracers (inside
``jax.jit``, ``grad``, ``vmap``) and arrays sharded over several devices are refused with a
typed error. Nothing here imports JAX: the module is taken from ``sys.modules`` (an array of
it exists, so it is imported). JAX has no current stream of its own that cuweave could
query, so runs on JAX device arrays use the stream given (else the legacy default stream), as
for other DLPack producers.

Examples
--------
>>> from cuweave._internal.packages import adapter
>>> adapter("jax").name, adapter("jax").writable
('jax', False)
"""

from __future__ import annotations

import sys

from . import dlpack as _dl
from .adapters import Adapter
from .arrays import Operand
from .errors import InvalidOperandError
from .registry import ADAPTERS, BY_MODULE

__all__ = ["JaxAdapter", "JAX"]


def _jax():
    return sys.modules["jax"]


class JaxAdapter(Adapter):
    """JAX arrays (``jax.Array``) on the CPU or one CUDA device (module docstring)."""

    name = "jax"
    writable = False

    def wrap(self, x, name: str) -> Operand:
        jax = _jax()
        if isinstance(x, jax.core.Tracer):
            raise InvalidOperandError(
                f"{name} must be a concrete JAX array, got a tracer ({type(x).__name__}): "
                "cuweave runs outside jax.jit/grad/vmap tracing; call it on concrete arrays")
        if not isinstance(x, jax.Array):
            raise InvalidOperandError(f"{name} must be a JAX array, got {type(x).__name__!r}")
        if x.is_deleted():
            raise InvalidOperandError(f"{name} must be a live JAX array, got a deleted one "
                                      "(donated or deleted buffers cannot be read)")
        devices = x.devices()
        if len(devices) != 1:
            raise InvalidOperandError(
                f"{name} must live on one device, got a JAX array sharded over {len(devices)}"
                " devices; gather it first (jax.device_put(x, device))")
        dev_type, dev_id = x.__dlpack_device__()
        if int(dev_type) == _dl.KDL_CPU:
            x.block_until_ready()  # JAX dispatches asynchronously: its values must be there
            v = _dl.import_dlpack(x, name)
            return Operand(x, "jax", v.ptr, v.shape, v.strides, v.dtype, "cpu", None,
                           keepalive=v.capsule)
        if int(dev_type) not in (_dl.KDL_CUDA, _dl.KDL_CUDA_MANAGED):
            raise InvalidOperandError(f"{name} must live on the CPU or a CUDA device, got the "
                                      f"JAX device {next(iter(devices))}")
        v = _dl.import_dlpack(x, name)
        return Operand(x, "jax", v.ptr, v.shape, v.strides, v.dtype, "cuda", int(dev_id),
                       keepalive=v.capsule)

    def host_array(self, op: Operand):
        """A read-only NumPy view of a host JAX operand (JAX arrays are immutable)."""
        view = op.memory_view()
        view.flags.writeable = False
        return view

    def deliver(self, obj):
        """The JAX array of a result cuweave wrote (``obj``: a NumPy array or scalar on the
        host, a DLPack-exporting device array), or ``obj`` itself when it is one already."""
        jax = _jax()
        if obj is None or isinstance(obj, jax.Array):
            return obj
        if hasattr(obj, "__cuda_array_interface__") or (
                hasattr(obj, "__dlpack_device__") and int(obj.__dlpack_device__()[0]) != 1):
            return jax.dlpack.from_dlpack(obj)  # zero-copy; waits for the run's stream
        return jax.device_put(obj, jax.devices("cpu")[0])

    def from_numpy(self, arr):
        return self.deliver(arr)


JAX = JaxAdapter()
# registered here, where the class is defined (``packages`` imports this module at its end)
ADAPTERS["jax"] = JAX
for _module in ("jax", "jaxlib"):  # jaxlib._jax.ArrayImpl; tracers live in jax._src
    BY_MODULE[_module] = JAX
