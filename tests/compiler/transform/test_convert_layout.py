"""ConvertLayout: the transposes an NHWC network is built with move past the operators that
do not care about the layout and cancel, leaving one at the input and one at the output, with
every value unchanged (returns); transposes that cannot move stay, and are never computed
twice (returns); desired layouts are checked as TVM checks them (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.ir.expr import Var
from compiler.relay import testing
from tests.compiler.transform.util import assert_results_match, calls

TO_NCHW = {"nn.conv2d": ["NCHW", "default"]}
RNG = np.random.default_rng(5)


def _convert(mod: relay.IRModule, desired: dict = TO_NCHW) -> relay.IRModule:
    with relay.transform.PassContext(opt_level=3):
        return relay.transform.ConvertLayout(desired)(mod)


def _data_transposes(mod: relay.IRModule) -> int:
    """Transposes of values computed in the network (not of a parameter: a weight)."""
    return sum(not isinstance(c.args[0], Var) for c in calls(mod["main"], "transpose"))


def _block() -> tuple[relay.IRModule, list[np.ndarray]]:
    """Two NHWC convolutions with a bias, batch norm, relu, a residual add and a pool."""
    x = relay.var("x", shape=(1, 6, 6, 4))
    w1 = relay.const(RNG.standard_normal((3, 3, 4, 4)).astype("float32"))
    w2 = relay.const(RNG.standard_normal((1, 1, 4, 4)).astype("float32"))
    stats = [relay.const(RNG.uniform(0.5, 1.5, 4).astype("float32")) for _ in range(4)]
    y = relay.nn.conv2d(x, w1, padding=(1, 1), data_layout="NHWC", kernel_layout="HWIO")
    y = relay.nn.bias_add(y, relay.const(np.arange(4, dtype="float32")), axis=3)
    y = relay.nn.relu(relay.nn.batch_norm(y, *stats, axis=3)[0])
    z = relay.nn.conv2d(y, w2, data_layout="NHWC", kernel_layout="HWIO")
    z = relay.multiply(z + y, relay.const(np.float32(0.5)))
    z = relay.nn.max_pool2d(z, pool_size=(2, 2), strides=(2, 2), layout="NHWC")
    z = relay.nn.relu(z - relay.const(np.full((1, 1, 4), 0.25, "float32")))
    mod = relay.IRModule.from_expr(relay.Function([x], z))
    return mod, [RNG.standard_normal((1, 6, 6, 4)).astype("float32")]


# --- returns: the transposes cancel -------------------------------------------------------------


def test_an_nhwc_block_keeps_a_transpose_at_its_input_and_one_at_its_output():
    before, args = _block()
    assert _data_transposes(before) == 5
    after = _convert(before)
    assert len(calls(after["main"], "transpose")) == 2
    assert after["main"].body.op.name == "transpose"
    assert_results_match(before, after, args)
    got = vm.VirtualMachine(relay.vm.compile(after)).invoke("main", *args).numpy()
    np.testing.assert_allclose(got, relay.create_executor("debug", before).evaluate()(*args),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_a_constant_operand_is_laid_out_as_the_moved_data_is():
    before, _ = _block()
    after = _convert(before)
    subtract = calls(after["main"], "subtract")[0]
    assert subtract.args[1].data.shape == (1, 4, 1, 1)


def test_an_nhwc_resnet_is_the_nchw_one_with_its_weights_transposed():
    nchw, params = testing.resnet.get_workload(num_layers=18, image_shape=(3, 32, 32))
    nhwc, _ = testing.resnet.get_workload(num_layers=18, image_shape=(32, 32, 3), layout="NHWC")
    after = _convert(nhwc)
    # The input's, and the pooled features' before batch_flatten.
    assert _data_transposes(after) == 2
    hwio = {k: v.transpose(2, 3, 1, 0) if v.ndim == 4 else v for k, v in params.items()}
    x = RNG.standard_normal((1, 3, 32, 32)).astype("float32")
    want = vm.VirtualMachine(relay.vm.compile(nchw, params=params)).invoke("main", x).numpy()
    machine = vm.VirtualMachine(relay.vm.compile(after, params=hwio))
    got = machine.invoke("main", np.ascontiguousarray(x.transpose(0, 2, 3, 1))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_nhwc_request_keeps_the_nchw_operators_and_the_answers():
    before, args = _block()
    after = _convert(before, {"nn.conv2d": ["NHWC", "HWIO"], "nn.max_pool2d": ["NHWC"]})
    assert all(c.attrs["data_layout"] == "NCHW" for c in calls(after["main"], "nn.conv2d"))
    assert_results_match(before, after, args)


# --- returns: what cannot move stays -------------------------------------------------------------


def test_a_transpose_a_reader_cannot_take_stays_and_is_not_computed_twice():
    x = relay.var("x", shape=(1, 4, 4, 2))
    w = relay.const(RNG.standard_normal((1, 1, 2, 2)).astype("float32"))
    y = relay.nn.conv2d(x, w, data_layout="NHWC", kernel_layout="HWIO")
    # The softmax reads the NHWC value along its last axis: the transpose before it stays.
    out = relay.Tuple([relay.nn.relu(y), relay.nn.softmax(y, axis=-1)])
    before = relay.IRModule.from_expr(relay.Function([x], out))
    after = _convert(before)
    assert len(calls(after["main"], "transpose")) == len(calls(before["main"], "transpose"))
    assert_results_match(before, after, [RNG.standard_normal((1, 4, 4, 2)).astype("float32")])


def test_an_nchw_module_is_left_as_it_is():
    x = relay.var("x", shape=(1, 2, 4, 4))
    y = relay.nn.relu(relay.nn.conv2d(x, relay.var("w", shape=(2, 2, 3, 3))))
    before = relay.IRModule.from_expr(relay.Function([x, relay.var("w", shape=(2, 2, 3, 3))], y))
    after = _convert(before)
    assert not calls(after["main"], "transpose")


# --- invalid -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("desired", "error", "message"),
    [
        ([("nn.conv2d", "NCHW")], TypeError, "desired_layouts must be a dict"),
        ({"nn.dense": ["NCHW"]}, ValueError, "'nn.dense' has no layout to convert"),
        ({"nn.conv2d": "NCHW"}, ValueError, "must be a list such as"),
        ({"nn.conv2d": ["NCHW16c", "default"]}, ValueError, "data layout 'NCHW16c'"),
        ({"nn.conv2d": ["NCHW", "OIHW16o"]}, ValueError, "kernel layout"),
    ],
)
def test_desired_layouts_are_checked_when_the_pass_is_made(desired, error, message):
    with pytest.raises(error, match=message):
        relay.transform.ConvertLayout(desired)


def test_an_nhwc_mobilenet_is_the_nchw_one_with_its_weights_transposed():
    nchw, params = testing.create_workload(
        testing.mobilenet.get_net(1, 10, (3, 32, 32), alpha=0.25)
    )
    nhwc_net = testing.mobilenet.get_net(1, 10, (32, 32, 3), layout="NHWC", alpha=0.25)
    after = _convert(relay.IRModule.from_expr(nhwc_net))
    # The pooled features' before batch_flatten (the input's transposes a parameter).
    assert _data_transposes(after) == 1

    def laid_out(name: str, value: np.ndarray) -> np.ndarray:
        if value.ndim != 4:
            return value
        # TVM's NHWC MobileNet: HWOI depthwise weights, HWIO others.
        return value.transpose((2, 3, 0, 1) if "depthwise" in name else (2, 3, 1, 0))

    hwio = {k: laid_out(k, v) for k, v in params.items()}
    x = RNG.standard_normal((1, 3, 32, 32)).astype("float32")
    want = vm.VirtualMachine(relay.vm.compile(nchw, params=params)).invoke("main", x).numpy()
    machine = vm.VirtualMachine(relay.vm.compile(after, params=hwio))
    got = machine.invoke("main", np.ascontiguousarray(x.transpose(0, 2, 3, 1))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
