"""``python -m vm``: load a saved executable and run it, like ``tvmc run``.

Runtime layer (``vm``); never imports ``compiler``, so it runs on a machine that only
has the runtime installed.

Usage::

    python -m vm run model.relayvm --inputs x.npz --outputs y.npz --print-time
    python -m vm info model.relayvm            # globals, primitives, stats
    python -m vm bytecode model.relayvm        # the disassembly

Every file named on the command line is checked before it is opened: it must be a regular
file (a FIFO would block, a device would never end), and an input array's ``.npy`` header is
read and checked against :mod:`serialization.limits` before any memory is allocated for it.
A failure is reported as one line naming the file and the problem.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import stat
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

import vm
from serialization.atomic import atomic_write
from serialization.limits import MAX_ARRAY_ELEMENTS, MAX_CONSTANT_BYTES, MAX_RANK
from serialization.ndarray import DTYPE_NAMES
from vm.aot import kernel_examples
from vm.primitives import kernel_descriptions
from vm.progress import progress_bar

#: Exit status for a known failure: a bad file, bad inputs, a trap while running.
EXIT_ERROR = 4

#: Exit status for an unexpected exception (a bug in relayvm).
EXIT_INTERNAL = 1

#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130

#: Exit status when stdout was closed early, as by ``| head`` (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141

_EPILOG = f"""\
exit status:
  0    success
  {EXIT_INTERNAL}    internal error (a bug in relayvm; the line names the exception)
  2    usage error (bad or missing arguments)
  {EXIT_ERROR}    a file that cannot be used (missing, not a regular file, too large,
       malformed, not an executable), inputs that do not fit the function, or a trap
       while running
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_BROKEN_PIPE}  stdout closed before the output was written (as by | head)
"""

_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class CLIError(Exception):
    """A known failure, reported as one line; the message names the file at fault."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vm",
        description=__doc__.split("\n\n")[0],
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="load an executable and invoke a function",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("path", help="the saved executable (from exe.save(path))")
    run.add_argument("--function", default="main", help="the function to invoke (default main)")
    run.add_argument(
        "-i",
        "--inputs",
        help=".npz file whose keys are parameter names, or a .npy file holding the first "
        "parameter's value",
    )
    run.add_argument(
        "-o",
        "--outputs",
        help="save outputs to this file (exactly this name) as an .npz of output_0, output_1...",
    )
    run.add_argument(
        "--fill-mode",
        choices=("zeros", "ones", "random"),
        default="random",
        help="how to make inputs that --inputs does not give (default random)",
    )
    run.add_argument("--print-time", action="store_true", help="print time_evaluator's summary")
    run.add_argument("--print-top", type=int, metavar="N", help="print the top N of output 0")
    run.add_argument("--profile", action="store_true", help="print the per-kernel profile")
    run.add_argument(
        "--trace",
        metavar="JSON",
        help="with --profile: write the profile's timeline as trace-event JSON (Perfetto)",
    )
    run.add_argument(
        "--plot",
        metavar="PNG",
        help="with --profile: draw per-operator time to this image (needs matplotlib)",
    )
    run.add_argument("--repeat", type=int, default=1, help="timing rounds (default 1)")
    run.add_argument("--number", type=int, default=1, help="calls per round (default 1)")
    run.add_argument("--seed", type=int, default=0, help="seed for --fill-mode random")
    add_quiet_flag(run)

    for name, text in (("info", "print the executable's statistics"),
                       ("bytecode", "print the executable's bytecode")):  # fmt: skip
        p = sub.add_parser(
            name, help=text, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        p.add_argument("path")
    return parser


def add_quiet_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet``: no progress bar (there is none when stderr is not a terminal)."""
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar on stderr while kernels are built (none off a terminal either)",
    )


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


# ---- files --------------------------------------------------------------------------------


def regular_file_size(path: str, role: str) -> int:
    """The size of ``path``, checked to be an existing regular file without opening it.

    Parameters
    ----------
    path : str
        The file named on the command line.
    role : str
        What the file is for (``"executable"``, ``"--inputs"``), for the message.

    Raises
    ------
    CLIError
        If ``path`` does not exist or is a directory, FIFO, device or socket.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise CLIError(f"{path}: {role} file not found") from None
    except OSError as err:
        raise CLIError(f"{path}: cannot read the {role} file: {err.strerror}") from None
    kind = stat.S_IFMT(info.st_mode)
    if kind != stat.S_IFREG:
        raise CLIError(
            f"{path}: the {role} file is {_FILE_KINDS.get(kind, 'of an unknown kind')}, "
            "not a regular file"
        )
    return info.st_size


def _array_from_npy(handle: BinaryIO, available: int, where: str) -> np.ndarray:
    """Read one ``.npy`` array from ``handle`` after checking its header.

    ``available`` is how many bytes the stream holds: a header declaring more data than
    that is refused before the array is allocated.
    """

    fmt = np.lib.format
    try:
        version = fmt.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(handle)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(handle)
        else:
            raise CLIError(f"{where}: .npy version {version} is not supported (1.0 or 2.0)")
    except CLIError:
        raise
    except Exception as err:
        # numpy parses the header with ast and, for old headers, tokenize: a garbled one
        # can raise ValueError, SyntaxError, tokenize.TokenError, UnicodeError...
        raise CLIError(f"{where}: not a .npy array: {_reason(err)}") from None
    if dtype.fields is not None or dtype.subdtype is not None or dtype.name not in DTYPE_NAMES:
        raise CLIError(f"{where}: dtype {dtype} is not one of {', '.join(DTYPE_NAMES)}")
    if len(shape) > MAX_RANK:
        raise CLIError(f"{where}: rank {len(shape)} is more than MAX_RANK ({MAX_RANK})")
    if any(dim < 0 for dim in shape):
        raise CLIError(f"{where}: the header declares a negative dimension in {tuple(shape)}")
    elements = 1
    for dim in shape:
        elements *= dim
    if elements > MAX_ARRAY_ELEMENTS or elements * dtype.itemsize > MAX_CONSTANT_BYTES:
        raise CLIError(
            f"{where}: the header declares a {dtype} array of shape {tuple(shape)} "
            f"({elements * dtype.itemsize} bytes), more than the limits allow "
            f"(MAX_ARRAY_ELEMENTS {MAX_ARRAY_ELEMENTS}, MAX_CONSTANT_BYTES {MAX_CONSTANT_BYTES})"
        )
    needed = elements * dtype.itemsize
    remaining = available - handle.tell()
    if needed > remaining:
        raise CLIError(
            f"{where}: the header declares {needed} bytes of data, the file holds {remaining}"
        )
    array = np.empty(elements, dtype=dtype)
    view, done = memoryview(array.view(np.uint8)), 0
    while done < needed:
        count = handle.readinto(view[done:])
        if not count:
            raise CLIError(f"{where}: truncated: {done} of {needed} bytes of data")
        done += count
    array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
    return array.astype(dtype.newbyteorder("=")) if dtype.byteorder == ">" else array


def read_inputs(path: str, params: Sequence[str]) -> dict[str, np.ndarray]:
    """The arrays of an ``--inputs`` file, by parameter name, read within the limits.

    Parameters
    ----------
    path : str
        An ``.npz`` file (keys are parameter names) or an ``.npy`` file (the value of
        the first parameter).
    params : sequence of str
        The function's parameter names.

    Raises
    ------
    CLIError
        Naming the file, and the member, when the file cannot be used.
    """

    size = regular_file_size(path, "--inputs")
    with open(path, "rb") as handle:
        magic = handle.read(6)
        handle.seek(0)
        if magic == b"\x93NUMPY":
            if not params:
                raise CLIError(f"{path}: the function takes no parameters")
            return {params[0]: _array_from_npy(handle, size, path)}
        if magic[:2] != b"PK":
            raise CLIError(
                f"{path}: not an .npz or .npy file (it starts with {magic!r})"
                if magic
                else f"{path}: the file is empty; expected an .npz or .npy file"
            )
        try:
            archive = zipfile.ZipFile(handle)
        except Exception as err:  # BadZipFile, OSError, ValueError, EOFError, zlib.error...
            raise CLIError(f"{path}: not a readable .npz (zip) file: {_reason(err)}") from None
        arrays: dict[str, np.ndarray] = {}
        total = 0
        with archive:
            for info in archive.infolist():
                where = f"{path}: member {info.filename!r}"
                if not info.filename.endswith(".npy") or info.is_dir():
                    raise CLIError(f"{where} is not an .npy array")
                total += info.file_size
                if total > MAX_CONSTANT_BYTES:
                    raise CLIError(
                        f"{where}: the arrays declare {total} bytes, more than "
                        f"MAX_CONSTANT_BYTES ({MAX_CONSTANT_BYTES})"
                    )
                try:
                    with archive.open(info) as member:
                        array = _array_from_npy(member, info.file_size, where)
                except CLIError:
                    raise
                except Exception as err:
                    # zipfile and zlib: bad CRC, bad deflate data, unsupported compression
                    # or encryption, truncation; each is a damaged file, not a bug.
                    raise CLIError(f"{where}: cannot be read: {_reason(err)}") from None
                arrays[info.filename.removesuffix(".npy")] = array
    return arrays


def _reason(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def check_output_path(path: str, flag: str = "--outputs") -> None:
    """Refuse an output path (of ``flag``) that cannot become a regular file, before running."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        mode = os.stat(path).st_mode if target.exists() else 0
        kind = stat.S_IFMT(mode)
        if kind != stat.S_IFREG:
            raise CLIError(
                f"{path}: the {flag} path is {_FILE_KINDS.get(kind, 'not a regular file')}, "
                "name a file to write"
            )
    if not target.parent.is_dir():
        raise CLIError(f"{path}: the {flag} directory {str(target.parent)!r} does not exist")


def write_outputs(path: str, arrays: Sequence[np.ndarray]) -> None:
    """Write ``arrays`` to exactly ``path`` (no ``.npz`` appended), atomically."""

    buffer = io.BytesIO()
    np.savez(buffer, **{f"output_{i}": a for i, a in enumerate(arrays)})
    try:
        atomic_write(path, buffer.getvalue())
    except OSError as err:
        raise CLIError(f"{path}: cannot write the outputs: {err.strerror or err}") from None


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


# ---- commands -----------------------------------------------------------------------------


def _load(path: str) -> Any:
    regular_file_size(path, "executable")
    try:
        return vm.Executable.load_exec(path)
    except MemoryError:
        raise CLIError(f"{path}: the executable file is too large to load") from None
    except (ValueError, OSError) as err:
        raise CLIError(f"{path}: {err}") from None


def build_kernels(exe: Any, quiet: bool = False) -> int:
    """Build ``exe``'s kernels now, with a bar on stderr when it is a terminal and not ``quiet``.

    A machine made afterwards finds every kernel built. Returns the number of kernels.
    """
    from vm.prebuild import build_kernels as build  # deferred: numba, info/bytecode never build

    descriptions, examples = kernel_descriptions(exe, lambda: kernel_examples(exe))
    bar = progress_bar("building kernels", quiet)
    try:
        return len(build(descriptions, bar, None, examples))
    finally:
        if bar is not None:
            bar.close()


def _run(args: argparse.Namespace) -> int:
    if args.repeat < 1 or args.number < 1:
        raise CLIError("--repeat and --number must be at least 1")
    if (args.trace or args.plot) and not args.profile:
        raise CLIError("--trace and --plot write the profile: add --profile")
    for path, flag in ((args.outputs, "--outputs"), (args.trace, "--trace"), (args.plot, "--plot")):
        if path:
            check_output_path(path, flag)
    t0 = time.perf_counter()
    exe = _load(args.path)
    build_kernels(exe, args.quiet)
    machine = vm.VirtualMachine(exe, vm.cpu())
    t_load = time.perf_counter() - t0
    if args.function not in exe.globals:
        raise CLIError(
            f"{args.path}: no function named {args.function!r}; it has {', '.join(exe.globals)}"
        )
    func = exe.functions[exe.function_index(args.function)]
    params = list(func.params)
    given: dict[str, np.ndarray] = {}
    if args.inputs:
        given = read_inputs(args.inputs, params)
        unknown = sorted(set(given) - set(params))
        if unknown:
            raise CLIError(
                f"{args.inputs}: the input tensor(s) {', '.join(unknown)} are not parameters "
                f"of {args.function}; expected inputs: {params}"
            )
    rng = np.random.default_rng(args.seed)
    try:
        inputs = [
            given[name] if name in given else make_input(spec, args.fill_mode, rng, name)
            for name, spec in zip(params, func.param_types)
        ]
    except ValueError as err:
        raise CLIError(f"{args.path}: {args.function}: {err}") from None
    t1 = time.perf_counter()
    result = machine.invoke(args.function, *inputs)
    t_first = time.perf_counter() - t1
    print(f"loaded {args.path} in {t_load * 1e3:.1f} ms; first call {t_first * 1e3:.1f} ms")
    if args.outputs:
        write_outputs(args.outputs, _flatten(result))
    if args.print_top:
        flat = np.asarray(_flatten(result)[0]).ravel()
        top = np.argsort(flat)[::-1][: args.print_top]
        print(np.vstack([top, flat[top]]))
    if args.profile:
        report = machine.profile(args.function, *inputs)
        print(report.table())
        _write_profile(report, args.trace, args.plot)
    if args.print_time:
        machine.set_input(args.function, *inputs)
        timer = machine.time_evaluator("invoke_stateful", number=args.number, repeat=args.repeat)
        print(timer(args.function))
    return 0


def _write_profile(report: Any, trace: str | None, plot: str | None) -> None:
    if trace:
        try:
            report.to_chrome_trace(trace)
        except OSError as err:
            raise CLIError(f"{trace}: cannot write the trace: {err.strerror or err}") from None
        print(f"wrote the trace to {trace} (open it in https://ui.perfetto.dev)")
    if plot:
        try:
            report.plot(plot)
        except ImportError as err:
            raise CLIError(f"{plot}: {err}") from None
        except (OSError, ValueError) as err:
            raise CLIError(f"{plot}: cannot draw the plot: {err}") from None
        print(f"wrote the plot to {plot}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (``sys.argv[1:]`` when None).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after ``python -m vm``.

    Returns
    -------
    int
        The exit status (see ``python -m vm --help``); argparse exits with 2 itself on a
        usage error.
    """
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        exe = _load(args.path)
        print(exe.stats if args.command == "info" else exe.bytecode)
        return 0
    except CLIError as err:
        _error(str(err))
        return EXIT_ERROR
    except (ValueError, TypeError, RuntimeError) as err:
        # Raised while running: bad argument values for the function, or a trap. The
        # VM's message names the function and the parameter or instruction.
        _error(f"{args.path}: {err}")
        return EXIT_ERROR
    except MemoryError:
        _error(f"{args.path}: out of memory while running {getattr(args, 'function', '')}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader has gone: nothing to report, and the interpreter's final flush of
        # stdout must not fail again, so stdout is pointed at the null device.
        with contextlib.suppress(OSError, ValueError, AttributeError):  # no real stdout
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as err:  # the contract is one line, never a traceback
        _error(f"internal error (please report it): {type(err).__name__}: {err}")
        return EXIT_INTERNAL


def _error(message: str) -> None:
    # One line: the messages of nested errors may carry newlines of their own.
    print("Error: " + " ".join(message.split()), file=sys.stderr)
