"""DynamicToStatic: shapes the types know become constants and dyn.* operators their static
forms, with the same values (returns); shapes known only at run time stay (returns); an
ill-typed module is refused (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.typing import RelayTypeError
from tests.compiler.transform.util import assert_results_match, assert_same, op_names, parse

to_static = relay.transform.DynamicToStatic()


def _run_on_vm(mod: relay.IRModule, *args: np.ndarray) -> list[np.ndarray]:
    out = vm.VirtualMachine(relay.vm.compile(mod), vm.cpu()).invoke("main", *args)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _shape_chain_module(x: relay.Var) -> relay.IRModule:
    """Each dyn.* operator, sized by shape arithmetic on ``x``'s shape, as imported
    models do it."""
    rows = relay.strided_slice(relay.shape_of(x), [0], [1])
    flat = relay.reshape(x, relay.concatenate([rows, relay.const([-1], "int32")], 0))
    size = relay.reshape(relay.ndarray_size(x, "int32"), [1])
    begin = relay.concatenate([relay.const([0], "int32"), size - relay.const([23], "int32")], 0)
    part = relay.strided_slice(
        flat, begin, relay.const([2, 5], "int32"), relay.const([1, 2], "int32")
    )
    body = relay.Tuple(
        [
            flat + relay.zeros(relay.shape_of(flat), "float32"),
            part * relay.full(relay.const(3.0), relay.shape_of(part), "float32"),
            relay.broadcast_to(relay.const(1.0), relay.shape_of(x))
            - relay.ones(relay.shape_of(x), "float32"),
        ]
    )
    return relay.IRModule.from_expr(relay.Function([x], body))


# --- returns -------------------------------------------------------------------------------------


def test_every_dynamic_operator_of_a_static_input_becomes_static_with_the_same_values():
    before = _shape_chain_module(relay.var("x", shape=(2, 3, 4)))
    after = to_static(before)
    names = op_names(after)
    assert not {n for n in names if n.startswith("dyn.")}, names
    assert not names & {"shape_of", "ndarray_size"}, names
    assert str(after["main"].checked_type.ret_type) == (
        "(Tensor[(2, 12), float32], Tensor[(2, 2), float32], Tensor[(2, 3, 4), float32])"
    )
    data = np.arange(24, dtype="float32").reshape(2, 3, 4)
    assert_results_match(before, after, [data])
    for got, want in zip(_run_on_vm(after, data), _run_on_vm(before, data)):
        np.testing.assert_array_equal(got, want)


def test_a_reshape_to_a_computed_shape_reads_as_the_static_reshape():
    before = parse(
        """
        def @main(%x: Tensor[(2, 6), float32]) {
          dyn.reshape(%x, shape_of(%x))
        }"""
    )
    assert_same(
        to_static(before),
        """
        def @main(%x: Tensor[(2, 6), float32]) {
          reshape(%x, newshape=[2, 6])
        }""",
    )


def test_shapes_known_only_at_run_time_stay_dynamic():
    x = relay.var("x", shape=(relay.Any(), 4))
    before = relay.IRModule.from_expr(
        relay.Function([x], relay.reshape(x, relay.shape_of(x)) + relay.const(1.0))
    )
    after = to_static(before)
    assert {"shape_of", "dyn.reshape"} <= op_names(after)
    data = np.ones((3, 4), "float32")
    np.testing.assert_array_equal(_run_on_vm(after, data)[0], data + 1)


def test_the_tvm_spelling_runs_in_a_sequential_at_opt_level_three():
    before = _shape_chain_module(relay.var("x", shape=(2, 3, 4)))
    seq = relay.transform.Sequential(
        [relay.transform.InferType(), relay.transform.DynamicToStatic()]
    )
    with relay.transform.PassContext(opt_level=3):
        after = seq(before)
    assert not {n for n in op_names(after) if n.startswith("dyn.")}
    with relay.transform.PassContext(opt_level=2):
        kept = seq(before)
    assert "dyn.reshape" in op_names(kept)


# --- invalid -------------------------------------------------------------------------------------


def test_an_ill_typed_module_is_refused_naming_the_operator():
    bad = parse(
        """
        def @main(%x: Tensor[(2, 3), float32], %s: Tensor[(2, 2), int32]) {
          dyn.reshape(%x, %s)
        }"""
    )
    with pytest.raises(RelayTypeError, match=r"dyn\.reshape.*one-dimensional"):
        to_static(bad)
