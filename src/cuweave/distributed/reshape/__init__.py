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
    """Stateful box-to-box reshape (see :class:`~cuweave.distributed.distribution.Redistribute`).

    Parameters
    ----------
    operand : array
        This process's local array.
    input_box, output_box : Box or (lower, upper)
        This process's box of the global array before and after.
    options : ReshapeOptions or dict, optional
        See :class:`~cuweave.distributed.distribution.RedistributeOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.
    """

    def __init__(self, operand, /, input_box, output_box, *, options=None, stream=None):
        super().__init__(operand, input_box, output_box, options=options, stream=stream)


def reshape(operand, /, input_box, output_box, *, sync_symmetric_memory=True, options=None,
            stream=None):
    """Move this process's ``input_box`` of the global array to its ``output_box`` (collective).

    Parameters
    ----------
    operand : array
        This process's local array.
    input_box, output_box : Box or (lower, upper)
        This process's box of the global array before and after.
    sync_symmetric_memory : bool
        Accepted for compatibility.
    options : ReshapeOptions or dict, optional
        See :class:`~cuweave.distributed.distribution.RedistributeOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array
        This process's new local array.

    Examples
    --------
    >>> # mpiexec -n 2: columns -> rows of a 4 x 4 matrix  # doctest: +SKIP
    >>> b = reshape(a, [(0, 0), (4, 2)], [(0, 0), (2, 4)])  # doctest: +SKIP
    """
    return redistribute(operand, input_box, output_box,
                        sync_symmetric_memory=sync_symmetric_memory, options=options,
                        stream=stream)
