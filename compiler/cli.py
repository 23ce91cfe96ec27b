"""``relayvm``: the command line, modelled on ``tvmc`` (compile, run, info, bytecode, bench).

Compiler layer. ``compile`` and ``bench`` of a model need the compiler and live here;
``run``, ``info`` and ``bytecode`` are :mod:`vm.cli`'s, which this module hands the
arguments to unchanged, so they work the same as ``python -m vm``.

Usage::

    relayvm compile model.onnx -o model.relayvm --input-shapes "x:[1,3,224,224]"
    relayvm compile model.relay -o model.relayvm --opt-level 3 --executor vm
    relayvm compile model.onnx -o model.tar --export-format mlf
    relayvm run model.relayvm --inputs in.npz --outputs out.npz --print-time
    relayvm run model.relayvm --profile --trace trace.json --plot profile.png
    relayvm bench model.onnx --repeat 5 --number 10     # side by side with onnxruntime
    relayvm info model.relayvm

A failure is reported as one line naming the file and the problem.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import vm
from compiler import relay
from compiler.frontend.onnx import from_onnx
from compiler.text.errors import RelaySyntaxError
from compiler.text.parser import fromtext
from compiler.transform import PassContext
from serialization import export_model_library_format
from vm import cli as vm_cli
from vm.cli import EXIT_ERROR, EXIT_INTERNAL, EXIT_INTERRUPTED, CLIError
from vm.profiling import _matplotlib_figure

#: Model file suffixes ``relayvm compile`` reads, and what each is.
MODEL_KINDS = {
    ".onnx": "onnx",
    ".relay": "relay",
    ".rly": "relay",
    ".pt": "pytorch",
    ".pth": "pytorch",
}

_EPILOG = f"""\
exit status:
  0    success
  {EXIT_INTERNAL}    internal error (a bug in relayvm; the line names the exception)
  2    usage error (bad or missing arguments)
  {EXIT_ERROR}    a file that cannot be used (missing, malformed, an unsupported model or
       operator), inputs that do not fit, or a trap while running
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {vm_cli.EXIT_BROKEN_PIPE}  stdout closed before the output was written (as by | head)

run, info and bytecode take an executable written with --executor vm or aot (the
default); a --executor graph file loads with vm.graph_executor.load_module.
"""

_VM_COMMANDS = ("run", "info", "bytecode")


def parse_input_shapes(text: str) -> dict[str, list[int]]:
    """``--input-shapes`` as a dict: ``"x:[1,3,224,224] y:[4]"`` (space or comma separated).

    Raises
    ------
    CLIError
        Naming the part that is not ``name:[d0,d1,...]``.
    """
    shapes: dict[str, list[int]] = {}
    rest = text.strip()
    pattern = re.compile(r"\s*([^\s:,\[\]]+)\s*:\s*\[([^\]]*)\]\s*,?")
    while rest:
        match = pattern.match(rest)
        if match is None:
            raise CLIError(
                f"--input-shapes: cannot read {rest!r}; expected name:[d0,d1,...] "
                "such as x:[1,3,224,224]"
            )
        name, dims = match.group(1), match.group(2).strip()
        try:
            shape = [int(d) for d in dims.split(",")] if dims else []
        except ValueError:
            raise CLIError(
                f"--input-shapes: the dimensions of {name} must be integers, got [{dims}]"
            ) from None
        if any(d < -1 for d in shape):
            raise CLIError(f"--input-shapes: {name} has a negative dimension in {shape}")
        shapes[name] = shape
        rest = rest[match.end() :].strip()
    return shapes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relayvm",
        description=__doc__.split("\n\n")[0],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    formatter = argparse.RawDescriptionHelpFormatter

    comp = sub.add_parser(
        "compile", help="compile a model to an executable", epilog=_EPILOG,
        formatter_class=formatter,
    )  # fmt: skip
    comp.add_argument("model", help="model.onnx, model.relay (Relay text) or traced.pt")
    comp.add_argument("-o", "--output", required=True, help="the file to write")
    comp.add_argument("--input-shapes", help='shapes of the inputs: "name:[1,3,224,224] ..."')
    comp.add_argument("--opt-level", type=int, default=3, choices=range(4), help="default 3")
    comp.add_argument("--executor", choices=("vm", "graph", "aot"), default="vm")
    comp.add_argument("--export-format", choices=("relayvm", "mlf"), default="relayvm")
    vm_cli.add_quiet_flag(comp)

    bench = sub.add_parser(
        "bench", help="time a model (and onnxruntime beside it for ONNX)", epilog=_EPILOG,
        formatter_class=formatter,
    )  # fmt: skip
    bench.add_argument("model", help="model.onnx, model.relay, or a compiled executable")
    bench.add_argument("--input-shapes", help='shapes of the inputs: "name:[1,3,224,224] ..."')
    bench.add_argument("--opt-level", type=int, default=3, choices=range(4))
    bench.add_argument("--inputs", help=".npz of inputs by parameter name (default random)")
    bench.add_argument("--repeat", type=int, default=5, help="timing rounds (default 5)")
    bench.add_argument("--number", type=int, default=10, help="calls per round (default 10)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--plot", metavar="PNG", help="draw the table as a bar chart (matplotlib)")
    vm_cli.add_quiet_flag(bench)

    for name in _VM_COMMANDS:
        sub.add_parser(name, help=f"as python -m vm {name} (see relayvm {name} --help)")
    return parser


# ---- loading models ---------------------------------------------------------------------


def model_kind(path: str) -> str:
    """``"onnx"``, ``"relay"``, ``"pytorch"`` or ``"executable"`` by ``path``'s suffix/magic."""
    kind = MODEL_KINDS.get(Path(path).suffix.lower())
    if kind is not None:
        return kind
    vm_cli.regular_file_size(path, "model")
    return "executable"


