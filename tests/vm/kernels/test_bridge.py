"""Tests of vm.kernels.bridge: handler codes that compiled code may carry between processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vm.kernels import bridge

ROOT = Path(__file__).resolve().parents[3]

_CODES = """
import sys
for name in sys.argv[1:]:
    __import__(name)
from vm.kernels import blas, pool_loops
print(blas._CONV_PACKED, blas._MATMUL, pool_loops._MAX_POOL, pool_loops._AVG_POOL)
"""


def _codes(*first: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CODES, *first], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_handler_codes_do_not_depend_on_which_module_was_imported_first() -> None:
    # Kernels cached on disk carry the codes as constants.
    assert _codes("vm.kernels.pool_loops") == _codes("vm.kernels.blas")


def test_a_second_handler_of_the_same_name_is_invalid() -> None:
    name = "tests.bridge.twice"
    bridge.register(name, lambda: None, 0)
    with pytest.raises(ValueError, match=r"'tests\.bridge\.twice' clashes with"):
        bridge.register(name, lambda: None, 0)
