"""Timing like TVM's ``time_evaluator``, and the :class:`BenchmarkResult` it returns.

Runtime layer (``vm``); imports numpy and the standard library only.

:func:`measure` reproduces TVM's timing loop exactly:

1. one warm-up call, whose time is discarded;
2. for each of ``repeat`` rounds: ``f_preproc(*args)`` if given, then a batch of
   ``number`` calls; while the batch took less than ``min_repeat_ms`` (and fewer than
   ``limit_zero_time_iterations`` batches measured exactly zero), ``number`` grows to
   ``max(min_repeat_ms / per_call_ms + 1, number * 1.618)`` and the batch is redone.
   The grown ``number`` persists into later rounds;
3. after round ``i``, if ``cooldown_interval_ms > 0`` and ``i % repeats_to_cooldown
   == 0``, sleep ``cooldown_interval_ms`` (so also after round 0);
4. the result holds one time per round: the last batch's seconds divided by ``number``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_GOLDEN_RATIO = 1.618


class BenchmarkResult:
    """Times of repeated runs, in seconds, with TVM's summary statistics.

    Parameters
    ----------
    results : sequence of float
        One time per repeat, in seconds.

    Attributes
    ----------
    results : list of float
    mean, median, std, min, max : float
        Statistics of ``results``; ``std`` is the population standard deviation.
    """

    def __init__(self, results: Sequence[float]) -> None:
        values = np.asarray(list(results), dtype=np.float64)
        if values.ndim != 1 or values.size == 0:
            raise ValueError("BenchmarkResult needs a non-empty sequence of times")
        self.results = [float(v) for v in values]
        self.mean = float(np.mean(values))
        self.std = float(np.std(values))
        self.median = float(np.median(values))
        self.min = float(np.min(values))
        self.max = float(np.max(values))

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
            f"max={self.max}, std={self.std}, results={self.results})"
        )

    def __str__(self) -> str:
        header = " ".join(
            f"{name:^12}"
            for name in ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
        )
        values = " ".join(
            f"{value * 1000:^12.4f}"
            for value in (self.mean, self.median, self.max, self.min, self.std)
        )
        # TVM's text ends with the indentation of its closing quotes; kept for identical output.
        return f"Execution time summary:\n{header}\n{values}\n" + " " * 15


#: TVM's ``f_preproc`` names and what they run before each round.
PREPROCESSORS = ("", "cache_flush_cpu_non_first_arg")

#: Bytes streamed through when the cache size cannot be read from the system.
_DEFAULT_CACHE_BYTES = 64 << 20

_flush_buffer: np.ndarray | None = None


def _last_level_cache_bytes() -> int:
    """The largest CPU cache, from Linux's sysfs; a generous default elsewhere."""
    import glob

    largest = 0
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path) as handle:
                text = handle.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            largest = max(largest, int(digits) * scale)
    return largest or _DEFAULT_CACHE_BYTES


def cache_flush_cpu_non_first_arg(*args: Any) -> None:
    """Evict the CPU caches, then bring the first argument's arrays back in (TVM's
    ``"cache_flush_cpu_non_first_arg"``).

    TVM flushes the cache lines of every argument but the first with ``clflush``;
    Python cannot issue that instruction, so this writes a buffer twice the size of
    the largest cache (which evicts everything) and then reads the first argument,
    leaving the same state: the first argument warm, the others cold.
    """
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(2 * _last_level_cache_bytes(), np.uint8)
    _flush_buffer += 1
    stack = list(args[:1])
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            item.sum()
        elif isinstance(item, (tuple, list)):
            stack.extend(item)


