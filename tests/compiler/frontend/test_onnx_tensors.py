"""The ONNX frontend's tensors (``compiler/frontend/onnx_tensors.py``): initializers as the
arrays ``from_onnx`` returns and the constants compiling makes of them. Needs only onnx."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper

from compiler import relay
from tests.compiler.frontend._onnx_helpers import model
from vm import VirtualMachine, cpu


def _dense() -> object:
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)]
    weights = {
        "w": np.arange(24, dtype=np.float32).reshape(6, 4),
        "b": np.ones(6, np.float32),
    }
    return model(nodes, {"x": ("float32", [2, 4])}, ["y"], weights)


# --- returns -----------------------------------------------------------------------------------


def test_initializers_become_constants_without_a_copy():
    mod, params = relay.frontend.from_onnx(_dense())
    bound = relay.bind_params_by_name(mod["main"], params)
    constants: list[np.ndarray] = []
    relay.analysis.post_order_visit(
        bound, lambda e: constants.append(e.data) if isinstance(e, relay.Constant) else None
    )
    assert any(c is params["w"] for c in constants)
    assert any(c is params["b"] for c in constants)


def test_a_copy_of_an_initializer_is_the_users_to_change_and_bind():
    mod, params = relay.frontend.from_onnx(_dense())
    mine = {name: value.copy() for name, value in params.items()}
    mine["w"][:] = 0.0
    exe = relay.vm.compile(mod, params=mine)
    out = VirtualMachine(exe, cpu()).invoke("main", np.ones((2, 4), np.float32))
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 6), np.float32))
    assert params["w"][1, 0] == 4.0  # the imported values are untouched


# --- traps -------------------------------------------------------------------------------------


def test_initializers_are_read_only():
    _, params = relay.frontend.from_onnx(_dense())
    assert not params["w"].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        params["w"][0, 0] = 1.0
