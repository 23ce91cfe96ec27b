"""``python -m vm``: load a saved executable and run it, like ``tvmc run``.

Runtime layer (``vm``); never imports ``compiler``, so it runs on a machine that only
has the runtime installed.

Usage::

    python -m vm run model.relayvm --inputs x.npz --outputs y.npz --print-time
    python -m vm info model.relayvm            # globals, primitives, stats
    python -m vm bytecode model.relayvm        # the disassembly

Exit codes follow tvmc: 0 success, 2 usage error (argparse), 4 a known error (bad
file, bad inputs, a trap while running).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

EXIT_ERROR = 4


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vm", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="load an executable and invoke a function")
    run.add_argument("path", help="the saved executable (from exe.save(path))")
    run.add_argument("--function", default="main", help="the function to invoke (default main)")
    run.add_argument("-i", "--inputs", help=".npz file whose keys are parameter names")
    run.add_argument("-o", "--outputs", help="save outputs to this .npz as output_0, output_1...")
    run.add_argument(
        "--fill-mode",
        choices=("zeros", "ones", "random"),
        default="random",
        help="how to make inputs that --inputs does not give (default random)",
    )
    run.add_argument("--print-time", action="store_true", help="print time_evaluator's summary")
    run.add_argument("--print-top", type=int, metavar="N", help="print the top N of output 0")
    run.add_argument("--profile", action="store_true", help="print the per-kernel profile")
    run.add_argument("--repeat", type=int, default=1, help="timing rounds (default 1)")
    run.add_argument("--number", type=int, default=1, help="calls per round (default 1)")
    run.add_argument("--seed", type=int, default=0, help="seed for --fill-mode random")

    for name, text in (("info", "print the executable's statistics"),
                       ("bytecode", "print the executable's bytecode")):  # fmt: skip
        p = sub.add_parser(name, help=text)
        p.add_argument("path")
    return parser


def make_input(spec: tuple, fill_mode: str, rng: np.random.Generator, name: str) -> object:
    """An input value of type ``spec`` (a vm.program type spec), filled as asked."""
    kind = spec[0]
    if kind == "tuple":
        return tuple(make_input(s, fill_mode, rng, f"{name}.{i}") for i, s in enumerate(spec[1]))
    if kind != "tensor":
        raise ValueError(
            f"input {name} has type {kind}; only tensors and tuples can be generated, "
            "pass it with --inputs"
        )
    dims, dtype = spec[1], np.dtype(spec[2])
    if any(d < 0 for d in dims):
        raise ValueError(f"input {name} has a dynamic shape {dims}; pass it with --inputs")
    shape = tuple(dims)
    if fill_mode == "zeros":
        return np.zeros(shape, dtype)
    if fill_mode == "ones":
        return np.ones(shape, dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, dtype=dtype)
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)


def _flatten(value: object) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            out.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        else:
            raise ValueError(f"cannot save a {type(item).__name__} output to .npz")
    return out


def _run(args: argparse.Namespace) -> int:
    import vm

    if args.repeat < 1 or args.number < 1:
        raise ValueError("--repeat and --number must be at least 1")
    t0 = time.perf_counter()
    exe = vm.Executable.load_exec(args.path)
    machine = vm.VirtualMachine(exe, vm.cpu())
    t_load = time.perf_counter() - t0
    func = exe.functions[exe.function_index(args.function)]
    given: dict[str, np.ndarray] = {}
    if args.inputs:
        with np.load(args.inputs) as data:
            given = {k: data[k] for k in data.files}
        unknown = sorted(set(given) - set(func.params))
        if unknown:
            raise ValueError(
                f"the input tensor(s) {', '.join(unknown)} are not parameters of "
                f"{args.function}; expected inputs: {list(func.params)}"
            )
    rng = np.random.default_rng(args.seed)
    inputs = [
        given[name] if name in given else make_input(spec, args.fill_mode, rng, name)
        for name, spec in zip(func.params, func.param_types)
    ]
    t1 = time.perf_counter()
    result = machine.invoke(args.function, *inputs)
    t_first = time.perf_counter() - t1
    print(f"loaded {args.path} in {t_load * 1e3:.1f} ms; first call {t_first * 1e3:.1f} ms")
    if args.outputs:
        arrays = _flatten(result)
        np.savez(args.outputs, **{f"output_{i}": a for i, a in enumerate(arrays)})
    if args.print_top:
        flat = np.asarray(_flatten(result)[0]).ravel()
        top = np.argsort(flat)[::-1][: args.print_top]
        print(np.vstack([top, flat[top]]))
    if args.profile:
        print(machine.profile(args.function, *inputs).table())
    if args.print_time:
        machine.set_input(args.function, *inputs)
        timer = machine.time_evaluator("invoke_stateful", number=args.number, repeat=args.repeat)
        print(timer(args.function))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        import vm

        exe = vm.Executable.load_exec(args.path)
        print(exe.stats if args.command == "info" else exe.bytecode)
        return 0
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        # Known failures get one clear line, not a traceback (tvmc's convention).
        print(f"Error: {err}", file=sys.stderr)
        return EXIT_ERROR
