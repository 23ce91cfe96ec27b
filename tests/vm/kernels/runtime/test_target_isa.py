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
from vm.kernels.runtime import packed, target
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


def _describe(root, entry, level, kind, size):
    folder = root / entry
    folder.mkdir()
    (folder / "level").write_text(f"{level}\n")
    (folder / "type").write_text(f"{kind}\n")
    (folder / "size").write_text(f"{size}\n")


def test_l1_data_cache_is_read_from_the_first_level_data_entry(tmp_path):
    _describe(tmp_path, "index0", 1, "Instruction", "32K")
    _describe(tmp_path, "index1", 1, "Data", "48K")
    _describe(tmp_path, "index2", 2, "Unified", "2048K")
    assert target._l1_data_bytes(str(tmp_path)) == 48 * 1024


def test_l1_data_cache_defaults_when_the_host_does_not_describe_it(tmp_path):
    assert target._l1_data_bytes(str(tmp_path / "missing")) == 32 * 1024
    _describe(tmp_path, "index0", 1, "Data", "unknown")
    assert target._l1_data_bytes(str(tmp_path)) == 32 * 1024


def test_pixel_k_blocks_fit_the_first_level_cache():
    # Both panels' blocks, a PANEL of floats per step of k each, in three quarters of L1.
    block = packed.PIXEL_K_BLOCK
    assert block & (block - 1) == 0
    assert 2 * block * packed.PANEL * 4 <= target.l1_data_bytes() * 3 // 4
    assert 4 * block * packed.PANEL * 4 > target.l1_data_bytes() * 3 // 4 or block == 16
