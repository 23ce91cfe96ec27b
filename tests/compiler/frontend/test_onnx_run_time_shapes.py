"""ONNX shape computations whose values are known only when the model runs (the shape of
a NonZero or TopK result, or a shape fed as an input) import as Relay's dynamic operators
(``shape_of``, ``dyn.reshape``, ``dyn.full``, ``dyn.broadcast_to``, ``arange``,
``dyn.strided_slice``): one executable runs every value and agrees with onnxruntime
(returns); a shape that cannot apply fails when it runs, naming it (traps); a shape of
unknown length is refused at import (invalid). Detection exports are built from these."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper

import vm
from compiler import relay
from compiler.frontend import OpNotImplemented
from tests.compiler.frontend._onnx_helpers import as_list, assert_outputs_close, model, run_ort

RNG = np.random.default_rng(23)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype="int64")


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def sparse(*shape: int, density: float) -> np.ndarray:
    return np.where(RNG.random(shape) < density, randn(*shape), 0).astype("float32")


def machine_for(proto) -> vm.VirtualMachine:
    mod, params = relay.frontend.from_onnx(proto)
    return vm.VirtualMachine(relay.vm.compile(mod, params=params))


def agree_on_every_feed(proto, feeds_list) -> None:
    """One executable for ``proto`` matches onnxruntime on each of ``feeds_list``."""
    machine = machine_for(proto)
    for feeds in feeds_list:
        got = as_list(machine.invoke("main", **feeds))
        got = [g.numpy() if hasattr(g, "numpy") else np.asarray(g) for g in got]
        assert_outputs_close(got, run_ort(proto, feeds), rtol=1e-6, atol=1e-6)


def nonzero_count(x: str = "x", out: str = "count") -> list:
    """Nodes giving ``out``, the 1-element count of non-zeros of ``x`` (a run-time shape)."""
    return [
        helper.make_node("NonZero", [x], [f"{out}_where"]),
        helper.make_node("Shape", [f"{out}_where"], [f"{out}_shape"]),
        helper.make_node("Slice", [f"{out}_shape", "one", "two"], [out]),
    ]


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize("density", [0.0, 0.4, 1.0])
def test_shape_and_size_of_a_nonzero_result_are_read_when_it_runs(density):
    nodes = [
        helper.make_node("NonZero", ["x"], ["where"]),
        helper.make_node("Shape", ["where"], ["shape"]),
        helper.make_node("Shape", ["where"], ["tail"], start=-1),
        helper.make_node("Size", ["where"], ["size"]),
    ]
    proto = model(nodes, {"x": ("float32", (3, 5))}, ["shape", "tail", "size"], opset=17)
    agree_on_every_feed(proto, [{"x": sparse(3, 5, density=density)}])


def test_constant_of_shape_fills_a_shape_fed_at_run_time():
    nodes = [
        helper.make_node(
            "ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", 7, [1], [3])
        )
    ]
    proto = model(nodes, {"s": ("int64", (2,))}, ["y"])
    agree_on_every_feed(proto, [{"s": ints(2, 3)}, {"s": ints(0, 4)}, {"s": ints(5, 1)}])


def test_reshape_to_a_shape_fed_at_run_time_with_zero_and_minus_one():
    proto = model(
        [helper.make_node("Reshape", ["x", "s"], ["y"])],
        {"x": ("float32", (2, 3, 4)), "s": ("int64", (3,))},
        ["y"],
    )
    x = randn(2, 3, 4)
    feeds = [{"x": x, "s": ints(*s)} for s in ((0, -1, 2), (4, 3, 2), (-1, 1, 1))]
    agree_on_every_feed(proto, feeds)


@pytest.mark.parametrize(
    ("shape", "targets"),
    [((3, 1), [(2, 3, 4), (1, 1, 1), (3, 3, 1)]), ((1, 4), [(5, 1), (2, 4)])],
)
def test_expand_to_a_shape_fed_at_run_time_broadcasts_both_ways(shape, targets):
    proto = model(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        {"x": ("float32", shape), "s": ("int64", (len(targets[0]),))},
        ["y"],
    )
    x = randn(*shape)
    agree_on_every_feed(proto, [{"x": x, "s": ints(*t)} for t in targets])


def test_tile_by_repeats_fed_at_run_time():
    proto = model(
        [helper.make_node("Tile", ["x", "r"], ["y"])],
        {"x": ("float32", (2, 3)), "r": ("int64", (2,))},
        ["y"],
    )
    x = randn(2, 3)
    agree_on_every_feed(proto, [{"x": x, "r": ints(*r)} for r in ((1, 1), (3, 2), (0, 2))])


def test_tile_of_rows_counted_at_run_time():
    nodes = [
        helper.make_node("NonZero", ["x"], ["where"]),
        helper.make_node("Tile", ["where", "r"], ["y"]),
    ]
    proto = model(nodes, {"x": ("float32", (4, 4))}, ["y"], {"r": ints(2, 3)})
    agree_on_every_feed(proto, [{"x": sparse(4, 4, density=d)} for d in (0.2, 0.7)])


def test_range_up_to_a_count_known_at_run_time():
    nodes = [
        *nonzero_count(),
        helper.make_node("Squeeze", ["count", "zero"], ["limit"]),
        helper.make_node("Range", ["start", "limit", "step"], ["y"]),
    ]
    constants = {
        "one": ints(1),
        "two": ints(2),
        "zero": ints(0),
        "start": np.array(0, "int64"),
        "step": np.array(2, "int64"),
    }
    proto = model(nodes, {"x": ("float32", (3, 4))}, ["y"], constants)
    agree_on_every_feed(proto, [{"x": sparse(3, 4, density=d)} for d in (0.0, 0.5, 1.0)])


def test_slice_with_bounds_and_steps_fed_at_run_time_on_chosen_axes():
    proto = model(
        [helper.make_node("Slice", ["x", "b", "e", "axes", "st"], ["y"])],
        {
            "x": ("float32", (4, 5, 6)),
            "b": ("int64", (2,)),
            "e": ("int64", (2,)),
            "st": ("int64", (2,)),
        },
        ["y"],
        {"axes": ints(2, 0)},
    )
    x = randn(4, 5, 6)
    feeds = [
        {"x": x, "b": ints(1, 0), "e": ints(5, 3), "st": ints(2, 1)},
        {"x": x, "b": ints(-1, 3), "e": ints(-7, -10), "st": ints(-2, -1)},
        {"x": x, "b": ints(0, 0), "e": ints(2**62, 2**62), "st": ints(1, 1)},
    ]
    agree_on_every_feed(proto, feeds)


def test_a_detection_style_chain_keeps_the_top_scores_above_a_threshold():
    # As detection exports do per class: the scores above a threshold, then the top
    # min(k, count) of them, padded with zeros up to a fixed length.
    nodes = [
        helper.make_node("Greater", ["x", "threshold"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["where"]),
        helper.make_node("Transpose", ["where"], ["rows"], perm=[1, 0]),
        helper.make_node("GatherND", ["x", "rows"], ["kept"]),
        helper.make_node("Shape", ["kept"], ["count"]),
        helper.make_node("Min", ["count", "k"], ["take"]),
        helper.make_node("TopK", ["kept", "take"], ["top", "order"]),
        helper.make_node("Shape", ["top"], ["got"]),
        helper.make_node("Sub", ["k", "got"], ["missing"]),
        helper.make_node("ConstantOfShape", ["missing"], ["pad"]),
        helper.make_node("Concat", ["top", "pad"], ["y"], axis=0),
    ]
    constants = {"threshold": np.array(0.5, "float32"), "k": ints(4)}
    proto = model(nodes, {"x": ("float32", (12,))}, ["y", "order"], constants)
    agree_on_every_feed(proto, [{"x": randn(12)} for _ in range(4)] + [{"x": -np.ones(12, "f")}])


# --- traps -------------------------------------------------------------------------------------


def test_expand_to_a_shape_that_does_not_broadcast_fails_naming_the_shapes():
    proto = model(
        [helper.make_node("Expand", ["x", "s"], ["y"])],
        {"x": ("float32", (3, 2)), "s": ("int64", (2,))},
        ["y"],
    )
    machine = machine_for(proto)
    with pytest.raises(vm.VMError, match=r"cannot broadcast \(3, 2\) to shape \(3, 4\)"):
        machine.invoke("main", x=randn(3, 2), s=ints(3, 4))
    # The machine is still usable afterwards.
    x = randn(3, 2)
    np.testing.assert_array_equal(machine.invoke("main", x=x, s=ints(1, 2)).numpy(), x)


# --- invalid -----------------------------------------------------------------------------------


def test_a_run_time_shape_of_unknown_length_is_refused_naming_the_input():
    proto = model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape_by_s")],
        {"x": ("float32", (2, 3)), "s": ("int64", ("n",))},
        {"y": ("float32", ("a", "b"))},
    )
    with pytest.raises(OpNotImplemented, match=r"reshape_by_s.*input 1 \(shape\).*\(\?\)"):
        relay.frontend.from_onnx(proto)
