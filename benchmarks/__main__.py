"""``python -m benchmarks``: every benchmark in one run, each printing its table.

Benchmarks layer. Runs ``bench_dispatch`` (interpreter dispatch costs), ``bench_models``
(the models side by side with their peers), ``bench_memory`` (memory planning) and
``bench_wild`` (real architectures against onnxruntime, when torch and transformers are
installed: ``pip install -e '.[models]'``); each judges the speed targets of issues 4 and
15 that its rows measure. Options::

    python -m benchmarks [--quick] [--models mlp,lstm] [--only dispatch,models,memory]
                         [--no-fresh]

``--quick`` is passed to every benchmark; ``--models`` to ``bench_models``; ``--no-fresh``
(no cold starts in fresh processes) to ``bench_models`` and ``bench_wild``.
The exit status is non-zero if any benchmark failed (for example an output mismatch).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
import traceback

BENCHMARKS = ("dispatch", "models", "memory", "wild")


def _module_for(name: str):
    """The benchmark module ``benchmarks.bench_<name>``, or ``None`` if it does not exist."""
    qualified = f"benchmarks.bench_{name}"
    if importlib.util.find_spec(qualified) is None:
        return None
    return importlib.import_module(qualified)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds")
    parser.add_argument("--models", help="bench_models: comma-separated subset of the models")
    parser.add_argument("--no-fresh", action="store_true", help="no cold starts (models, wild)")
    parser.add_argument(
        "--only", help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all)"
    )
    args = parser.parse_args(argv)
    selected = list(BENCHMARKS)
    if args.only:
        selected = [part.strip() for part in args.only.split(",") if part.strip()]
        unknown = [name for name in selected if name not in BENCHMARKS]
        if unknown:
            parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {BENCHMARKS}")
    status = 0
    for name in selected:
        module = _module_for(name)
        if module is None:
            print(f"== bench_{name}: not present in this checkout, skipped\n")
            continue
        sub_argv = ["--quick"] if args.quick else []
        if name == "models":
            sub_argv += ["--models", args.models] if args.models else []
        if name in ("models", "wild"):
            sub_argv += ["--no-fresh"] if args.no_fresh else []
        print(f"== bench_{name} {' '.join(sub_argv)}".rstrip())
        t0 = time.perf_counter()
        try:
            code = module.main(sub_argv)
        except Exception:
            # One broken benchmark must not hide the others' tables.
            traceback.print_exc()
            code = 1
        print(f"== bench_{name} done in {time.perf_counter() - t0:.1f} s, exit status {code}\n")
        status = status or (code or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
