"""The kernels' worker threads and thread-split BLAS products.

Returns group: every task of a job runs exactly once whoever takes it, from one or several
calling threads at once; the first error is re-raised in the caller; OpenBLAS is made
single-threaded only inside the context and restored after it; products split into chunks
along their longer dimension (columns, rows, a batch, a convolution's output rows with
their im2col) equal numpy's; a forked child starts workers of its own; while a job runs
its threads are bound to CPUs of their own and the caller gets its affinity back after
it, unless binding is turned off. Traps group: an
exception in a Python handler called from compiled code through the bridge becomes a
RuntimeError there, and the original stays available; a failing task cancels the tasks
nobody took yet. Fuzz group: a job whose caller is interrupted at the k-th Python call or
return, for every k, raises KeyboardInterrupt or finishes; either way no task still runs
or starts afterwards, the caller has its CPU affinity back and the pool works on.
``RELAYVM_INTERRUPT_RUNS`` sets how many k are tried (0: every one).
"""

from __future__ import annotations

import _thread
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tests.vm.kernels.workers import prepare_every_need
from vm.kernels.runtime import conv_loops, convolution, products, threads

RNG = np.random.default_rng(71)
#: Interrupted jobs in the suite; ``RELAYVM_INTERRUPT_RUNS=0`` tries every place.
RUNS = int(os.environ.get("RELAYVM_INTERRUPT_RUNS", "30"))


def test_every_task_runs_once_from_several_callers() -> None:
    counts = np.zeros(64, np.int64)
    lock = threading.Lock()

    def task(i: int):
        def run() -> None:
            with lock:
                counts[i] += 1

        return run

    def caller(offset: int) -> None:
        for _ in range(10):
            threads.run([task(offset + i) for i in range(16)])

    callers = [threading.Thread(target=caller, args=(k * 16,)) for k in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert (counts == 10).all()


def test_the_first_error_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        threads.run([lambda: None, fail, lambda: None, fail])
    threads.run([lambda: None] * 3)  # the pool still works afterwards


def test_a_failing_task_cancels_the_tasks_nobody_took() -> None:
    ran: list[int] = []

    def fail() -> None:
        raise ValueError("first task failed")

    # Run on this thread alone (no worker takes a task while it holds the GIL).
    tasks = [fail] + [lambda i=i: ran.append(i) for i in range(1, 8)]
    with pytest.raises(ValueError, match="first task failed"):
        _serially(tasks)
    assert ran == []


def _serially(tasks) -> None:
    """threads.run(tasks) as if every worker were busy: the caller takes every task."""
    job = threads._Job(tasks)
    job.work()
    job.wait()
    if job.error is not None:
        raise job.error


def test_single_threaded_blas_is_scoped() -> None:
    setter = threads._setter()
    if setter is None:
        pytest.skip("numpy's BLAS has no thread-local control here")
    before = setter(3)
    with threads.single_threaded_blas():
        assert setter(1) == 1
    assert setter(before) == 3


@pytest.mark.parametrize(("m", "k", "n"), [(3, 5, 4), (64, 300, 900), (900, 300, 40)])
def test_split_products_equal_numpy(m: int, k: int, n: int) -> None:
    prepare_every_need()
    a = RNG.standard_normal((m, k)).astype("float32")
    b = RNG.standard_normal((n, k)).astype("float32")
    out = np.full((m, n), np.nan, "float32")
    products.matmul(a, b.T, out)
    np.testing.assert_allclose(out, a @ b.T, rtol=1e-4, atol=1e-4)
    stack_a = RNG.standard_normal((6, 40, 300)).astype("float64")
    stack_b = RNG.standard_normal((1, 300, 50)).astype("float64")
    stacked = np.empty((6, 40, 50))
    products.matmul_into(stack_a, stack_b, stacked, False, False)
    np.testing.assert_allclose(stacked, stack_a @ stack_b, rtol=1e-10)


@pytest.mark.parametrize(
    ("channels", "size", "out"),
    [
        (16, 30, 8),  # small: one im2col, the product shared by compiled code
        (64, 6, 128),  # more channels than pixels: im2col by channel chunks, then the product
        (32, 64, 64),  # big: chunks of output rows, each with its own im2col
    ],
)
def test_split_convolution_blocks_equal_im2col_and_one_product(channels, size, out) -> None:
    # However a block is cut, it must give what one im2col and one product give.
    x = RNG.standard_normal((2, channels, size, size)).astype("float32")
    w = RNG.standard_normal((out, channels * 9)).astype("float32")
    plane = size * size
    cols = np.empty((channels * 9, plane), "float32")
    conv_loops.im2col(x, 1, 0, channels, cols, 3, 3, 1, 1, 1, 1, 1, 1, size, size, 0, size)
    want = w @ cols
    got = np.full((2, out, plane), np.nan, "float32")
    convolution.conv_block(x, w[None], got, np.empty_like(cols), 1, 0, channels, 3, 3, 1, 1, 1, 1,
                    1, 1, size, size)  # fmt: skip
    np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-4)


def test_a_forked_child_gets_its_own_workers() -> None:
    import multiprocessing

    threads.run([lambda: None] * 4)  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        assert pool.apply(_product_in_child) == pytest.approx(float(64 * 300))


