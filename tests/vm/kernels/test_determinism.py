"""Results do not depend on the number of threads or on which thread computes what.

Returns group: a product, a Winograd convolution's planes and a batch of products have the
same bits whether polling workers share them or the caller does them alone (another job
holding the shared slot), and a product called from Python has the bits of the compiled
one; programs built with ``compiler.relay`` at opt_level 3 (a Winograd convolution, a
packed one, dense layers by packed and by run-time weights, a batch of products, a small
ResNet-style network) give the same bits on one thread and on two, on every run, workers
awake or asleep. ``RELAYVM_DETERMINISM_RUNS`` sets the runs per program and thread
count (default 6).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from tests.vm.kernels.workers import assert_shared, needs_workers, prepare_every_need
from vm.kernels.runtime import convolution, jobs, products

RNG = np.random.default_rng(13)
ROOT = Path(__file__).resolve().parents[3]
RUNS = int(os.environ.get("RELAYVM_DETERMINISM_RUNS", "6"))


@pytest.fixture(autouse=True, scope="module")
def _every_kind_registered() -> None:
    prepare_every_need()


@njit
def _gemm(a, b, out, ta, tb):
    products.gemm(a, b, out, ta, tb)


@contextlib.contextmanager
def _slot_held() -> Iterator[None]:
    """As while another thread's job holds the shared slot: callers compute alone."""
    assert not jobs.busy()
    jobs.SLOT[jobs._BUSY] = 1
    try:
        yield
    finally:
        jobs.SLOT[jobs._BUSY] = 0


def _bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def _operands(m: int, n: int, k: int, ta: bool, tb: bool) -> tuple[np.ndarray, np.ndarray]:
    a = RNG.standard_normal((k, m) if ta else (m, k)).astype("float32")
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype("float32")
    return a, b


# Shapes of ResNet-18's Winograd planes and of dense layers (cut by rows or columns), most
# of whose OpenBLAS bits depend on the cut.
PRODUCTS = [(64, 196, 64, False, False), (32, 100, 32, False, False),
            (8, 256, 512, False, True), (300, 64, 128, True, False),
            (30, 70, 1000, False, False), (30, 70, 1000, True, True)]  # fmt: skip


@pytest.mark.parametrize(("m", "n", "k", "ta", "tb"), PRODUCTS)
def test_a_product_from_python_has_the_bits_of_the_compiled_one(m, n, k, ta, tb):
    a, b = _operands(m, n, k, ta, tb)
    compiled = np.full((m, n), np.nan, "float32")
    with _slot_held():
        _gemm(a, b, compiled, ta, tb)
    python = np.full((m, n), np.nan, "float32")
    products.product(a, b, python, ta, tb)  # what the Python convolution paths call
    np.testing.assert_array_equal(_bits(python), _bits(compiled))


@needs_workers
def test_a_batch_of_products_has_the_same_bits_shared_by_items_or_each_alone():
    a = RNG.standard_normal((6, 96, 128)).astype("float32")
    b = RNG.standard_normal((1, 64, 128)).astype("float32")
    alone = np.full((6, 96, 64), np.nan, "float32")
    with _slot_held():
        for i in range(6):
            _gemm(a[i], b[0], alone[i], False, True)
    shared = np.full((6, 96, 64), np.nan, "float32")

    def check() -> None:
        np.testing.assert_array_equal(_bits(shared), _bits(alone))
        shared[...] = np.nan

    assert_shared(lambda: products.matmul_into(a, b, shared, False, True), check)


@needs_workers
@pytest.mark.parametrize(("m", "n", "k", "ta", "tb"), PRODUCTS)
def test_a_product_has_the_same_bits_shared_or_done_alone(m, n, k, ta, tb):
    a, b = _operands(m, n, k, ta, tb)
    assert m * n * k >= products.PARALLEL_FLOPS  # big enough to share
    alone = np.full((m, n), np.nan, "float32")
    with _slot_held():
        _gemm(a, b, alone, ta, tb)
    shared = np.full((m, n), np.nan, "float32")

    def check() -> None:
        np.testing.assert_array_equal(_bits(shared), _bits(alone))
        shared[...] = np.nan

    assert_shared(lambda: _gemm(a, b, shared, ta, tb), check)


def _winograd_same_bits_alone_and_shared(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The Winograd convolution of ``x`` by the transformed weight ``u`` (square channels,
    plain or packed in panels) on the calling thread alone, after checking that sharing it
    with the polling workers gives the same bits."""
    channels, size = x.shape[1], x.shape[2]

    def run(out: np.ndarray) -> None:
        out[...] = np.nan
        convolution.conv_winograd_transformed(
            x, u, out.reshape(1, channels, -1), 0, 1, 1, size, size, 0
        )

    alone = np.empty((1, channels, size, size), "float32")
    with _slot_held():
        run(alone)
    shared = np.empty_like(alone)
    assert_shared(
        lambda: run(shared),
        lambda: np.testing.assert_array_equal(_bits(shared), _bits(alone)),
    )
    return alone


@needs_workers
@pytest.mark.parametrize(("channels", "size"), [(64, 56), (32, 40)])
def test_a_winograd_convolution_has_the_same_bits_shared_or_done_alone(channels, size):
    x = RNG.standard_normal((1, channels, size, size)).astype("float32")
    u = RNG.standard_normal((36, channels, channels)).astype("float32")
    _winograd_same_bits_alone_and_shared(x, u)


@needs_workers
@pytest.mark.parametrize(("channels", "size", "planes"), [(64, 56, 36), (96, 14, 16)])
def test_winograd_planes_in_panels_have_the_same_bits_shared_or_done_alone(channels, size, planes):
    from compiler.op.defs_packed import pack

    x = RNG.standard_normal((1, channels, size, size)).astype("float32")
    u = RNG.standard_normal((planes, channels, channels)).astype("float32")
    panels = np.stack([pack(plane, 32) for plane in u])
    alone = _winograd_same_bits_alone_and_shared(x, panels)
    # The same products as OpenBLAS gives by the plain planes, to rounding.
    plain = np.empty_like(alone)
    convolution.conv_winograd_transformed(
        x, u, plain.reshape(1, channels, -1), 0, 1, 1, size, size, 0
    )
    np.testing.assert_allclose(alone, plain, rtol=1e-4, atol=1e-3 * np.abs(plain).max())


def _digests(threads: int) -> dict[str, list[str]]:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "RELAYVM_NUM_THREADS": str(threads), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "tests.vm.kernels.thread_counts", str(RUNS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_programs_give_the_same_bits_on_one_and_two_threads_on_every_run():
    one, two = _digests(1), _digests(2)
    assert one.keys() == two.keys()
    differing = {
        name: (len(set(one[name])), len(set(two[name])))
        for name in one
        if len(set(one[name]) | set(two[name])) != 1
    }
    # (distinct outputs on one thread, on two) of each program whose bits changed.
    assert differing == {}
