"""The dense direct solver (being written: the next commit adds it)."""

__all__ = ["DirectSolver", "direct_solver"]


def direct_solver(*args, **kwargs):
    raise NotImplementedError("cuweave.linalg.direct_solver is not available in this build")


class DirectSolver:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("cuweave.linalg.DirectSolver is not available in this build")
