"""Build a set of kernels ahead of first use, in parallel processes, telling a callback how
far along it is.

Runtime layer (``vm``); imports numba through :mod:`vm.kernels.library`. It sits beside
the kernel library rather than in it: generated kernels never reach it, so it is no part
of their cache key.

A virtual machine builds its kernels (compiles them, or loads their machine code from the
disk cache) when it is made, which takes seconds per kernel on a cold cache. numba
compiles under the interpreter lock, so threads cannot share that work; processes can.
:func:`build_in_processes` hands the kernels that no process built before (with this
cache directory) to builder processes, one per CPU, which compile them into numba's disk
cache; this process then loads every kernel from there. :func:`build_kernels` does that
with a progress hook, and the machine then finds every kernel in the in-process table.
The hook is a plain callback: this layer never prints; the command line (:mod:`vm.cli`)
turns the callback into a bar.

The builders take their tasks from one schedule (:class:`_Schedule`): first the library
units the kernels need (:func:`vm.kernels.library.library_units`: a job kind's chunk
code, a C entry point), each once and after the units it calls, then each kernel once its
units are built; a unit one builder compiled, the others load from the disk cache. Given
one call's shapes of a kernel (``examples``), the builder then runs it once on zeros of
them, which compiles the library code the kernel reaches through Python for those shapes
there too, rather than in the machine's first call.

A builder is a fresh interpreter reading one JSON task a line on its standard input and
answering each (never this process's ``__main__`` run again, as a ``multiprocessing``
spawn would); it starts in a second or two, so kernels are built in this process alone
when there are fewer than :data:`MIN_PARALLEL_KERNELS` new ones, one CPU, or
``RELAYVM_BUILD_PROCESSES=1``. A builder that fails leaves its tasks to the others and
its kernels to this process, which reports any error.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from vm.kernels.description import parse_description
from vm.kernels.library import (
    CompiledKernel,
    LibraryUnit,
    built_before,
    is_loaded,
    kernel_key,
    library_units,
    load_kernel,
    prepare_unit,
)

#: ``progress(done, total)``: ``done`` kernels of ``total`` are built.
ProgressHook = Callable[[int, int], None]

#: One call's arguments of a kernel, inputs then outputs: ``(shape, dtype)`` each.
Example = Sequence[tuple[Sequence[int], str]]

#: How many processes build kernels the disk cache lacks; unset: one per CPU this
#: process may run on. ``1`` builds them in this process alone.
PROCESSES_ENV = "RELAYVM_BUILD_PROCESSES"

#: Fewer new kernels than this are built here: a builder process costs about a kernel's
#: build time to start (an interpreter, numba and the kernel library).
MIN_PARALLEL_KERNELS = 3

# The directory holding the ``vm`` package, for the builders' import path.
_ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
_BUILDER = "from vm.prebuild import _serve; _serve()"


def build_processes() -> int:
    """How many processes build new kernels: ``$RELAYVM_BUILD_PROCESSES``, else the CPUs
    this process may run on.

    Raises
    ------
    ValueError
        If the variable is set to anything but a positive integer.
    """
    value = os.environ.get(PROCESSES_ENV, "").strip()
    if value:
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise ValueError(f"{PROCESSES_ENV}={value!r}: expected a positive integer")
        return count
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _keyed(descriptions: Iterable[object]) -> list[tuple[str, object]]:
    """Each description with its cache key, in order (all validated first)."""
    return [(kernel_key(parse_description(d)), d) for d in descriptions]


def _distinct(keyed: Sequence[tuple[str, object]]) -> dict[str, object]:
    """The descriptions by cache key, each kernel once (the first description of it)."""
    distinct: dict[str, object] = {}
    for key, description in keyed:
        distinct.setdefault(key, description)
    return distinct


def build_in_processes(
    descriptions: Iterable[object],
    on_built: Callable[[str], None] | None = None,
    processes: int | None = None,
    examples: Callable[[], Sequence[Example | None]] | None = None,
) -> list[str]:
    """Compile, in builder processes, the kernels of ``descriptions`` that are neither in
    this process nor built before by any process, so that loading them here is a disk
    cache hit.

    Best effort: a kernel a builder could not build is left to this process (which then
    raises its error when it builds it), and nothing is done when there are fewer than
    :data:`MIN_PARALLEL_KERNELS` such kernels or one process to build them.

    Parameters
    ----------
    descriptions : iterable of kernel descriptions
        Kernel descriptions (shape functions excluded), validated first.
    on_built : callable, optional
        Called with the cache key of each kernel a builder finished, as it finishes.
    processes : int, optional
        At most this many builders; default :func:`build_processes`.
    examples : callable, optional
        Returns, for each description in order, the arguments of one call of its kernel
        (``(shape, dtype)`` pairs, inputs then outputs) or None; called only if builders
        start. A builder runs each kernel it built once on zeros of those shapes, which
        compiles the library code the kernel reaches through Python for them (the
        convolution algorithms chosen by shape) into the disk cache, in parallel, instead
        of in this process at the kernel's first call.

    Returns
    -------
    list of str
        The keys of the kernels the builders built.

    Raises
    ------
    KernelDescriptionError
        If a description is invalid (nothing is built).
    """
    keyed = _keyed(descriptions)
    return _build_new(_distinct(keyed), on_built, processes, _by_key(keyed, examples))


def _by_key(
    keyed: Sequence[tuple[str, object]], examples: Callable[[], Sequence[Example | None]] | None
) -> Callable[[], dict[str, Example]] | None:
    """``examples`` (aligned with ``keyed``) by the cache key of their kernels, the first
    of each."""
    if examples is None:
        return None

    def by_key() -> dict[str, Example]:
        found: dict[str, Example] = {}
        for (key, _), example in zip(keyed, examples(), strict=True):
            if example is not None:
                found.setdefault(key, example)
        return found

    return by_key


def _build_new(
    distinct: dict[str, object],
    on_built: Callable[[str], None] | None,
    processes: int | None,
    examples: Callable[[], dict[str, Example]] | None = None,
) -> list[str]:
    """:func:`build_in_processes` on descriptions already keyed by :func:`_distinct`, the
    examples by cache key."""
    if len(distinct) < MIN_PARALLEL_KERNELS:
        return []
    new = [
        (key, description)
        for key, description in distinct.items()
        if not is_loaded(key) and not built_before(key)
    ]
    count = min(build_processes() if processes is None else processes, len(new))
    if count < 2 or len(new) < MIN_PARALLEL_KERNELS:
        return []
    schedule = _schedule(new)
    rehearsals = {}
    if examples is not None:
        with contextlib.suppress(Exception):  # best effort: the kernels build without
            rehearsals = examples()
    env = dict(os.environ)
    env[PROCESSES_ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
    built: list[str] = []
    lock = threading.Lock()

    def run() -> None:
        try:
            builder = subprocess.Popen(
                [sys.executable, "-c", _BUILDER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                text=True,
            )
        except OSError:
            return
        assert builder.stdin is not None and builder.stdout is not None
        try:
            while (task := schedule.take()) is not None:
                reply = ""
                try:
                    builder.stdin.write(json.dumps(_message(task, distinct, rehearsals)) + "\n")
                    builder.stdin.flush()
                    reply = builder.stdout.readline().strip()
                finally:
                    schedule.finish(task)
                if not reply:  # the builder is gone: the others take the rest
                    break
                if isinstance(task, str) and reply == task:
                    with lock:
                        built.append(task)
                    if on_built is not None:
                        on_built(task)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                builder.stdin.close()
            builder.wait()

    workers = [threading.Thread(target=run, daemon=True) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return built


#: A builder's task: a library unit, or a kernel by its cache key.
_Task = LibraryUnit | str


def _schedule(new: Sequence[tuple[str, object]]) -> _Schedule:
    """The tasks that build the kernels of ``new``: first the library units they need
    (each once, after the units it calls), each kernel after its units.

    A unit compiles once for all builders (the others then load it from the disk cache);
    handed out with its kernels, it compiled in every builder whose kernels needed it, at
    the same time (ResNet-50's convolutions' column blocks: 23 s in each of two builders).
    """
    needs: dict[_Task, tuple[_Task, ...]] = {}
    for key, description in new:
        try:
            units = library_units(description)
        except Exception:  # the kernel's own build reports what is wrong
            units = {}
        needs.update(units)
        needs[key] = tuple(units)
    return _Schedule(needs)


def _message(
    task: _Task, distinct: dict[str, object], rehearsals: dict[str, Example]
) -> dict[str, object]:
    if isinstance(task, str):
        return {"kernel": distinct[task], "example": rehearsals.get(task)}
    return {"unit": list(task)}


class _Schedule:
    """Hands tasks to builders, each once, a task only after the tasks it needs finished
    (successfully or not: a task whose need failed builds it itself, or fails and is left
    to the parent).

    Of the ready tasks, the one most others wait for goes first (the library units many
    kernels need, before the kernels), then the earliest given.
    """

    def __init__(self, needs: dict[_Task, tuple[_Task, ...]]) -> None:
        self._waiting = {task: set(needed) & needs.keys() for task, needed in needs.items()}
        self._needed_by: dict[_Task, list[_Task]] = {task: [] for task in needs}
        for task, needed in self._waiting.items():
            for other in needed:
                self._needed_by[other].append(task)
        order = {task: i for i, task in enumerate(needs)}
        self._rank = {task: (-self._waiters(task), order[task]) for task in needs}
        self._ready = [task for task, needed in self._waiting.items() if not needed]
        self._untaken = len(needs)
        self._changed = threading.Condition()

    def _waiters(self, task: _Task) -> int:
        """How many tasks wait for ``task``, directly or not."""
        seen: set[_Task] = set()
        pending = list(self._needed_by[task])
        while pending:
            other = pending.pop()
            if other not in seen:
                seen.add(other)
                pending.extend(self._needed_by[other])
        return len(seen)

    def take(self) -> _Task | None:
        """The next task, waiting until one is ready; None once every task was taken."""
        with self._changed:
            while not self._ready:
                if self._untaken == 0:
                    return None
                # Needs are acyclic: a task waits only for tasks another builder holds.
                self._changed.wait()
            task = min(self._ready, key=self._rank.__getitem__)
            self._ready.remove(task)
            self._untaken -= 1
            return task

    def finish(self, task: _Task) -> None:
        """Record that ``task`` is done (or failed); tasks waiting only for it get ready."""
        with self._changed:
            for other in self._needed_by[task]:
                waiting = self._waiting[other]
                waiting.discard(task)
                if not waiting:
                    self._ready.append(other)
            self._changed.notify_all()


def _serve() -> None:
    """A builder: for each JSON task on standard input, one line a time, build it and
    answer with a line: a kernel's cache key, ``ok`` for a library unit, ``failed`` for
    either that could not be built."""
    for line in sys.stdin:
        task = json.loads(line)
        try:
            if "unit" in task:
                prepare_unit(LibraryUnit(*task["unit"]))
                reply = "ok"
            else:
                kernel = load_kernel(task["kernel"])
                reply = kernel.key
                if task.get("example"):
                    _rehearse(kernel, task["example"])
        except Exception:  # left to the parent, which reports it
            reply = "failed"
        print(reply, flush=True)


def _rehearse(kernel: CompiledKernel, example: Sequence[Sequence[Any]]) -> None:
    """Run ``kernel`` once on zeros of the shapes of ``example``, for what it compiles on
    the way; whatever it computes or raises does not matter."""
    with contextlib.suppress(Exception):
        kernel(*(np.zeros(tuple(shape), dtype) for shape, dtype in example))


def build_kernels(
    descriptions: Iterable[object],
    progress: ProgressHook | None = None,
    processes: int | None = None,
    examples: Callable[[], Sequence[Example | None]] | None = None,
) -> list[CompiledKernel]:
    """Build (compile or load from the disk cache) the kernel of every description, the
    new ones in parallel processes (:func:`build_in_processes`).

    Parameters
    ----------
    descriptions : iterable of kernel descriptions
        The ``description`` of each primitive to build (shape functions excluded: they
        are not numba kernels). Descriptions of the same kernel are built once.
    progress : callable, optional
        Called as ``progress(0, total)`` before the first build and as
        ``progress(done, total)`` after each distinct kernel, where ``total`` is the number
        of distinct kernels. Kernels already in this process count, and report at once.
    processes : int, optional
        At most this many builder processes; default :func:`build_processes`.
    examples : callable, optional
        One call's arguments of each description's kernel, as for
        :func:`build_in_processes`.

    Returns
    -------
    list of CompiledKernel
        One per distinct kernel, in the order the descriptions first name it.

    Raises
    ------
    KernelDescriptionError
        If a description is invalid (checked for all before any is built).
    KernelBuildError
        If a valid description fails to compile.
    """
    keyed = _keyed(descriptions)
    distinct = _distinct(keyed)
    total = len(distinct)
    done = 0
    if progress is not None:
        progress(0, total)
    lock = threading.Lock()

    def built_elsewhere(key: str) -> None:
        nonlocal done
        with lock:
            done += 1
            if progress is not None:
                progress(done, total)

    elsewhere = set(_build_new(distinct, built_elsewhere, processes, _by_key(keyed, examples)))
    kernels = []
    for key, description in distinct.items():
        kernels.append(load_kernel(description))
        if key not in elsewhere:
            done += 1
            if progress is not None:
                progress(done, total)
    return kernels
