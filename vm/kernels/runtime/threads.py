"""Worker threads that share big matrix products with the calling thread.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); standard library, ctypes, numba
and :mod:`vm.kernels.runtime.jobs` (whose shared jobs and sleep/wake-up steps the workers run).

numpy's OpenBLAS parallelizes a product with threads that busy-wait for each other. On a
machine whose cores are shared (other processes, or another library's thread pool that
spins after each call, as onnxruntime's and torch's do) a waiting thread keeps its core
while the thread it waits for cannot get one, and a 1 ms product takes 8-25 ms. So the
kernels run OpenBLAS single-threaded (per calling thread, through OpenBLAS's
``openblas_set_num_threads_local``, without touching numpy's setting for anyone else) and
parallelize themselves: a big product is cut into chunks that the calling thread and this
pool's workers take from a shared counter. A worker that is slow to start leaves its
chunks to the caller, so a busy core slows a product down to one thread's speed at worst.
Waking a sleeping thread is slow (tens of microseconds, more in a virtual machine), so a
worker polls for the next job for a few milliseconds after each one, and a caller polls
for its last chunk, before they block (:mod:`vm.kernels.runtime.spin`; the polls hold no GIL).
While a worker polls it also takes chunks of the products compiled kernels share without
the GIL (:mod:`vm.kernels.runtime.jobs`); asleep, it waits on a pipe that both Python callers and
compiled code write a byte to. The workers start when a kernel that shares jobs is
loaded (:mod:`vm.kernels.library`), so its compiled code finds them polling.

While a job of Python tasks runs, its caller and the workers are bound to CPUs of their
own (the caller to one no worker takes), as TVM binds its pool's threads; each thread
gets its affinity back when the job is done, so no thread stays bound, and threads other
libraries start later inherit nothing. Unbound, the tasks lost 2x on a virtual machine:
after an idle spell, every hand-over of the GIL between a caller and a worker woke the
other on the waker's CPU, so the two shared one CPU (benchmarks/NOTES.md). Products that
compiled code shares need no GIL and no binding. ``RELAYVM_BIND_THREADS=0`` turns
binding off.

``RELAYVM_NUM_THREADS`` sets the number of threads (the caller included); the default is
the number of CPUs this process may run on, at most :data:`DEFAULT_MAX_THREADS`. When
numpy's BLAS is not an OpenBLAS with thread-local control, products are not split and the
BLAS threads as it does by itself. A forked child starts its own workers when it needs
them.
Any number of virtual machines may use the pool from any number of threads: jobs queue.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from numba.core.types import int64

from vm.kernels.runtime import jobs as slot
from vm.kernels.runtime import spin
from vm.kernels.runtime.openblas import SET_THREADS_LOCAL, openblas

#: The most threads used without ``RELAYVM_NUM_THREADS``: products are cut into a few chunks
#: per thread, and polling workers cost a core each while they wait.
DEFAULT_MAX_THREADS = 8
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}


def _thread_count() -> int:
    explicit = os.environ.get("RELAYVM_NUM_THREADS", "").strip()
    if explicit:
        try:
            return max(1, int(explicit))
        except ValueError:
            pass
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        count = os.cpu_count() or 1
    return max(1, min(count, DEFAULT_MAX_THREADS))


def _binding(workers: int) -> tuple[list[int], int] | None:
    """The CPU of each worker and the one callers take while they share a job, or None
    when threads are not bound (turned off, no affinity control, or too few CPUs)."""
    if os.environ.get("RELAYVM_BIND_THREADS", "1").strip() == "0" or workers < 1:
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return None
    if len(cpus) < workers + 1:
        return None
    return cpus[1 : workers + 1], cpus[0]


def _bind(cpus: set[int]) -> set[int] | None:
    """Bind the calling thread to ``cpus``; its previous CPUs, or None if that failed."""
    try:
        previous = os.sched_getaffinity(0)
        if previous != cpus:
            os.sched_setaffinity(0, cpus)
    except OSError:  # pragma: no cover - a CPU went offline or the mask is forbidden
        return None
    return previous


def _setter() -> Callable[[int], int] | None:
    setter = _STATE.get("setter", False)
    if setter is False:
        library = openblas()
        setter = None if library is None else getattr(library, SET_THREADS_LOCAL)
        if setter is not None:
            setter.restype = ctypes.c_int
            setter.argtypes = [ctypes.c_int]
        _STATE["setter"] = setter
    return setter  # type: ignore[return-value]


def threads() -> int:
    """How many threads a product may use (1 when BLAS threading cannot be controlled)."""
    with _LOCK:
        if "threads" not in _STATE:
            _STATE["threads"] = _thread_count()
    if _setter() is None:
        return 1
    return _STATE["threads"]  # type: ignore[return-value]


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the body with this thread's OpenBLAS calls on one thread (restored afterwards)."""
    setter = _setter()
    if setter is None:
        yield
        return
    previous = setter(1)
    try:
        yield
    finally:
        setter(previous)


