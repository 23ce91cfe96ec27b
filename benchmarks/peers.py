"""Shared helpers for the benchmarks: timing, peers (onnxruntime, torch), and the ratio tables.

Benchmarks layer. Peers are optional: a missing one is reported as such, never faked.
:func:`print_table` gives ratios to relayvm (the dispatch benchmark);
:func:`print_peer_table` gives ratios to the fastest peer and each engine's max abs diff
from the reference answer (the model benchmark).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


def layer_parser(doc: str) -> argparse.ArgumentParser:
    """The command line of a per-layer benchmark: ``--rounds`` of alternating engines and
    onnxruntime's ``--threads``; described by the first line of the module's ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    return parser


def best_time(fn: Callable[[], object], number: int, repeat: int = 3) -> float:
    """The median over ``repeat`` rounds of the mean seconds per call over ``number`` calls."""
    wait_until_idle()  # another engine's polling threads would share the cores
    fn()  # warm-up: compile, allocate, fill caches
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - t0) / number)
    return float(np.median(rounds))


@dataclass
class Row:
    """One measured configuration of one workload."""

    workload: str
    engine: str
    seconds: float | None
    note: str = ""
    #: Largest absolute difference from the workload's reference answer, when checked.
    max_abs_diff: float | None = None


def print_table(rows: list[Row], reference_engine: str = "relayvm") -> None:
    """Print every row with its time and its ratio to ``reference_engine`` in the same workload.

    A ratio above 1 means that engine is slower than relayvm.
    """
    by_workload: dict[str, dict[str, Row]] = {}
    for row in rows:
        by_workload.setdefault(row.workload, {})[row.engine] = row
    header = f"{'workload':<34} {'engine':<30} {'time':>12} {'vs ' + reference_engine:>12}  note"
    print(header)
    print("-" * len(header))
    for workload, engines in by_workload.items():
        ref = engines.get(reference_engine)
        for row in engines.values():
            if row.seconds is None:
                print(f"{workload:<34} {row.engine:<30} {'n/a':>12} {'':>12}  {row.note}")
                continue
            ratio = ""
            if ref is not None and ref.seconds:
                ratio = f"{row.seconds / ref.seconds:.2f}x"
            print(
                f"{workload:<34} {row.engine:<30} {format_seconds(row.seconds):>12} "
                f"{ratio:>12}  {row.note}"
            )
        print()


def format_seconds(seconds: float) -> str:
    """Seconds as ns/us/ms/s with three significant digits."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def onnxruntime_session(model_bytes: bytes, threads: int | None = None):
    """An onnxruntime CPU session for a serialized ONNX model, or None if onnxruntime is absent."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or bench_threads()
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def onnx_available() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


def measure(
    fn: Callable[[], object],
    rounds: int = 5,
    min_round_seconds: float = 0.05,
    warmup: int = 3,
) -> float:
    """Seconds per call of one function: :func:`measure_interleaved` with just ``fn``."""
    return measure_interleaved([fn], rounds, min_round_seconds, warmup)[0]


def measure_interleaved(
    fns: Sequence[Callable[[], object]],
    rounds: int = 5,
    min_round_seconds: float = 0.05,
    warmup: int = 3,
    contexts: Sequence[Callable[[], contextlib.AbstractContextManager]] | None = None,
) -> list[float]:
    """Seconds per call of each function: the median over ``rounds`` rounds of the mean time
    per call.

    Each function first gets ``warmup`` calls (they compile, allocate and let TorchScript's
    profiling executor settle); then its number of calls per round is chosen so a round lasts
    at least ``min_round_seconds``, which keeps timer resolution out of microsecond
    workloads. The rounds are interleaved (round 1 of every function, then round 2, ...) so
    that load from other processes on a shared machine falls on every engine alike rather
    than on whichever happened to run during it. Before each round the process waits until
    the previous engine's threads have gone idle (:func:`wait_until_idle`), so no engine is
    timed against another's leftovers. ``contexts[i]()`` is entered around each of function
    ``i``'s rounds (for example ``torch.inference_mode``).
    """
    enter = list(contexts) if contexts is not None else [contextlib.nullcontext] * len(fns)
    numbers = []
    for fn, context in zip(fns, enter):
        with context():
            for _ in range(max(1, warmup)):
                fn()
            t0 = time.perf_counter()
            fn()
            one = max(time.perf_counter() - t0, 1e-9)
        numbers.append(max(1, math.ceil(min_round_seconds / one)))
    per_call: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for k, (fn, context, number) in enumerate(zip(fns, enter, numbers)):
            wait_until_idle()
            with context():
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                per_call[k].append((time.perf_counter() - t0) / number)
    return [float(np.median(times)) for times in per_call]