def _product_in_child() -> float:
    a = np.ones((64, 300), "float32")
    b = np.ones((300, 900), "float32")
    out = np.empty((64, 900), "float32")
    products.matmul(a, b, out)  # big enough to be split between threads
    return float(out.sum() / 900)


def test_a_failing_python_handler_raises_in_compiled_code() -> None:
    from numba import njit

    from vm.kernels.runtime import bridge

    def fail(values, count) -> None:
        raise KeyError(f"handler saw {count} values")

    code = bridge.register(f"tests.fail.{id(fail)}", fail, 1)

    @njit
    def call(values):
        block = np.empty(16, np.int64)
        at = bridge.put(block, 1, values)
        block[at] = values.size
        bridge.invoke(code, block, at + 1)

    with pytest.raises(RuntimeError, match="internal error in a kernel's call to BLAS"):
        call(np.zeros(3, np.float32))
    assert isinstance(bridge.last_error(), KeyError)
    assert "handler saw 3 values" in str(bridge.last_error())


def _affinity_in_task(record: list, key: str):
    def task() -> None:
        record.append((key, threading.current_thread().name, os.sched_getaffinity(0)))

    return task


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
def test_a_job_binds_its_threads_to_cpus_of_their_own_and_restores_the_caller() -> None:
    threads.run([lambda: None] * 2)  # the pool exists
    cpu = threads._STATE.get("caller_cpu")
    if cpu is None:
        pytest.skip("threads are not bound here (one CPU, or RELAYVM_BIND_THREADS=0)")
    before = os.sched_getaffinity(0)
    record: list = []
    for _ in range(20):  # until a worker has taken a task too
        threads.run([_affinity_in_task(record, str(i)) for i in range(8)])
        if any(not name.startswith("Main") for _, name, _ in record):
            break
    assert os.sched_getaffinity(0) == before
    for _, name, cpus in record:
        if name == threading.current_thread().name:
            assert cpus == {cpu}
        else:
            assert len(cpus) == 1 and cpu not in cpus


def test_binding_can_be_turned_off() -> None:
    code = (
        "import os\n"
        "from vm.kernels.runtime import threads\n"
        "seen = []\n"
        "threads.run([lambda: seen.append(os.sched_getaffinity(0))] * 4)\n"
        "print(threads._STATE.get('caller_cpu'), all(s == os.sched_getaffinity(0) for s in seen))"
    )
    env = {**os.environ, "RELAYVM_BIND_THREADS": "0", "RELAYVM_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.split() == ["None", "True"]


# --- fuzz: interrupted callers ---------------------------------------------------------------


class _Tasks:
    """Tasks that count how many of them run now and how many ever started."""

    def __init__(self, count: int) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.started = 0
        self.count = count

    def task(self) -> None:
        # Interrupts land on this (the caller's) thread too, after any call: the count
        # must not depend on where.
        entered = False
        try:
            with self.lock:
                self.running += 1
                self.started += 1
                entered = True
            time.sleep(0.0005)  # long enough for a worker to be inside one when we leave
        finally:
            if entered:
                with self.lock:
                    self.running -= 1

    def all(self) -> list:
        return [self.task] * self.count


def _interrupted_run(tasks: list, k: int) -> bool:
    """threads.run(tasks) with Ctrl-C at the caller's k-th Python call or return (C calls
    count at their return, where an interrupt is raised after them); whether it raised."""
    seen = 0

    def hook(frame, event, arg) -> None:
        nonlocal seen
        if event == "c_call":
            return
        seen += 1
        if seen == k:
            sys.setprofile(None)
            _thread.interrupt_main()  # raised here at once, as from the place profiled

    sys.setprofile(hook)
    try:
        threads.run(tasks)
    except KeyboardInterrupt:
        return True
    finally:
        sys.setprofile(None)
    return False


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupted_caller_leaves_no_task_behind_and_gets_its_affinity_back() -> None:
    threads.run([lambda: None] * 2)  # the pool exists
    if threads.threads() <= 1:
        pytest.skip("one thread: jobs run serially")
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    counting = _Tasks(6)
    events = 0

    def counter(frame, event, arg) -> None:
        nonlocal events
        if event != "c_call":
            events += 1

    sys.setprofile(counter)
    try:
        threads.run(counting.all())
    finally:
        sys.setprofile(None)
    places = range(1, events + 1)
    if 0 < RUNS < events:
        places = sorted({1 + (events - 1) * i // (RUNS - 1) for i in range(RUNS)})
    interrupted = 0
    for k in places:
        tasks = _Tasks(6)
        interrupted += _interrupted_run(tasks.all(), k)
        assert tasks.running == 0, f"interrupt at {k}: a worker still runs a task"
        started = tasks.started
        if hasattr(os, "sched_getaffinity"):
            assert os.sched_getaffinity(0) == before, f"interrupt at {k} left the caller bound"
        after = _Tasks(6)
        threads.run(after.all())
        assert after.started == 6
        assert tasks.started == started <= 6, f"interrupt at {k}: a task started afterwards"
    assert interrupted > 0