class _Job:
    """Tasks taken in order by whichever thread asks next; ``done`` is set after the last.

    Tasks write into arrays that only the caller keeps alive, so a caller that leaves
    early (its own exception: a KeyboardInterrupt may land anywhere in its Python code)
    first cancels the job, so that no task starts any more, and waits for the workers
    running one (:meth:`abandon`). A task's error cancels the rest of the job too."""

    def __init__(self, tasks: Sequence[Callable[[], None]]) -> None:
        self.tasks = tasks
        self.next = itertools.count()
        self.pending = len(tasks)
        self.lock = threading.Lock()
        self.done = threading.Event()
        #: Becomes 1 with ``done``, for a caller polling instead of sleeping.
        self.finished = np.zeros(1, np.int64)
        self.error: BaseException | None = None
        self.cancelled = False
        #: Workers inside :meth:`help` (counted before they look at ``cancelled``).
        self.helpers = 0

    def work(self) -> None:
        """Do tasks until none is left (a cancelled job's are counted, not run)."""
        while True:
            i = next(self.next)  # atomic under the GIL
            if i >= len(self.tasks):
                return
            try:
                if not self.cancelled:
                    self.tasks[i]()
            except BaseException as exc:  # reported to the caller by run()
                self.error = self.error or exc
                self.cancelled = True
            with self.lock:
                self.pending -= 1
                if self.pending == 0:
                    self.finished[0] = 1
                    self.done.set()

    def help(self) -> None:
        """:meth:`work`, from a worker thread."""
        with self.lock:
            self.helpers += 1
        try:
            self.work()
        finally:
            with self.lock:
                self.helpers -= 1

    def wait(self) -> None:
        if not self.done.is_set():
            spin.wait_for_change(self.finished, 0, spin.POLLS)
        self.done.wait()

    def abandon(self) -> None:
        """Cancel the job and wait until no worker runs a task of it (the caller is leaving
        early); an exception raised meanwhile (another Ctrl-C) is raised after the wait."""
        self.cancelled = True
        deferred: BaseException | None = None
        # A worker counts itself in before it reads ``cancelled``: one that this loop does
        # not see will see the job cancelled. Polling, not a condition, so that an interrupt
        # cannot leave a lock held.
        while self.helpers:
            try:
                time.sleep(_ABANDON_POLL)
            except BaseException as exc:
                deferred = deferred or exc
        if deferred is not None:
            raise deferred


#: Seconds between two looks of a caller waiting for workers to leave a cancelled job
#: (they finish the task they run, a chunk of one kernel).
_ABANDON_POLL = 0.0002


#: The compiled steps of the slot's sleep/wake-up protocol that a worker calls from Python.
_PIPE_STEPS = (("going_to_sleep", ()), ("woken", ()), ("has_work", ()), ("wake", (int64,)))


def _worker(jobs: queue.SimpleQueue, posted: np.ndarray, wake: int, cpu: int | None) -> None:
    setter = _setter()
    if setter is not None:
        setter(1)
    # Compile (or load) the sleep and wake-up steps before the first sleep: compiling one
    # between counting ourselves asleep and reading the pipe would stall every poster, and
    # whether a process compiles them would depend on whether a worker ever slept.
    for step, signature in _PIPE_STEPS:
        getattr(slot, step).compile(signature)
    while True:
        seen = int(posted[0])
        try:
            job = jobs.get_nowait()
        except queue.Empty:
            # Poll (sharing compiled code's products) until a Python job is posted ...
            try:
                if slot.serve(posted, seen, spin.POLLS):
                    continue
            except Exception:  # pragma: no cover - the poll loop failed to compile
                # Products are then never shared (no worker polls), Python jobs still are.
                spin.wait_for_change(posted, seen, spin.POLLS)
                job = jobs.get()
                job.help()
                continue
            # ... or sleep until a job or a compiled caller writes to the pipe. Counting
            # ourselves asleep before the last look means a poster either sees a sleeper
            # (and writes) or we see its job; then we write our own byte, unless one is on
            # its way for every sleeper. Either way we read one byte (see vm.kernels.runtime.jobs).
            slot.going_to_sleep()
            if int(posted[0]) != seen or slot.has_work():
                slot.wake(1)
            os.read(wake, 1)
            slot.woken()
            continue
        # A job whose tasks are all taken (the caller often finishes alone) needs no binding.
        previous = None if cpu is None or job.pending == 0 else _bind({cpu})
        try:
            job.help()
        finally:
            if previous is not None and previous != {cpu}:
                _bind(previous)