def wait_until_idle(limit: float = 1.0, window: float = 0.005, busy: float = 0.25) -> float:
    """Sleep until this process's threads stop using the CPU; return the seconds waited.

    Thread pools keep polling for work after a call returns: onnxruntime's worker for about
    40 ms, OpenBLAS's (numpy's) for about 100 ms, torch's for a few ms, each holding a core.
    On a 2-core machine the engine timed next would share its cores with them, and whichever
    engine follows the longest poller would look up to 2x slower. While the calling thread
    sleeps, any CPU time the process spends is those pollers', so this waits for a
    ``window`` in which it stays under ``busy`` of the wall time (or ``limit`` seconds).
    """
    start = time.perf_counter()
    while True:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        time.sleep(window)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        if cpu < busy * wall or wall0 - start > limit:
            return time.perf_counter() - start


def is_relayvm(engine: str) -> bool:
    """Whether a row measures relayvm itself (its engine name starts with ``relayvm``)."""
    return engine.startswith("relayvm")


def fastest_peer(rows: list[Row]) -> Row | None:
    """The fastest measured row that is not relayvm's, or ``None`` when there is none."""
    peers = [r for r in rows if r.seconds is not None and not is_relayvm(r.engine)]
    return min(peers, key=lambda r: r.seconds) if peers else None


def print_peer_table(rows: list[Row]) -> None:
    """Print every row with its time, its ratio to the fastest peer of its workload, and its
    max abs diff from the reference.

    A peer is any engine that is not relayvm (see :func:`is_relayvm`); a ratio above 1 means
    slower than the fastest peer. Rows without a time print ``n/a`` and their reason.
    """
    by_workload: dict[str, list[Row]] = {}
    for row in rows:
        by_workload.setdefault(row.workload, []).append(row)
    w_load = max([len("workload"), *(len(r.workload) for r in rows)])
    w_engine = max([len("engine"), *(len(r.engine) for r in rows)])
    header = (
        f"{'workload':<{w_load}} {'engine':<{w_engine}} {'time':>10} {'vs fastest peer':>16} "
        f"{'max abs diff':>12}  note"
    )
    print(header)
    print("-" * len(header))
    for workload, group in by_workload.items():
        best = fastest_peer(group)
        for row in group:
            diff = "" if row.max_abs_diff is None else f"{row.max_abs_diff:.2e}"
            time_text, ratio = "n/a", ""
            if row.seconds is not None:
                time_text = format_seconds(row.seconds)
                if row is best:
                    ratio = "1.00x fastest"
                elif best is not None and best.seconds:
                    ratio = f"{row.seconds / best.seconds:.2f}x"
            print(
                f"{workload:<{w_load}} {row.engine:<{w_engine}} {time_text:>10} {ratio:>16} "
                f"{diff:>12}  {row.note}"
            )
        print()


def torch_available() -> bool:
    """Whether torch can be imported (the optional ``bench`` extra)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def bench_threads() -> int:
    """The thread count the peers get: ``$RELAYVM_BENCH_THREADS``, default 2."""
    return int(os.environ.get("RELAYVM_BENCH_THREADS", "2"))


def torch_threads(threads: int | None = None) -> None:
    """Give torch the benchmark's thread count (:func:`bench_threads` unless given)."""
    import torch

    torch.set_num_threads(threads or bench_threads())