def load_model(path: str, shapes: dict[str, list[int]] | None) -> tuple[Any, dict[str, Any]]:
    """The Relay module and params of the model at ``path``.

    Raises
    ------
    CLIError
        Naming the file when it cannot be read or converted.
    """
    kind = MODEL_KINDS.get(Path(path).suffix.lower())
    if kind is None:
        raise CLIError(
            f"{path}: unknown model kind {Path(path).suffix or '(no suffix)'!r}; "
            f"expected one of {', '.join(sorted(MODEL_KINDS))}"
        )
    vm_cli.regular_file_size(path, "model")
    if kind == "relay":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise CLIError(f"{path}: not UTF-8 Relay text ({err.reason})") from None
        try:
            return fromtext(text, source_name=path), {}
        except RelaySyntaxError as err:
            # The message starts with the file name and position already.
            raise CLIError(str(err)) from None
    if kind == "onnx":
        try:
            return from_onnx(path, shape=shapes)
        except ImportError as err:
            raise CLIError(f"{path}: reading ONNX needs the onnx package ({err})") from None
    return _load_pytorch(path, shapes)


def _load_pytorch(path: str, shapes: dict[str, list[int]] | None) -> tuple[Any, dict[str, Any]]:
    try:
        from_pytorch = relay.frontend.from_pytorch
    except (AttributeError, ImportError):
        raise CLIError(
            f"{path}: this relayvm has no PyTorch frontend (relay.frontend.from_pytorch)"
        ) from None
    if not shapes:
        raise CLIError(f"{path}: a TorchScript model needs --input-shapes name:[dims]")
    try:
        import torch
    except ImportError:
        raise CLIError(f"{path}: reading TorchScript needs torch (pip install torch)") from None
    try:
        model = torch.jit.load(path, map_location="cpu")
    except Exception as err:  # torch raises RuntimeError and others for a bad archive
        raise CLIError(f"{path}: not a TorchScript archive: {vm_cli._reason(err)}") from None
    return from_pytorch(model, list(shapes.items()))


# ---- commands -----------------------------------------------------------------------------


def _compile(args: argparse.Namespace) -> int:
    shapes = parse_input_shapes(args.input_shapes) if args.input_shapes else None
    out = Path(args.output)
    if not out.parent.is_dir():
        raise CLIError(f"{args.output}: the output directory {str(out.parent)!r} does not exist")
    if out.is_dir():
        raise CLIError(f"{args.output}: the output path is a directory; name a file")
    mod, params = load_model(args.model, shapes)
    start = time.perf_counter()
    try:
        with PassContext(opt_level=args.opt_level):
            if args.executor == "vm":
                built = relay.vm.compile(mod, target="llvm", params=params)
            else:
                built = relay.build(mod, target="llvm", params=params, executor=args.executor)
    except (ValueError, TypeError, NotImplementedError) as err:
        raise CLIError(f"{args.model}: cannot compile: {err}") from None
    seconds = time.perf_counter() - start
    # As tvmc compile makes the machine code, this makes the kernels (into this machine's
    # cache), so a library bug fails here and the first run on this machine starts warm.
    start = time.perf_counter()
    kernels = vm_cli.build_kernels(built if args.executor == "vm" else built.lib, args.quiet)
    kernel_seconds = time.perf_counter() - start
    try:
        if args.export_format == "mlf":
            export_model_library_format(built, args.output)
        elif args.executor == "vm":
            built.save(args.output)
        else:
            built.export_library(args.output)
    except (OSError, TypeError) as err:
        raise CLIError(f"{args.output}: cannot write: {err}") from None
    print(
        f"compiled {args.model} ({args.executor} executor, opt level {args.opt_level}) "
        f"in {seconds:.1f} s, {kernels} kernels built in {kernel_seconds:.1f} s -> {args.output}"
    )
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.repeat < 1 or args.number < 1:
        raise CLIError("--repeat and --number must be at least 1")
    kind = model_kind(args.model)
    shapes = parse_input_shapes(args.input_shapes) if args.input_shapes else None
    if kind == "executable":
        exe = vm_cli._load(args.model)
    else:
        mod, params = load_model(args.model, shapes)
        try:
            with PassContext(opt_level=args.opt_level):
                exe = relay.vm.compile(mod, target="llvm", params=params)
        except (ValueError, TypeError, NotImplementedError) as err:
            raise CLIError(f"{args.model}: cannot compile: {err}") from None
    vm_cli.build_kernels(exe, args.quiet)
    machine = vm.VirtualMachine(exe, vm.cpu())
    func = exe.functions[exe.function_index("main")]
    given = vm_cli.read_inputs(args.inputs, list(func.params)) if args.inputs else {}
    rng = np.random.default_rng(args.seed)
    try:
        inputs = {
            name: given[name] if name in given else vm_cli.make_input(spec, "random", rng, name)
            for name, spec in zip(func.params, func.param_types)
        }
    except ValueError as err:
        raise CLIError(f"{args.model}: main: {err}") from None
    machine.set_input("main", *inputs.values())
    timer = machine.time_evaluator("invoke_stateful", number=args.number, repeat=args.repeat)
    rows = [("relayvm", timer("main").results)]
    if kind == "onnx":
        peer = _onnxruntime_times(args, inputs)
        if peer is not None:
            rows.append(("onnxruntime", peer))
    print(bench_table(rows, args.number, args.repeat))
    if args.plot:
        plot_bench(rows, args.plot, title=f"{Path(args.model).name}: time per call")
    return 0