def preprocessor(f_preproc: Any) -> Callable[..., Any] | None:
    """The callable an ``f_preproc`` argument stands for (None for none).

    Raises
    ------
    ValueError
        For a name other than TVM's (listed in the message).
    TypeError
        For anything other than None, a str or a callable.
    """
    if f_preproc is None or callable(f_preproc):
        return f_preproc
    if isinstance(f_preproc, str):
        if f_preproc == "":
            return None
        if f_preproc == "cache_flush_cpu_non_first_arg":
            return cache_flush_cpu_non_first_arg
        raise ValueError(
            f"unknown f_preproc {f_preproc!r}; expected a callable, None or one of "
            + ", ".join(repr(p) for p in PREPROCESSORS)
        )
    raise TypeError(f"f_preproc must be a callable, a str or None, got {type(f_preproc).__name__}")


def check_settings(
    *,
    number: int,
    repeat: int,
    min_repeat_ms: float,
    cooldown_interval_ms: float,
    repeats_to_cooldown: int,
    limit_zero_time_iterations: int,
) -> dict[str, Any]:
    """The timing settings, checked; returns them as keyword arguments for :func:`measure`.

    Raises
    ------
    TypeError
        If a count is not an int or a duration is not a number.
    ValueError
        If ``number``, ``repeat`` or ``repeats_to_cooldown`` is below 1, or a duration
        or ``limit_zero_time_iterations`` is negative.
    """
    for name, value, least in (
        ("number", number, 1),
        ("repeat", repeat, 1),
        ("repeats_to_cooldown", repeats_to_cooldown, 1),
        ("limit_zero_time_iterations", limit_zero_time_iterations, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}")
    for name, ms in (
        ("min_repeat_ms", min_repeat_ms),
        ("cooldown_interval_ms", cooldown_interval_ms),
    ):
        if isinstance(ms, bool) or not isinstance(ms, (int, float, np.integer, np.floating)):
            raise TypeError(f"{name} must be a number of milliseconds, got {ms!r}")
        if not ms >= 0:
            raise ValueError(f"{name} must be non-negative, got {ms}")
    return {
        "number": int(number),
        "repeat": int(repeat),
        "min_repeat_ms": float(min_repeat_ms),
        "cooldown_interval_ms": float(cooldown_interval_ms),
        "repeats_to_cooldown": int(repeats_to_cooldown),
        "limit_zero_time_iterations": int(limit_zero_time_iterations),
    }


def measure(
    fn: Callable[[], Any],
    preproc_args: Sequence[Any],
    f_preproc: Callable[..., Any] | None,
    *,
    number: int = 10,
    repeat: int = 1,
    min_repeat_ms: float = 0.0,
    cooldown_interval_ms: float = 0.0,
    repeats_to_cooldown: int = 1,
    limit_zero_time_iterations: int = 100,
    clock: Callable[[], int] = time.perf_counter_ns,
    sleep: Callable[[float], Any] = time.sleep,
) -> BenchmarkResult:
    """Time ``fn()`` with TVM's loop (see the module docstring).

    Parameters
    ----------
    fn : callable
        The call to time, taking no arguments.
    preproc_args : sequence
        What ``f_preproc`` is called with before each round.
    f_preproc : callable or None
        Called before each round (not timed).
    clock, sleep : callable
        A nanosecond clock and a sleep in seconds (replaceable in tests).
    """
    fn()  # warm-up, discarded
    results = []
    for i in range(repeat):
        if f_preproc is not None:
            f_preproc(*preproc_args)
        duration_ms = 0.0
        zero_batches = 0
        while True:
            if duration_ms > 0.0:
                number = int(
                    max(min_repeat_ms / (duration_ms / number) + 1, number * _GOLDEN_RATIO)
                )
            start = clock()
            for _ in range(number):
                fn()
            elapsed_ns = clock() - start
            if elapsed_ns == 0:
                zero_batches += 1
            duration_ms = elapsed_ns / 1e6
            if not (duration_ms < min_repeat_ms and zero_batches < limit_zero_time_iterations):
                break
        results.append(duration_ms / 1e3 / number)
        if cooldown_interval_ms > 0 and i % repeats_to_cooldown == 0:
            sleep(cooldown_interval_ms / 1e3)
    return BenchmarkResult(results)
