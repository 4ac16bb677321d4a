"""Command line: ``python -m cuweave demo | info | bench [...]``."""

from __future__ import annotations

import argparse
import json
import sys

_DESCRIPTION = """\
cuweave's command line.

  python -m cuweave info     what cuweave found: GPUs, driver, CUDA libraries, the CPU's
                             BLAS and FFT libraries and their threads, execution spaces
  python -m cuweave demo     a matmul and an FFT end to end (on the CPU without a GPU)
  python -m cuweave bench    the benchmarks (from a source checkout)

Each command has its own --help."""


def _info(args) -> int:
    from ._info import collect, format_info

    d = collect()
    print(json.dumps(d, indent=2) if args.json else format_info(d))
    return 0


def _demo(rest) -> int:
    from . import _demo

    return _demo.main(rest)


def _bench(rest) -> int:
    import os
    import runpy

    here = os.path.dirname(os.path.abspath(__file__))
    runner = os.path.join(here, "..", "..", "benchmarks", "run.py")
    if not os.path.exists(runner):
        print("cuweave bench needs a source checkout (benchmarks/run.py was not found)",
              file=sys.stderr)
        return 2
    sys.argv = [runner, *rest]
    runpy.run_path(runner, run_name="__main__")
    return 0


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m cuweave", description=_DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    pi = sub.add_parser("info", help="GPUs, driver, libraries, the CPU's BLAS and FFT, "
                        "usable execution spaces")
    pi.add_argument("--json", action="store_true", help="print JSON")
    pi.set_defaults(fn=_info)
    pd = sub.add_parser("demo", help="run the end-to-end demo (on the CPU without a GPU)")
    pd.add_argument("options", nargs="*", help="see `python -m cuweave demo --help`")
    pb = sub.add_parser("bench", help="run the benchmarks (source checkout)")
    pb.add_argument("options", nargs="*", help="see `python -m cuweave bench --help`")
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("demo", "bench"):  # their own parsers take the remaining options
        return (_demo if argv[0] == "demo" else _bench)(argv[1:])
    args = p.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
