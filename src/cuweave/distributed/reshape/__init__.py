"""nvmath-python 0.x's distributed reshape, kept so older programs run: boxes in, boxes out.

``reshape(operand, input_box, output_box)`` is
:func:`cuweave.distributed.distribution.redistribute` with ``Box`` distributions; a box is a
``(lower, upper)`` pair or a :class:`~cuweave.distributed.distribution.Box`.
"""

from __future__ import annotations

from ..distribution._redistribute import Redistribute, RedistributeOptions, redistribute

__all__ = ["Reshape", "ReshapeOptions", "reshape"]

ReshapeOptions = RedistributeOptions


class Reshape(Redistribute):
    """Stateful box-to-box reshape (see :class:`~cuweave.distributed.distribution.Redistribute`)."""

    def __init__(self, operand, /, input_box, output_box, *, options=None, stream=None):
        super().__init__(operand, input_box, output_box, options=options, stream=stream)


def reshape(operand, /, input_box, output_box, *, sync_symmetric_memory=True, options=None,
            stream=None):
    """Move this process's ``input_box`` of the global array to its ``output_box`` (collective).

    Examples
    --------
    >>> # mpiexec -n 2: columns -> rows of a 4 x 4 matrix  # doctest: +SKIP
    >>> b = reshape(a, [(0, 0), (4, 2)], [(0, 0), (2, 4)])  # doctest: +SKIP
    """
    return redistribute(operand, input_box, output_box,
                        sync_symmetric_memory=sync_symmetric_memory, options=options,
                        stream=stream)