def _pool() -> tuple[queue.SimpleQueue, np.ndarray, int]:
    with _LOCK:
        if "jobs" not in _STATE:
            jobs: queue.SimpleQueue = queue.SimpleQueue()
            #: Counts posted jobs; polling workers watch it.
            posted = np.zeros(1, np.int64)
            workers = max(0, int(_STATE.get("threads", 1)) - 1)  # type: ignore[arg-type]
            if workers:
                # A full pipe already holds a wake-up for everyone: writers never block.
                wake_read, wake_write = os.pipe()
                os.set_blocking(wake_write, False)
                slot.set_wake_fd(wake_write)
                _STATE["wake"] = wake_write
            binding = _binding(workers)
            _STATE["caller_cpu"] = None if binding is None else binding[1]
            for k in range(workers):
                cpu = None if binding is None else binding[0][k]
                thread = threading.Thread(
                    target=_worker,
                    args=(jobs, posted, wake_read, cpu),
                    name=f"relayvm-kernel-{k}",
                    daemon=True,
                )
                thread.start()
            _STATE["jobs"] = jobs
            _STATE["posted"] = posted
            _STATE["workers"] = workers
        return _STATE["jobs"], _STATE["posted"], _STATE["workers"]  # type: ignore[return-value]


def start() -> None:
    """Start the workers now (if this process may use more than one thread), so that
    products compiled code shares find them polling."""
    if threads() > 1:
        _pool()


def _wake(count: int) -> None:
    if "wake" in _STATE and slot.sleeping() > 0:
        slot.wake(count)


def _forget_pool() -> None:
    """In a forked child the workers do not exist: start a new pool when one is needed."""
    for key in ("jobs", "posted", "workers", "wake", "caller_cpu"):
        _STATE.pop(key, None)
    slot.reset()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def run(tasks: Sequence[Callable[[], None]]) -> None:
    """Run every task once, sharing them between this thread and the workers; re-raise the
    first error. The calling thread starts at once and takes any task nobody has. However
    this call ends (an interrupt included), no task runs after it and the calling thread
    has its CPU affinity back."""
    if len(tasks) <= 1 or threads() <= 1:
        for task in tasks:
            task()
        return
    jobs, posted, workers = _pool()
    caller_cpu = _STATE.get("caller_cpu")
    previous = _affinity() if caller_cpu is not None else None
    bind = previous is not None and previous != {caller_cpu}
    job = _Job(tasks)
    # No Python function call between binding and the try, or inside the finally before
    # the affinity is back: an interrupt is raised at such calls.
    bound = False
    try:
        if bind:
            bound = True
            try:  # noqa: SIM105 (see the finally)
                os.sched_setaffinity(0, {caller_cpu})
            except OSError:  # pragma: no cover - the CPU went offline or is forbidden
                pass
        for _ in range(min(workers, len(tasks) - 1)):
            jobs.put(job)
        posted[0] += 1  # after the put: a worker that sees the change finds the job queued
        _wake(len(tasks) - 1)
        job.work()
        job.wait()
    except BaseException:
        job.abandon()
        raise
    finally:
        if bound:
            # Not contextlib.suppress: its __enter__ is Python code, a place for an interrupt.
            try:  # noqa: SIM105
                os.sched_setaffinity(0, previous)
            except OSError:  # pragma: no cover - a CPU went offline since
                pass
    if job.error is not None:
        raise job.error


def _affinity() -> set[int] | None:
    """The calling thread's CPUs, or None if they cannot be changed."""
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return None