def _onnxruntime_times(args: argparse.Namespace, inputs: dict[str, Any]) -> list[float] | None:
    try:
        import onnxruntime as ort
    except ImportError:
        print("(onnxruntime is not installed: no side-by-side)")
        return None
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        feed = {k: v for k, v in inputs.items() if k in names}
        session.run(None, feed)  # warm-up, as time_evaluator's first call
    except Exception as err:  # onnxruntime's own exception types; relayvm's row still stands
        print(f"(onnxruntime cannot run {args.model}: {' '.join(str(err).split())[:200]})")
        return None
    results = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        for _ in range(args.number):
            session.run(None, feed)
        results.append((time.perf_counter() - start) / args.number)
    return results


def bench_table(rows: Sequence[tuple[str, Sequence[float]]], number: int, repeat: int) -> str:
    """The ``bench`` table: per engine, mean/median/max/min/std of seconds per call, in ms."""
    header = ("engine", "mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
    body = []
    for name, results in rows:
        ms = np.asarray(results, dtype=np.float64) * 1e3
        stats = (ms.mean(), np.median(ms), ms.max(), ms.min(), ms.std())
        body.append((name, *(f"{v:.4f}" for v in stats)))
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))
        )
        for line in [header, *body]
    ]
    lines.append(f"({repeat} rounds of {number} calls each)")
    return "\n".join(lines)


def plot_bench(rows: Sequence[tuple[str, Sequence[float]]], path: str, title: str) -> None:
    """Draw the ``bench`` table (median ms per call, min-max as error bars) into ``path``."""

    figure = _matplotlib_figure()(figsize=(6, 1.5 + 0.5 * len(rows)), layout="constrained")
    axes = figure.add_subplot()
    ms = [np.asarray(r, dtype=np.float64) * 1e3 for _, r in rows]
    medians = [float(np.median(m)) for m in ms]
    errors = [[med - m.min() for med, m in zip(medians, ms)],
              [m.max() - med for med, m in zip(medians, ms)]]  # fmt: skip
    bars = axes.barh([name for name, _ in rows], medians, xerr=errors, color="tab:orange")
    axes.bar_label(bars, labels=[f"{m:.3f} ms" for m in medians], padding=4)
    axes.set_xlabel("median time per call (ms); bars span min to max")
    axes.margins(x=0.3)
    axes.set_title(title)
    figure.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``relayvm`` command line ``argv`` (``sys.argv[1:]`` when None).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``relayvm``.

    Returns
    -------
    int
        The exit status (see ``relayvm --help``); argparse exits with 2 on a usage error.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _VM_COMMANDS:
        try:
            return vm_cli.main(argv)
        except CLIError as err:
            vm_cli._error(str(err))
            return EXIT_ERROR
    args = _parser().parse_args(argv)
    try:
        return _compile(args) if args.command == "compile" else _bench(args)
    except CLIError as err:
        vm_cli._error(str(err))
        return EXIT_ERROR
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as err:
        # The frontends' and the VM's errors name the node, operator or parameter.
        vm_cli._error(f"{args.model}: {err}")
        return EXIT_ERROR
    except MemoryError:
        vm_cli._error(f"{args.model}: out of memory")
        return EXIT_ERROR
    except KeyboardInterrupt:
        vm_cli._error("interrupted")
        return EXIT_INTERRUPTED
    except Exception as err:  # the contract is one line, never a traceback
        vm_cli._error(f"internal error (please report it): {type(err).__name__}: {err}")
        return EXIT_INTERNAL
