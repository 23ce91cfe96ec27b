"""TVM's relay.testing workloads: the MLP, ResNets, MobileNet, VGG, SqueezeNet, DenseNets,
Inception v3, the DCGAN generator and the unrolled LSTM build, type-check, compile and compute
what numpy and the reference interpreter compute (returns); unknown depths, sizes, versions,
layouts, image shapes, step counts and parameter names are refused by name (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.ir.expr import Call
from compiler.ir.visitor import free_vars, post_order
from compiler.relay import testing


def _calls(mod: relay.IRModule, op: str) -> list[Call]:
    return [
        n
        for n in post_order(mod["main"])
        if isinstance(n, Call) and getattr(n.op, "name", "") == op
    ]


def _convolutions(mod: relay.IRModule) -> list[Call]:
    return _calls(mod, "nn.conv2d")


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


def _logits(net: relay.Function) -> relay.Function:
    """``net`` without its final softmax."""
    logits = net.body.args[0]
    return relay.Function(free_vars(logits), logits)


def _logits_workload(net: relay.Function) -> tuple[relay.IRModule, dict]:
    """``net`` without its final softmax, with :func:`_he` weights."""
    return testing.create_workload(_logits(net), initializer=_he)


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


@pytest.mark.parametrize(
    ("net", "data_shape"),
    [
        (lambda: testing.densenet.get_net(4, 2, (2, 1), 1, 10, (3, 56, 56)), (1, 3, 56, 56)),
        (
            lambda: _logits(testing.inception_v3.get_net(1, 10, (3, 299, 299), "float32", 1 / 16)),
            (1, 3, 299, 299),
        ),
        (lambda: testing.dcgan.get_net(1, 8, oshape=(1, 64, 64), ngf=2), (1, 8)),
    ],
    ids=["densenet", "inception_v3", "dcgan"],
)
def test_a_narrow_densenet_inception_or_dcgan_computes_on_the_vm_what_the_interpreter_does(
    net, data_shape
):
    # Narrow, not small: the heads' 7x7 and 8x8 pools need DenseNet's and Inception's maps
    # to stay large, so the widths shrink instead (a two-block DenseNet halves less).
    mod, params = testing.create_workload(net(), initializer=_he)
    data = np.random.default_rng(5).standard_normal(data_shape).astype("float32")
    want = np.asarray(relay.create_executor("debug", mod, params=params).evaluate()(data))
    got = _run(mod, params, data)
    assert got.shape == want.shape and want.std() > 1e-3
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_densenet_concatenates_its_layers_and_narrows_between_blocks_as_tvms_does():
    mod, params = testing.densenet.get_workload()
    # A stem, two convolutions per dense layer, a 1x1 one per transition: 120 + the dense.
    assert len(_convolutions(mod)) == 1 + 2 * (6 + 12 + 24 + 16) + 3
    assert len(_calls(mod, "concatenate")) == 4 and len(_calls(mod, "nn.avg_pool2d")) == 3 + 1
    assert params["conv1_weight"].shape == (64, 3, 7, 7)
    assert params["conv2d_1_0_0_weight"].shape == (4 * 32, 64, 1, 1)
    assert params["conv2d_2_3_15_weight"].shape == (32, 4 * 32, 3, 3)
    # A block hands on its layers' outputs (6 * 32 channels); the transition narrows to half
    # of the running count (64 + 6 * 32) // 2.
    assert params["conv_t_0_weight"].shape == (128, 192, 1, 1)
    assert params["batch2_gamma"].shape == (16 * 32,)
    assert params["dense_weight"].shape == (1000, 16 * 32)
    # TVM's DenseNet ends in the dense layer: no softmax.
    assert mod["main"].body.op.name == "nn.bias_add"
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(4, 1000), float32]"
    # TVM's 169 starts with 69 channels, not the paper's 64.
    sizes = {161: (96, (6, 12, 36, 24)), 169: (69, (6, 12, 32, 32)), 201: (64, (6, 12, 48, 32))}
    for size, (stem, blocks) in sizes.items():
        mod, params = testing.densenet.get_workload(size, classes=10, batch_size=1)
        assert len(_convolutions(mod)) == 1 + 2 * sum(blocks) + 3
        assert params["conv1_weight"].shape == (stem, 3, 7, 7)
        assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 10), float32]"


def test_inception_v3_has_94_convolutions_and_tvms_parameter_names():
    mod, params = testing.inception_v3.get_workload()
    assert len(_convolutions(mod)) == 5 + 3 * 7 + 4 + 4 * 10 + 6 + 2 * 9
    assert len(params) == 94 * 5 + 2
    assert params["conv_conv1_weight"].shape == (32, 3, 3, 3)
    assert params["conv_bn_moving_var"].shape == (32,)
    assert params["mixed_tower_conv_1_conv1_weight"].shape == (64, 48, 5, 5)
    assert params["mixed_4_tower_1_conv_4_conv1_weight"].shape == (192, 128, 1, 7)
    assert params["mixed_8_tower_1_conv_3_conv1_weight"].shape == (192, 192, 3, 3)
    assert params["mixed_10_tower_1_mixed_conv_1_conv1_weight"].shape == (384, 384, 3, 1)
    assert params["fc1_weight"].shape == (1000, 2048) and params["fc2_bias"].shape == (1000,)
    assert mod["main"].body.op.name == "nn.softmax"
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(1, 1000), float32]"


def test_the_dcgan_generator_grows_a_code_into_a_64x64_image():
    mod, params = testing.dcgan.get_workload(batch_size=2)
    assert {k: v.shape for k, v in params.items() if k.endswith("_weight")} == {
        "dense_weight": (4 * 4 * 1024, 100), "g2_deconv_weight": (1024, 512, 4, 4),
        "g3_deconv_weight": (512, 256, 4, 4), "g4_deconv_weight": (256, 128, 4, 4),
        "g5_deconv_weight": (128, 3, 4, 4),
    }  # fmt: skip
    assert len(_calls(mod, "nn.conv2d_transpose")) == 4
    assert len(_calls(mod, "nn.batch_norm")) == 3 and "g2_batch_norm_gamma" in params
    assert mod["main"].body.op.name == "tanh"
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(2, 3, 64, 64), float32]"


def test_the_lstm_unrolls_one_cell_function_per_step():
    mod, params = testing.lstm.get_workload(iterations=4, num_hidden=8, batch_size=2)
    names = [p.name_hint for p in mod["main"].params]
    step = ["data", "i2h_{}_weight", "i2h_{}_bias", "h2h_{}_weight", "h2h_{}_bias"]
    assert names == [name.format(i) for i in range(4) for name in step]
    assert params["i2h_3_weight"].shape == (32, 8) and params["h2h_0_bias"].shape == (32,)
    cells = [
        n
        for n in post_order(mod["main"])
        if isinstance(n, Call) and isinstance(n.op, relay.Function)
    ]
    assert len(cells) == 4
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(2, 8), float32]"


def _uniform(name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Every parameter random, so that the biases count too."""
    return rng.uniform(-1.0, 1.0, shape).astype(dtype)


