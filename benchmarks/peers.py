"""Shared helpers for the benchmarks: timing, peers (onnxruntime, torch), and the ratio table.

Benchmarks layer. Peers are optional: a missing one is reported as such, never faked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def best_time(fn: Callable[[], object], number: int, repeat: int = 3) -> float:
    """The median over ``repeat`` rounds of the mean seconds per call over ``number`` calls."""
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
    """Seconds as ns/us/ms with three significant digits."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e3:.3g} ms"


def onnxruntime_session(model_bytes: bytes, threads: int | None = None):
    """An onnxruntime CPU session for a serialized ONNX model, or None if onnxruntime is absent."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or int(os.environ.get("RELAYVM_BENCH_THREADS", "2"))
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def onnx_available() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True
