"""Helpers for tests of jobs shared with the polling worker threads (the slot of
:mod:`vm.kernels.runtime.jobs`)."""

from __future__ import annotations

import time

import pytest

from vm.kernels.runtime import callbacks, jobs, threads


def wait_until(condition, seconds=60.0):
    # Generous: a worker's first poll compiles (or loads) its loop, seconds on a busy machine.
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def workers_polling():
    """Post a Python job (which wakes every worker) until one polls for products. A new job
    draws a polling worker away to take it, so it is posted only now and then."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        threads.run([lambda: None] * 4)
        if wait_until(jobs.polling, 0.02):
            return True
    return False


def prepare_every_need() -> None:
    """Register the chunk code of every kind of job and link every C entry point: tests
    that call the library's functions directly have no kernel loader to prepare what
    those functions share and call (an entry point called before it is linked jumps to
    address 0)."""
    jobs.require(*jobs.OWNERS)
    callbacks.link(*callbacks.entries())


needs_workers = pytest.mark.skipif(threads.threads() < 2, reason="one thread: nothing to share")


def assert_shared(run, check) -> None:
    """Call ``run()``, which offers its job to the polling workers, until they take it,
    and ``check()`` its result each time; the slot must be free afterwards."""
    for _ in range(20):  # a worker that lost its core in between stops polling: try again
        assert workers_polling()
        posted = jobs.jobs_posted()
        run()
        check()
        if jobs.jobs_posted() != posted:
            break
    else:
        pytest.fail("no job was shared with the workers in 20 tries")
    assert not jobs.busy()
