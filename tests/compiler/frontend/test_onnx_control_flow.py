"""ONNX ``If``, ``Loop`` and ``Scan`` as Relay control flow, run on the VM.

Returns group: one executable runs every trip count and every branch a run-time input
selects, matching onnx's reference evaluator (and onnxruntime where installed); loops
stop on their condition output, carry values whose shape changes, read values of the
enclosing graph, nest, scan forwards and backwards along any axis; a loop of thousands of
steps runs in one frame; an LSTM cell exported from a TorchScript loop matches torch.
Invalid group: bodies with the wrong number of inputs or outputs, a condition that is
not a bool, a loop-carried value that changes rank, and unsupported operators inside a
body are reported naming the node.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

pytest.importorskip("onnx")

import onnx
from onnx import helper, numpy_helper

import vm
from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from compiler.ir.expr import Function, If, Let
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    IR_VERSION,
    info,
    run_ort,
    run_reference,
)

F = np.float32


def _graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Mapping[str, np.ndarray] | None = None,
    name: str = "body",
) -> onnx.GraphProto:
    return helper.make_graph(
        list(nodes),
        name,
        list(inputs),
        list(outputs),
        initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )


def _model(graph: onnx.GraphProto, opset: int = 17) -> onnx.ModelProto:
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION
    )
    onnx.checker.check_model(proto)
    return proto


def _machine(proto: onnx.ModelProto, **kwargs: object) -> vm.VirtualMachine:
    mod, params = relay.frontend.from_onnx(proto, **kwargs)
    return vm.VirtualMachine(relay.vm.compile(mod, params=params))


def _check(
    machine: vm.VirtualMachine,
    proto: onnx.ModelProto,
    feeds: dict,
    reference: bool = True,
    ort: bool = True,
) -> list:
    """Run ``feeds`` on the VM; compare with onnxruntime where installed and with onnx's
    reference evaluator (whose Loop fails on scan outputs: ``reference=False`` for loops,
    whose tests check the values themselves too; it also supports only forward scans).
    ``ort=False`` skips onnxruntime, which cannot slice an empty scan input."""
    result = machine.invoke("main", **feeds)
    got = [r.numpy() for r in result] if isinstance(result, tuple) else [result.numpy()]
    oracles = [run_reference(proto, feeds)] if reference else []
    oracles += [run_ort(proto, feeds)] if HAVE_ORT and ort else []
    for expected in oracles:
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g.shape == e.shape and g.dtype == e.dtype, (k, g.shape, e.shape)
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=f"output {k}")
    return got


def _accumulating_loop(trip: bool = True, cond: bool = False) -> onnx.ModelProto:
    """``acc += x`` per step, scanning ``2 * acc``; the body's condition is ``sum(acc) <
    limit`` when ``cond``, else passed through."""
    nodes = [
        helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
        helper.make_node("Mul", ["acc_out", "two"], ["scan"]),
    ]
    if cond:
        nodes += [
            helper.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = _graph(
        nodes,
        [info("i", "int64", []), info("cond_in", "bool", []), info("acc_in", "float32", [3])],
        [
            info("cond_out", "bool", []),
            info("acc_out", "float32", [3]),
            info("scan", "float32", [3]),
        ],
        {"two": F(2)},
    )
    loop = helper.make_node(
        "Loop", ["M" if trip else "", "c0" if cond else "", "acc0"], ["acc", "scans"], body=body
    )
    inputs = [info("x", "float32", [3]), info("acc0", "float32", [3])]
    if trip:
        inputs.insert(0, info("M", "int64", []))
    if cond:
        inputs += [info("c0", "bool", []), info("limit", "float32", [])]
    return _model(
        _graph(
            [loop],
            inputs,
            [info("acc", "float32", [3]), info("scans", "float32", [None, 3])],
            name="main",
        )
    )


# --- returns: Loop -----------------------------------------------------------------------


def test_one_executable_runs_a_loop_for_every_trip_count() -> None:
    proto = _accumulating_loop()
    machine = _machine(proto)
    x, acc0 = np.arange(3, dtype=F), np.ones(3, F)
    for trips in (0, 1, 7):
        feeds = {"M": np.array(trips, "int64"), "x": x, "acc0": acc0}
        acc, scans = _check(machine, proto, feeds, reference=False)
        np.testing.assert_allclose(acc, acc0 + trips * x)
        steps = np.arange(1, trips + 1, dtype=F)[:, None]
        np.testing.assert_allclose(scans, 2 * (acc0 + steps * x).reshape(trips, 3))


def test_a_loop_stops_when_its_body_says_so() -> None:
    proto = _accumulating_loop(trip=False, cond=True)
    machine = _machine(proto)
    feeds = {"x": np.ones(3, F), "acc0": np.zeros(3, F), "c0": np.array(True)}
    for limit, steps in ((10.0, 4), (3.5, 2), (100.0, 34)):
        acc, scans = _check(machine, proto, {**feeds, "limit": np.array(limit, F)}, False)
        assert scans.shape[0] == steps
        np.testing.assert_allclose(acc, np.full(3, steps, F))
    # A false starting condition runs no step.
    feeds = {**feeds, "c0": np.array(False), "limit": np.array(9, F)}
    _, scans = _check(machine, proto, feeds, reference=False)
    assert scans.shape == (0, 3)


def test_a_loop_with_both_a_trip_count_and_a_condition_stops_at_the_first() -> None:
    proto = _accumulating_loop(trip=True, cond=True)
    machine = _machine(proto)
    feeds = {"x": np.ones(3, F), "acc0": np.zeros(3, F), "c0": np.array(True)}
    for trips, limit, steps in ((2, 100.0, 2), (50, 10.0, 4)):
        feeds = {**feeds, "M": np.array(trips, "int64"), "limit": np.array(limit, F)}
        _, scans = _check(machine, proto, feeds, reference=False)
        assert scans.shape[0] == steps


def test_thousands_of_steps_run_in_one_frame() -> None:
    proto = _accumulating_loop()
    mod, params = relay.frontend.from_onnx(proto)
    # A call depth limit far below the step count: a loop that stacked frames would hit
    # it... but tail calls count towards it too, so raise it and check the memory instead.
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    acc, scans = machine.invoke(
        "main", M=np.array(5000, "int64"), x=np.ones(3, F), acc0=np.zeros(3, F)
    )
    np.testing.assert_allclose(acc.numpy(), np.full(3, 5000, F))
    np.testing.assert_allclose(scans.numpy()[-1], np.full(3, 10000, F))


def test_a_loop_carried_value_may_change_shape() -> None:
    # Each step appends i to a growing vector: its length is known only at run time.
    body = _graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["fi", "zero"], ["piece"]),
            helper.make_node("Concat", ["v_in", "piece"], ["v_out"], axis=0),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        [info("i", "int64", []), info("cond_in", "bool", []), info("v_in", "float32", [None])],
        [info("cond_out", "bool", []), info("v_out", "float32", [None])],
        {"zero": np.array([0], "int64")},
    )
    proto = _model(
        _graph(
            [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
            [info("M", "int64", []), info("v0", "float32", [2])],
            [info("v", "float32", [None])],
            name="main",
        )
    )
    machine = _machine(proto)
    for trips in (0, 3, 6):
        feeds = {"M": np.array(trips, "int64"), "v0": np.full(2, 9, F)}
        (v,) = _check(machine, proto, feeds, reference=False)
        np.testing.assert_array_equal(v, [9, 9, *range(trips)])


def test_a_loop_body_reads_values_of_the_enclosing_graph_computed_once() -> None:
    body = _graph(
        [
            helper.make_node("MatMul", ["h_in", "w2"], ["h_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        [info("i", "int64", []), info("cond_in", "bool", []), info("h_in", "float32", [1, 4])],
        [info("cond_out", "bool", []), info("h_out", "float32", [1, 4])],
    )
    proto = _model(
        _graph(
            [
                helper.make_node("Mul", ["w", "scale"], ["w2"]),
                helper.make_node("Loop", ["M", "", "h0"], ["h"], body=body),
            ],
            [info("M", "int64", []), info("h0", "float32", [1, 4]), info("scale", "float32", [])],
            [info("h", "float32", [1, 4])],
            {"w": np.random.default_rng(0).standard_normal((4, 4)).astype(F) / 2},
            name="main",
        )
    )
    mod, _ = relay.frontend.from_onnx(proto)
    # The scaled weight is bound before the loop function, which closes over it.
    expr = mod["main"].body.tuple_value  # the loop's results, of which h is field 0
    assert isinstance(expr, Let) and not isinstance(expr.value, Function)
    assert isinstance(expr.body, Let) and isinstance(expr.body.value, Function)
    machine = _machine(proto)
    h0 = np.random.default_rng(1).standard_normal((1, 4)).astype(F)
    w = numpy_helper.to_array(proto.graph.initializer[0])
    for trips in (0, 2, 5):
        feeds = {"M": np.array(trips, "int64"), "h0": h0, "scale": np.array(0.5, F)}
        (h,) = _check(machine, proto, feeds, reference=False)
        np.testing.assert_allclose(h, h0 @ np.linalg.matrix_power(w * 0.5, trips), rtol=1e-5)


def test_loops_nest() -> None:
    inner = _graph(
        [
            helper.make_node("Cast", ["j"], ["j_f"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Add", ["a_in", "j_f"], ["a_out"]),
            helper.make_node("Identity", ["inner_ci"], ["inner_co"]),
        ],
        [info("j", "int64", []), info("inner_ci", "bool", []), info("a_in", "float32", [])],
        [info("inner_co", "bool", []), info("a_out", "float32", [])],
        name="inner",
    )
    outer = _graph(
        [
            helper.make_node("Add", ["i", "one"], ["n"]),
            helper.make_node("Loop", ["n", "", "s_in"], ["s_out"], body=inner),
            helper.make_node("Identity", ["ci"], ["co"]),
        ],
        [info("i", "int64", []), info("ci", "bool", []), info("s_in", "float32", [])],
        [info("co", "bool", []), info("s_out", "float32", [])],
        {"one": np.array(1, "int64")},
        name="outer",
    )
    proto = _model(
        _graph(
            [helper.make_node("Loop", ["M", "", "s0"], ["s"], body=outer)],
            [info("M", "int64", []), info("s0", "float32", [])],
            [info("s", "float32", [])],
            name="main",
        )
    )
    machine = _machine(proto)
    for trips in (0, 1, 4):
        feeds = {"M": np.array(trips, "int64"), "s0": np.array(0, F)}
        (s,) = _check(machine, proto, feeds, reference=False)
        # sum over i < trips of sum over j <= i of j
        assert s == sum(j for i in range(trips) for j in range(i + 1))


# --- returns: Scan -----------------------------------------------------------------------


def _scan_model(
    directions: tuple[int, int] = (0, 0), out_axis: int = 0, length: int | None = 5
) -> onnx.ModelProto:
    """A running sum over the rows of ``x``: state ``s``, scan output ``s`` after each row."""
    body = _graph(
        [
            helper.make_node("Add", ["s_in", "row"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y"]),
        ],
        [info("s_in", "float32", [3]), info("row", "float32", [3])],
        [info("s_out", "float32", [3]), info("y", "float32", [3])],
    )
    scan = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "ys"],
        body=body,
        num_scan_inputs=1,
        scan_input_directions=[directions[0]],
        scan_output_directions=[directions[1]],
        scan_output_axes=[out_axis],
    )
    return _model(
        _graph(
            [scan],
            [info("s0", "float32", [3]), info("x", "float32", [length, 3])],
            [info("s", "float32", [3]), info("ys", "float32", [None, None])],
            name="main",
        )
    )


@pytest.mark.parametrize("directions", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("out_axis", [0, 1, -1])
def test_scan_runs_in_every_direction_and_output_axis(
    directions: tuple[int, int], out_axis: int
) -> None:
    proto = _scan_model(directions, out_axis)
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(F)
    forward = directions == (0, 0) and out_axis == 0
    s, ys = _check(_machine(proto), proto, {"s0": np.zeros(3, F), "x": x}, reference=forward)
    sums = np.cumsum(x[::-1] if directions[0] else x, axis=0)
    np.testing.assert_allclose(s, sums[-1], rtol=1e-5)
    np.testing.assert_allclose(
        ys, np.moveaxis(sums[::-1] if directions[1] else sums, 0, out_axis), rtol=1e-5
    )


def test_one_scan_executable_runs_every_sequence_length() -> None:
    proto = _scan_model(length=None)
    machine = _machine(proto)
    for length in (0, 1, 6):
        x = np.arange(length * 3, dtype=F).reshape(length, 3)
        _, ys = _check(machine, proto, {"s0": np.ones(3, F), "x": x}, length > 0, length > 0)
        np.testing.assert_allclose(ys, 1 + np.cumsum(x, axis=0).reshape(length, 3))


# --- returns: If -------------------------------------------------------------------------


def _if_model(else_shape: tuple[int, ...] = (3,), outputs: int = 1) -> onnx.ModelProto:
    then = _graph(
        [helper.make_node("Mul", ["x", "x"], ["t0"]), helper.make_node("Neg", ["x"], ["t1"])],
        [],
        [info("t0", "float32", [3]), info("t1", "float32", [3])][:outputs],
        name="then",
    )
    other = _graph(
        [
            helper.make_node("Expand", ["x0", "shape"], ["e0"]),
            helper.make_node("Identity", ["x"], ["e1"]),
        ],
        [],
        [info("e0", "float32", list(else_shape)), info("e1", "float32", [3])][:outputs],
        {"shape": np.array(else_shape, "int64")},
        name="else",
    )
    names = ["y0", "y1"][:outputs]
    return _model(
        _graph(
            [
                helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
                helper.make_node("Greater", ["total", "zero"], ["positive"]),
                helper.make_node("Gather", ["x", "zero_i"], ["x0"], axis=0),
                helper.make_node("If", ["positive"], names, then_branch=then, else_branch=other),
            ],
            [info("x", "float32", [3])],
            [info(n, "float32", [None]) for n in names],
            {"zero": F(0), "zero_i": np.array(0, "int64")},
            name="main",
        )
    )


@pytest.mark.parametrize("outputs", [1, 2])
def test_one_executable_takes_either_branch_of_an_if(outputs: int) -> None:
    proto = _if_model(outputs=outputs)
    machine = _machine(proto)
    for x in ([1, 2, 3], [-1, -2, 0.5]):
        _check(machine, proto, {"x": np.array(x, F)})


def test_if_branches_may_differ_in_shape() -> None:
    proto = _if_model(else_shape=(2,))
    machine = _machine(proto)
    (positive,) = _check(machine, proto, {"x": np.array([1, 2, 3], F)})
    (negative,) = _check(machine, proto, {"x": np.array([-1, -2, 0.5], F)})
    assert positive.shape == (3,) and negative.shape == (2,)


def test_an_if_with_a_constant_empty_branch_keeps_the_other_branchs_run_time_length() -> None:
    # torchvision's batched_nms: "if no boxes, an empty tensor, else the kept indices".
    # The empty constant must not lend its size 0 to what follows the if.
    then = _graph(
        [helper.make_node("Identity", ["empty"], ["t"])], [], [info("t", "int64", [0])],
        {"empty": np.zeros(0, "int64")}, name="then",
    )  # fmt: skip
    other = _graph(
        [
            helper.make_node("Greater", ["x", "zero"], ["big"]),
            helper.make_node("NonZero", ["big"], ["nz"]),
            helper.make_node("Squeeze", ["nz", "axes"], ["e"]),
        ],
        [], [info("e", "int64", [None])], {"axes": np.array([0], "int64")}, name="else",
    )  # fmt: skip
    proto = _model(
        _graph(
            [
                helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
                helper.make_node("LessOrEqual", ["top", "zero"], ["none"]),
                helper.make_node("If", ["none"], ["kept"], then_branch=then, else_branch=other),
                helper.make_node("Gather", ["x", "kept"], ["y"], axis=0),
                helper.make_node("Shape", ["kept"], ["n"]),
            ],
            [info("x", "float32", [5])],
            [info("y", "float32", [None]), info("n", "int64", [1])],
            {"zero": F(0)},
            name="main",
        )
    )
    machine = _machine(proto)
    for x in ([1, -2, 3, 0, 4], [-1, -2, -3, 0, -4]):
        y, n = _check(machine, proto, {"x": np.array(x, F)})
        assert y.tolist() == [v for v in x if v > 0]
        assert n.tolist() == [len(y)]


def test_an_if_on_a_condition_known_at_import_keeps_only_its_branch() -> None:
    then = _graph([helper.make_node("Neg", ["x"], ["t"])], [], [info("t", "float32", [3])])
    other = _graph([helper.make_node("Abs", ["x"], ["e"])], [], [info("e", "float32", [3])])
    proto = _model(
        _graph(
            [helper.make_node("If", ["flag"], ["y"], then_branch=then, else_branch=other)],
            [info("x", "float32", [3])],
            [info("y", "float32", [3])],
            {"flag": np.array([False])},
            name="main",
        )
    )
    mod, _ = relay.frontend.from_onnx(proto)
    assert not isinstance(mod["main"].body, If) and "abs" in str(mod["main"])
    _check(_machine(proto), proto, {"x": np.array([-1, 2, -3], F)})


# --- returns: a loop exported from TorchScript -------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_an_lstm_cell_looped_in_torchscript_matches_torch_for_every_trip_count() -> None:
    import torch

    class Cells(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = torch.nn.LSTMCell(4, 8)

        def forward(self, xs: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
            h, c = torch.zeros(1, 8), torch.zeros(1, 8)
            for t in range(steps):
                h, c = self.cell(xs[t], (h, c))
            return h, c

    torch.manual_seed(0)
    module = torch.jit.script(Cells())
    xs = torch.randn(10, 1, 4)
    buffer = io.BytesIO()
    torch.onnx.export(
        module, (xs, 5), buffer, input_names=["xs", "steps"], dynamo=False, opset_version=17
    )
    proto = onnx.load_from_string(buffer.getvalue())
    assert "Loop" in {n.op_type for n in proto.graph.node}
    machine = _machine(proto)
    for steps in (0, 1, 10):
        got = machine.invoke("main", xs=xs.numpy(), steps=np.array(steps, "int64"))
        with torch.no_grad():
            expected = module(xs, steps)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6)


# --- invalid -----------------------------------------------------------------------------


def test_a_loop_body_with_the_wrong_inputs_is_refused_naming_the_node() -> None:
    body = _graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        [info("cond_in", "bool", [])],
        [info("cond_out", "bool", [])],
    )
    graph = _graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="loop_0")],
        [info("M", "int64", []), info("v0", "float32", [2])],
        [info("v", "float32", [2])],
        name="main",
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"'loop_0'.*body has 1 inputs"):
        relay.frontend.from_onnx(proto)


def _loop_around(step: onnx.NodeProto, shape: list | None, **initializers: np.ndarray):
    """A model looping ``step`` (``v_in`` -> ``v_out``) over ``M`` steps from ``v0``."""
    body = _graph(
        [step, helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        [info("i", "int64", []), info("cond_in", "bool", []), info("v_in", "float32", shape)],
        [info("cond_out", "bool", []), info("v_out", "float32", shape)],
        initializers,
    )
    loop = helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body, name="loop_0")
    inputs = [info("M", "int64", []), info("v0", "float32", [2])]
    return _model(_graph([loop], inputs, [info("v", "float32", [None])], name="main"))


def test_a_loop_carried_value_that_changes_rank_is_refused() -> None:
    step = helper.make_node("Unsqueeze", ["v_in", "zero"], ["v_out"])
    proto = _loop_around(step, None, zero=np.array([0], "int64"))
    with pytest.raises(
        OnnxImportError, match=r"'loop_0'.*value 0 starts as a float32 tensor of rank 1"
    ):
        relay.frontend.from_onnx(proto)


def test_an_if_condition_that_is_not_bool_is_refused() -> None:
    branch = _graph([helper.make_node("Neg", ["x"], ["t"])], [], [info("t", "float32", [3])])
    graph = _graph(
        [helper.make_node("If", ["x"], ["y"], then_branch=branch, else_branch=branch, name="if_0")],
        [info("x", "float32", [3])],
        [info("y", "float32", [3])],
        name="main",
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"'if_0'.*condition.*must be a bool tensor"):
        relay.frontend.from_onnx(proto)


def test_unsupported_operators_inside_a_loop_body_are_listed_up_front() -> None:
    proto = _loop_around(helper.make_node("Unique", ["v_in"], ["v_out"], name="deep"), [None])
    with pytest.raises(OpNotImplemented, match=r"Unique \(node 'deep'\)"):
        relay.frontend.from_onnx(proto)


def test_scan_before_opset_9_is_refused() -> None:
    body = _graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"])],
        [info("s_in", "float32", [3]), info("row", "float32", [3])],
        [info("s_out", "float32", [3])],
    )
    scan = helper.make_node("Scan", ["", "s0", "x"], ["s"], body=body, num_scan_inputs=1)
    graph = _graph(
        [scan],
        [info("s0", "float32", [1, 3]), info("x", "float32", [1, 5, 3])],
        [info("s", "float32", [1, 3])],
        name="main",
    )
    proto = _model(graph, opset=8)
    with pytest.raises(OpNotImplemented, match="Scan before opset 9"):
        relay.frontend.from_onnx(proto)
