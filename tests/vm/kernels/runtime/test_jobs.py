"""The shared-job slot's registry of kinds (``vm.kernels.runtime.jobs``).

Returns group: requiring a kind registers its chunk code in the slot once; a job of a
kind whose chunk code is not registered is not posted (its caller computes it alone: a
product is still right) and is counted; while every worker sleeps, a long product is
posted for the worker it wakes, a short one is computed by its caller alone; the poster
takes a job's chunks from the first up and the workers from the last down, each chunk
once, and a ticket of an earlier job is not honoured; a job run on the caller's thread
is its kind's chunk code called once, as chunk 0 of 1, on its words. Traps group: chunk
code registered for a kind from a module that does not own it is refused, and so is a
job run on the caller's thread whose kind has no chunk code registered.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from numba import cfunc, njit

from tests.vm.kernels.workers import needs_workers, wait_until
from vm.kernels.runtime import atomics, jobs, products, threads


@njit(nogil=True)
def _share(kind, extent, arguments):
    return jobs.share(kind, extent, arguments, 0)


@njit
def _gemm(a, b, out):
    products.gemm(a, b, out, False, False)


@cfunc(jobs.CHUNK)
def _record(slot, index, parts):
    # Chunk code that notes which chunk it was given, in the order of the calls.
    calls = atomics.fetch_add(slot + 8 * jobs.FIRST_ARGUMENT, 1)
    atomics.store_word(slot, jobs.FIRST_ARGUMENT + 1 + calls, index)


@cfunc(jobs.CHUNK)
def _report(slot, index, parts):
    # Chunk code that writes its chunk, its chunk count and its job's second word to the
    # address in its job's first word.
    to = atomics.load_word(slot, jobs.FIRST_ARGUMENT)
    atomics.store_word(to, 0, index)
    atomics.store_word(to, 1, parts)
    atomics.store_word(to, 2, atomics.load_word(slot, jobs.FIRST_ARGUMENT + 1))


@contextlib.contextmanager
def _registered_as(kind: int, handler: int) -> Iterator[None]:
    """As in a process where chunk code at ``handler`` is registered for ``kind``."""
    at = jobs._HANDLERS + kind
    before = int(jobs.SLOT[at])
    jobs.SLOT[at] = handler
    try:
        yield
    finally:
        jobs.SLOT[at] = before


def _job_in_a_slot(parts: int, front: int = 0) -> np.ndarray:
    """A slot of its own holding job 5 of ``parts`` chunks of :func:`_record`, the first
    ``front`` already taken."""
    slot = np.zeros_like(jobs.SLOT)
    kind = jobs.MAX_KINDS - 1
    slot[jobs._HANDLERS + kind] = _record.address
    slot[jobs._KIND], slot[jobs._JOB], slot[jobs._PARTS] = kind, 5, parts
    bits = jobs._CHUNK_BITS
    slot[jobs._TICKET] = (5 << 2 * bits) | (front << bits) | parts
    return slot


def _taken(slot: np.ndarray) -> list[int]:
    first = jobs.FIRST_ARGUMENT
    return slot[first + 1 : first + 1 + slot[first]].tolist()


@contextlib.contextmanager
def _unregistered(kind: int) -> Iterator[None]:
    """As in a process whose kernels never required ``kind``."""
    jobs.require(kind)
    at = jobs._HANDLERS + kind
    handler = int(jobs.SLOT[at])
    jobs.SLOT[at] = 0
    try:
        yield
    finally:
        jobs.SLOT[at] = handler


def test_requiring_a_kind_registers_its_chunk_code_once() -> None:
    jobs.require(jobs.MAX_POOL)
    assert jobs.MAX_POOL in jobs.registered()
    handler = int(jobs.SLOT[jobs._HANDLERS + jobs.MAX_POOL])
    assert handler == jobs.callback(jobs.MAX_POOL).address != 0
    jobs.require(jobs.MAX_POOL)
    assert int(jobs.SLOT[jobs._HANDLERS + jobs.MAX_POOL]) == handler


def test_a_job_of_a_kind_nobody_registered_is_refused_and_counted() -> None:
    unknown = jobs.MAX_KINDS - 1  # a number no kind has
    assert unknown not in jobs.OWNERS
    before, posted = jobs.unregistered_posts(), jobs.jobs_posted()
    assert not _share(unknown, 4, (1, 2, 3))
    assert not _share(jobs.MAX_KINDS, 4, (1, 2, 3))  # outside the handler table
    assert jobs.unregistered_posts() == before + 2
    assert jobs.jobs_posted() == posted and not jobs.busy()


def test_a_product_of_an_unregistered_kind_is_computed_by_its_caller_and_counted() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 256)).astype("float32")
    b = rng.standard_normal((256, 128)).astype("float32")
    assert a.shape[0] * b.shape[0] * b.shape[1] >= products.PARALLEL_FLOPS  # offered, if polled
    out = np.full((64, 128), np.nan, "float32")
    _gemm(a, b, out)  # compiled first
    with _unregistered(jobs.BLAS):
        before, posted = jobs.unregistered_posts(), jobs.jobs_posted()
        out[...] = np.nan
        _gemm(a, b, out)
        assert jobs.unregistered_posts() == before + 1
        assert jobs.jobs_posted() == posted
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def test_a_job_run_here_is_its_chunk_code_called_once_as_chunk_0_of_1() -> None:
    kind = jobs.MAX_KINDS - 1  # a number no kind has
    seen = np.full(3, -1, np.int64)
    posted = jobs.jobs_posted()
    with _registered_as(kind, _report.address):
        jobs.run_here(kind, (jobs.FIRST_ARGUMENT + 1, jobs.FIRST_ARGUMENT), (42, seen.ctypes.data))
    assert seen.tolist() == [0, 1, 42]
    assert jobs.jobs_posted() == posted and not jobs.busy()


@needs_workers
def test_a_long_product_is_shared_with_the_worker_it_wakes() -> None:
    a = np.random.default_rng(4).standard_normal((256, 1024)).astype("float32")
    b = np.random.default_rng(5).standard_normal((1024, 1024)).astype("float32")
    assert jobs.WAIT_WORK <= 256 * 1024 * 1024
    threads.start()
    out = np.empty((256, 1024), "float32")
    _gemm(a, b, out)  # compiled, and the workers woken once
    # Asleep with no wake-up left in the pipe: a byte an earlier test wrote would wake
    # a worker between this check and the product.
    asleep = lambda: (  # noqa: E731
        jobs.sleeping() >= threads.threads() - 1
        and not jobs.polling()
        and jobs.pending_wake_ups() == 0
    )
    assert wait_until(asleep)
    posted = jobs.jobs_posted()
    out[...] = np.nan
    _gemm(a, b, out)
    # Shared whether or not the worker is awake yet: it counts as soon as its byte is
    # on its way. (Whether a short product is shared depends on when the woken worker
    # runs; the rule itself is checked on a slot of its own below.)
    assert jobs.jobs_posted() == posted + 1
    np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
    assert not jobs.busy()


def _claimable_slot(awake: int, sleeping: int, pending: int, kind: int) -> np.ndarray:
    """A slot of its own with ``awake`` polling workers, ``sleeping`` asleep and
    ``pending`` wake-up bytes on their way, and no pipe (claim writes no byte)."""
    slot = np.zeros_like(jobs.SLOT)
    slot[jobs._HANDLERS + kind] = _record.address
    slot[jobs._WAKE_FD] = -1
    slot[jobs._AWAKE] = awake
    slot[jobs._SLEEPERS] = (sleeping << 32) | pending
    return slot


def test_a_short_job_counts_only_polling_workers_a_long_one_also_those_being_woken() -> None:
    kind = jobs.MAX_KINDS - 1
    short, long = jobs.WAIT_WORK - 1, jobs.WAIT_WORK

    def claim(awake: int, sleeping: int, pending: int, work: int) -> int:
        slot = _claimable_slot(awake, sleeping, pending, kind)
        return jobs.claim(slot.ctypes.data, kind, work)

    assert claim(0, 1, 1, short) == 0  # the woken worker would come too late
    assert claim(0, 1, 1, long) == 2  # but in time to halve a long job
    assert claim(0, 1, 0, long) == 0  # a sleeper no byte is on its way to is not counted
    assert claim(1, 0, 0, short) == 2  # a polling worker joins any job
    busy = _claimable_slot(1, 0, 0, kind)
    busy[jobs._BUSY] = 1  # another job holds the slot
    assert jobs.claim(busy.ctypes.data, kind, long) == 0


def test_the_poster_takes_chunks_from_the_front_and_the_workers_from_the_back() -> None:
    # Each thread then computes the same pixels of every layer (see vm.kernels.runtime.jobs).
    poster, worker = _job_in_a_slot(5), _job_in_a_slot(5)
    assert jobs._take_chunks(poster.ctypes.data, False) == 5
    assert jobs._take_chunks(worker.ctypes.data, True) == 5
    assert _taken(poster) == [0, 1, 2, 3, 4] and _taken(worker) == [4, 3, 2, 1, 0]


def test_the_two_ends_of_a_job_meet_and_take_each_chunk_once() -> None:
    slot = _job_in_a_slot(5, front=2)  # the poster took the first two
    assert jobs._take_chunks(slot.ctypes.data, True) == 3
    assert jobs._take_chunks(slot.ctypes.data, False) == 0
    assert _taken(slot) == [4, 3, 2] and slot[jobs._DONE] == 3
    assert not jobs._has_chunk(slot.ctypes.data)


def test_a_ticket_of_an_earlier_job_is_not_honoured() -> None:
    slot = _job_in_a_slot(5)
    slot[jobs._JOB] = 6  # a new job was written, its ticket not yet published
    assert not jobs._has_chunk(slot.ctypes.data)
    assert jobs._take_chunks(slot.ctypes.data, True) == 0
    assert _taken(slot) == []


def test_chunk_code_for_a_kind_of_another_module_is_refused() -> None:
    def chunk(slot, index, parts):  # pragma: no cover - never compiled
        pass

    with pytest.raises(ValueError, match=r"belongs to vm\.kernels\.runtime\.pool_loops"):
        jobs.chunk(jobs.MAX_POOL)(chunk)


@pytest.mark.parametrize("kind", [jobs.MAX_KINDS - 1, jobs.MAX_KINDS, -1])
def test_a_job_run_here_of_a_kind_without_chunk_code_raises(kind: int) -> None:
    with pytest.raises(ValueError, match="chunk code is not registered"):
        jobs.run_here(kind, (jobs.FIRST_ARGUMENT,), (0,))
