"""TVM's relay.testing workloads: the MLP, ResNets, MobileNet, VGG and SqueezeNet build,
type-check, compile and compute what numpy and the reference interpreter compute (returns);
unknown depths, versions, layouts, sizes and parameter names are refused by name (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.ir.expr import Call
from compiler.ir.visitor import free_vars, post_order
from compiler.relay import testing


def _convolutions(mod: relay.IRModule) -> list[Call]:
    return [
        n
        for n in post_order(mod["main"])
        if isinstance(n, Call) and getattr(n.op, "name", "") == "nn.conv2d"
    ]


def _run(mod: relay.IRModule, params: dict, data: np.ndarray) -> np.ndarray:
    exe = relay.vm.compile(mod, params=params)
    return vm.VirtualMachine(exe, vm.cpu()).invoke("main", data).numpy()


def test_the_mlp_computes_what_numpy_computes_with_its_weights():
    mod, params = testing.mlp.get_workload(batch_size=2, num_classes=10)
    assert {k: v.shape for k, v in params.items()} == {
        "fc1_weight": (128, 784), "fc1_bias": (128,), "fc2_weight": (64, 128),
        "fc2_bias": (64,), "fc3_weight": (10, 64), "fc3_bias": (10,),
    }  # fmt: skip
    data = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype("float32")
    h = data.reshape(2, -1)
    for layer in ("fc1", "fc2"):
        h = np.maximum(h @ params[f"{layer}_weight"].T + params[f"{layer}_bias"], 0)
    logits = h @ params["fc3_weight"].T + params["fc3_bias"]
    want = np.exp(logits - logits.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(_run(mod, params, data), want, rtol=1e-4, atol=1e-6)


def _he(name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Weights that keep the signal alive through relu layers, so that the logits differ
    (the Xavier default lets a deep random network's logits fade to nearly equal)."""
    if not name.endswith("_weight"):
        return testing.Xavier()(name, shape, dtype, rng)
    scale = np.sqrt(6.0 / int(np.prod(shape[1:])))
    return (rng.uniform(-1.0, 1.0, shape) * scale).astype(dtype)


def _logits_workload(net: relay.Function) -> tuple[relay.IRModule, dict]:
    """``net`` without its final softmax, with :func:`_he` weights."""
    logits = net.body.args[0]
    return testing.create_workload(relay.Function(free_vars(logits), logits), initializer=_he)


@pytest.mark.parametrize(
    "net",
    [
        lambda: testing.resnet.get_net(1, 10, num_layers=18, image_shape=(3, 32, 32)),
        lambda: testing.mobilenet.get_net(1, 10, image_shape=(3, 32, 32)),
        lambda: testing.vgg.get_net(1, 10, (3, 32, 32), "float32", batch_norm=True),
        lambda: testing.squeezenet.get_net(1, (3, 32, 32), 10, "1.1", "float32"),
    ],
    ids=["resnet18", "mobilenet", "vgg11_bn", "squeezenet1.1"],
)
def test_a_small_network_computes_on_the_vm_what_the_reference_interpreter_does(net):
    mod, params = _logits_workload(net())
    data = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype("float32")
    want = np.asarray(relay.create_executor("debug", mod, params=params).evaluate()(data))
    got = _run(mod, params, data)
    assert got.shape == (1, 10) and want.std() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_networks_end_in_a_softmax_over_the_classes():
    mod, params = testing.resnet.get_workload(
        batch_size=2, num_classes=10, num_layers=18, image_shape=(3, 32, 32)
    )
    # A 3x3 stem, two units of two 3x3 convolutions in each of four stages, and a 1x1
    # projection where each of the last three stages starts.
    assert len(_convolutions(mod)) == 1 + 16 + 3
    data = np.random.default_rng(2).standard_normal((2, 3, 32, 32)).astype("float32")
    np.testing.assert_allclose(_run(mod, params, data).sum(axis=1), [1.0, 1.0], rtol=1e-5)
    mod, _ = testing.mobilenet.get_workload(num_classes=10)
    assert len(_convolutions(mod)) == 1 + 13 * 2
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 10), float32]"
    mod, params = testing.vgg.get_workload(num_classes=10, image_shape=(3, 64, 64), num_layers=16)
    assert len(_convolutions(mod)) == 13 and params["fc6_weight"].shape == (4096, 512 * 2 * 2)
    for version, fires in (("1.0", 8), ("1.1", 8)):
        mod, _ = testing.squeezenet.get_workload(num_classes=10, version=version)
        assert len(_convolutions(mod)) == 1 + fires * 3 + 1
        assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 10), float32]"


def test_resnet_50_is_built_of_bottleneck_units_and_a_7x7_stem():
    mod, params = testing.resnet.get_workload(num_layers=50, num_classes=1000)
    convs = _convolutions(mod)
    assert len(convs) == 1 + 16 * 3 + 4
    assert params["conv0_weight"].shape == (64, 3, 7, 7)
    assert params["stage4_unit3_conv3_weight"].shape == (2048, 512, 1, 1)
    assert params["fc1_weight"].shape == (1000, 2048)
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 1000), float32]"


def test_the_same_seed_gives_the_same_weights():
    net = testing.mlp.get_net(batch_size=1)
    _, first = testing.create_workload(net, seed=3)
    _, again = testing.create_workload(net, seed=3)
    _, other = testing.create_workload(net, seed=4)
    for name, value in first.items():
        np.testing.assert_array_equal(again[name], value)
    assert not np.array_equal(other["fc1_weight"], first["fc1_weight"])
    assert not first["fc1_bias"].any()


def test_the_tvm_import_spellings_reach_the_workloads():
    import compiler.tvm.relay.testing as tvm_testing

    from compiler.tvm import relay as tvm_relay

    assert tvm_testing.resnet.get_workload is testing.resnet.get_workload
    assert tvm_relay.testing.mlp is testing.mlp


# --- invalid -------------------------------------------------------------------------------------


def test_an_unknown_depth_or_layout_is_refused_by_name():
    with pytest.raises(ValueError, match="18, 34, 50, 101, 152"):
        testing.resnet.get_workload(num_layers=19)
    with pytest.raises(ValueError, match="NHWC"):
        testing.resnet.get_workload(layout="NHWC")
    with pytest.raises(ValueError, match="NHWC"):
        testing.mobilenet.get_workload(layout="NHWC")
    with pytest.raises(ValueError, match="11, 13, 16, 19"):
        testing.vgg.get_workload(num_layers=12)
    with pytest.raises(ValueError, match="multiple of 32"):
        testing.vgg.get_workload(image_shape=(3, 48, 48))
    with pytest.raises(ValueError, match=r"'2\.0'"):
        testing.squeezenet.get_workload(version="2.0")


def test_a_parameter_the_initializer_cannot_name_is_refused():
    x = relay.var("data", shape=(2,))
    w = relay.var("scale", shape=(2,))
    with pytest.raises(ValueError, match="'scale'"):
        testing.create_workload(relay.Function([x, w], x * w))