def test_the_lstm_computes_what_numpy_computes_with_its_weights():
    steps, hidden, batch = 3, 4, 2
    net = testing.lstm.get_net(steps, hidden, batch_size=batch)
    mod, params = testing.create_workload(net, initializer=_uniform)
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((batch, hidden)).astype("float32") for _ in range(steps)]

    def sigmoid(v: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-v))

    h = c = np.zeros((batch, hidden), "float32")
    for i, x in enumerate(xs):
        gates = x @ params[f"i2h_{i}_weight"].T + params[f"i2h_{i}_bias"]
        gates = gates + h @ params[f"h2h_{i}_weight"].T + params[f"h2h_{i}_bias"]
        gate_in, forget, candidate, gate_out = np.split(gates, 4, axis=1)
        c = sigmoid(forget) * c + sigmoid(gate_in) * np.tanh(candidate)
        h = sigmoid(gate_out) * np.tanh(c)
    exe = relay.vm.compile(mod, params=params)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", *xs).numpy()
    np.testing.assert_allclose(got, h, rtol=1e-5, atol=1e-6)
    interpreted = relay.create_executor("debug", mod, params=params).evaluate()(*xs)
    np.testing.assert_allclose(np.asarray(interpreted), h, rtol=1e-5, atol=1e-6)


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
    for name in ("densenet", "inception_v3", "dcgan", "lstm"):
        assert getattr(tvm_relay.testing, name) is getattr(testing, name)


# --- invalid -------------------------------------------------------------------------------------


def test_an_unknown_depth_or_layout_is_refused_by_name():
    with pytest.raises(ValueError, match="18, 34, 50, 101, 152"):
        testing.resnet.get_workload(num_layers=19)
    with pytest.raises(ValueError, match="'HWCN' is not supported: 'NCHW' or 'NHWC'"):
        testing.resnet.get_workload(layout="HWCN")
    with pytest.raises(ValueError, match="'NCHW4c' is not supported: 'NCHW' or 'NHWC'"):
        testing.mobilenet.get_workload(layout="NCHW4c")
    with pytest.raises(ValueError, match="11, 13, 16, 19"):
        testing.vgg.get_workload(num_layers=12)
    with pytest.raises(ValueError, match="multiple of 32"):
        testing.vgg.get_workload(image_shape=(3, 48, 48))
    with pytest.raises(ValueError, match=r"'2\.0'"):
        testing.squeezenet.get_workload(version="2.0")


def test_an_unknown_densenet_size_a_too_small_image_or_an_nhwc_dcgan_is_refused_by_name():
    with pytest.raises(ValueError, match="densenet_size must be one of 121, 161, 169, 201"):
        testing.densenet.get_workload(densenet_size=122)
    with pytest.raises(ValueError, match=r"image_shape \(3, 64, 64\).*at least 221"):
        testing.densenet.get_workload(image_shape=(3, 64, 64))
    with pytest.raises(ValueError, match="block_config"):
        testing.densenet.get_net(64, 32, ())
    with pytest.raises(ValueError, match=r"image_shape \(3, 224, 224\).*at least 299"):
        testing.inception_v3.get_workload(image_shape=(3, 224, 224))
    with pytest.raises(ValueError, match=r"alpha 0\.01"):
        testing.inception_v3.get_net(1, 10, (3, 299, 299), "float32", alpha=0.01)
    with pytest.raises(ValueError, match=r"oshape \(3, 32, 32\).*\(channels, 64, 64\)"):
        testing.dcgan.get_workload(1, oshape=(3, 32, 32))
    with pytest.raises(ValueError, match=r"layout 'NHWC'.*'NCHW'"):
        testing.dcgan.get_workload(1, layout="NHWC")
    with pytest.raises(ValueError, match="iterations 0"):
        testing.lstm.get_workload(iterations=0, num_hidden=4)


def test_a_parameter_the_initializer_cannot_name_is_refused():
    x = relay.var("data", shape=(2,))
    w = relay.var("scale", shape=(2,))
    with pytest.raises(ValueError, match="'scale'"):
        testing.create_workload(relay.Function([x, w], x * w))
