"""Kernels compiled for an AVX2-only CPU give the results the host's kernels give.

Register tiles and vector code are sized from the instruction set numba targets
(vm.kernels.runtime.target), so a machine without AVX-512 runs other code than a machine with it.
This runs the register-tile programs of ``thread_counts`` in a process told to target
Haswell (``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``) and compares with this process's
results, so both paths stay correct whichever CPU runs the suite.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tests.vm.kernels import thread_counts
from vm.kernels.runtime.target import has_avx512, target_features

ROOT = pathlib.Path(__file__).resolve().parents[4]

#: Haswell's vector features: AVX2 and FMA, no AVX-512.
AVX2_FEATURES = (
    "+64bit,+avx,+avx2,+bmi,+bmi2,+cmov,+cx16,+f16c,+fma,+lzcnt,+movbe,+popcnt,"
    "+sse,+sse2,+sse3,+sse4.1,+sse4.2,+ssse3,+xsave"
)


def test_target_features_follow_numbas_target_cpu():
    env = {**os.environ, "NUMBA_CPU_NAME": "haswell", "NUMBA_CPU_FEATURES": AVX2_FEATURES}
    code = (
        "from vm.kernels.runtime import packed, target; "
        "print(target.has_avx512(), packed.ROWS, packed.TILE_COLUMNS)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "6", "16"]
    assert "avx2" in target_features()  # every machine this project supports has AVX2


def test_kernels_compiled_for_avx2_agree_with_the_hosts(tmp_path):
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "NUMBA_CPU_NAME": "haswell",
        "NUMBA_CPU_FEATURES": AVX2_FEATURES,
        "PYTHONPATH": path,
    }
    saved = tmp_path / "avx2.npz"
    done = subprocess.run(
        [sys.executable, "-m", "tests.vm.kernels.thread_counts", "--save", str(saved)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    avx2 = np.load(saved)
    assert "avx2" in avx2["isa"] and "avx512f" not in avx2["isa"]
    host = thread_counts.outputs()
    assert set(avx2.files) - {"isa"} == set(host)
    for name, expected in host.items():
        # Another vector width sums in another order: equal up to rounding, not bitwise.
        np.testing.assert_allclose(avx2[name], expected, rtol=2e-4, atol=2e-4, err_msg=name)


@pytest.mark.skipif(not has_avx512(), reason="the host has no AVX-512: the suite runs AVX2 code")
def test_the_host_runs_avx512_tiles_when_it_has_them():
    from vm.kernels.runtime import packed

    assert (packed.ROWS, packed.TILE_COLUMNS) == (7, 32)
