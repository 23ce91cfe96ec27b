"""TVM's ``create_executor`` and ``bind_params_by_name`` scripts, with only the imports changed.

Returns: every kind ("debug", "graph", "vm", "aot") gives the reference result on TVM's
targets. Invalid: "aot" on a program with control flow names what it cannot run.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler import tvm
from compiler.tvm import relay


def add_module():
    x = relay.var("x", shape=(2, 3), dtype="float32")
    y = relay.var("y", shape=(2, 3), dtype="float32")
    return tvm.IRModule.from_expr(relay.Function([x, y], relay.add(x, y) * y))


@pytest.mark.parametrize("kind", ["debug", "graph", "vm", "aot"])
@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=skylake -mattr=+avx2", "c"])
def test_create_executor_with_each_kind(kind, target):
    mod = add_module()
    dev = tvm.cpu(0)
    x_data = np.random.rand(2, 3).astype("float32")
    y_data = np.random.rand(2, 3).astype("float32")
    ref_res = (x_data + y_data) * y_data
    op_res = relay.create_executor(kind, mod=mod, device=dev, target=target).evaluate()(
        x_data, y_data
    )
    np.testing.assert_allclose(op_res, ref_res, rtol=1e-5)


def test_create_executor_aot_rejects_control_flow_naming_it():
    x = relay.var("x", shape=(2,), dtype="float32")
    cond = relay.var("c", shape=(), dtype="bool")
    mod = tvm.IRModule.from_expr(relay.Function([x, cond], relay.If(cond, x, x + x)))
    executor = relay.create_executor("aot", mod=mod, device=tvm.cpu(0), target="llvm")
    with pytest.raises(ValueError, match=r"control flow .*create_executor\('vm'\)"):
        executor.evaluate()


def test_bind_params_by_name_then_build():
    mod = add_module()
    params = {"y": np.full((2, 3), 2.0, "float32")}
    mod["main"] = relay.build_module.bind_params_by_name(mod["main"], params)
    assert [p.name_hint for p in mod["main"].params] == ["x"]
    x_data = np.random.rand(2, 3).astype("float32")
    func = relay.create_executor("vm", mod=mod, device=tvm.cpu(), target="llvm").evaluate()
    np.testing.assert_allclose(func(x_data), (x_data + 2) * 2, rtol=1e-6)
