"""Fixtures shared by the runtime's tests (``tests/vm`` and below)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt during the test, whatever the process inherited.

    A process started in the background by a shell without job control (a CI runner's
    script, ``nohup ... &``) inherits SIGINT ignored, and Python then leaves it ignored:
    ``_thread.interrupt_main()`` would do nothing and an interrupt test would see none.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
