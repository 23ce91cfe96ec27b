"""``relay.frontend.from_pytorch``'s interface: ``input_infos`` forms, ``main``'s signature
and ``params``, ``custom_convert_map``, and its errors.

Returns: every input_infos form; inputs first, then weights named by their state_dict keys;
custom converters (new and overriding); import-time shape arithmetic. Traps: the
OpNotImplemented listing of every unsupported operator; branches on run-time values.
Invalid: input_infos that do not match forward; non-TorchScript modules. Skipped without
torch.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compiler import relay  # noqa: E402
from compiler.frontend import OpNotImplemented, PyTorchImportError  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
]


class _AddWeighted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("offset", torch.arange(3, dtype=torch.float32))

    def forward(self, x, y):
        return self.fc(x) * y + self.offset


def _trace(module, *inputs):
    return torch.jit.trace(module.eval(), inputs, check_trace=False)


def _evaluate(mod, params, **feeds):
    result = relay.create_executor("debug", mod, params=params).evaluate()(**feeds)
    if isinstance(result, tuple):
        return [np.asarray(r.numpy() if hasattr(r, "numpy") else r) for r in result]
    return np.asarray(result.numpy() if hasattr(result, "numpy") else result)


# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "infos",
    [
        [("x", (2, 4)), ("y", (2, 3))],
        [("x", [2, 4]), ("y", ((2, 3), "float32"))],
        [("x", ((2, 4), torch.float32)), ("y", ([2, 3], np.dtype("float32")))],
    ],
    ids=["shapes", "shape-and-dtype-string", "torch-and-numpy-dtypes"],
)
def test_input_infos_forms_name_inputs_then_weights(infos):
    torch.manual_seed(0)
    model = _AddWeighted()
    x, y = torch.rand(2, 4), torch.rand(2, 3)
    mod, params = relay.frontend.from_pytorch(_trace(model, x, y), infos)
    names = [p.name_hint for p in mod["main"].params]
    assert names[:2] == ["x", "y"]
    assert sorted(names[2:]) == ["fc.bias", "fc.weight", "offset"]
    assert sorted(params) == ["fc.bias", "fc.weight", "offset"]
    np.testing.assert_array_equal(params["fc.weight"], model.fc.weight.detach().numpy())
    got = _evaluate(mod, params, x=x.numpy(), y=y.numpy())
    np.testing.assert_allclose(got, model(x, y).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_default_dtype_applies_to_inputs_without_one():
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2.0

    traced = _trace(Double(), torch.rand(3, dtype=torch.float64))
    mod, _ = relay.frontend.from_pytorch(traced, [("x", (3,))], default_dtype="float64")
    assert mod["main"].params[0].type_annotation.dtype == "float64"
    got = _evaluate(mod, {}, x=np.arange(3, dtype="float64"))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [0.0, 2.0, 4.0])


def test_tuple_outputs_and_import_time_shape_arithmetic():
    class Shapes(torch.nn.Module):
        def forward(self, x):
            batch, channels = x.shape[0], x.shape[1]
            flat = x.view(batch, -1)
            a, b = flat.split([channels, flat.shape[1] - channels], dim=1)
            return a.permute(1, 0).contiguous(), b[:, 1::2].unsqueeze(0), flat.select(1, -1)

    x = torch.rand(2, 3, 4)
    mod, params = relay.frontend.from_pytorch(_trace(Shapes(), x), [("x", (2, 3, 4))])
    got = _evaluate(mod, params, x=x.numpy())
    for g, e in zip(got, Shapes()(x)):
        np.testing.assert_array_equal(g, e.numpy())


def test_custom_convert_map_adds_an_operator():
    class Erfinv(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfinv(x) + 1.0

    calls = []

    def convert(inputs, input_types):
        calls.append(input_types)
        # A stand-in with a known result: erfinv(x) ~ x for the test's purpose.
        return relay.negative(relay.negative(inputs[0]))

    x = torch.rand(4) * 0.5
    mod, params = relay.frontend.from_pytorch(
        _trace(Erfinv(), x), [("x", (4,))], custom_convert_map={"aten::erfinv": convert}
    )
    assert calls == [["float32"]]
    got = _evaluate(mod, params, x=x.numpy())
    np.testing.assert_allclose(got, x.numpy() + 1.0, rtol=1e-6)


def test_custom_convert_map_overrides_a_builtin_converter():
    model = torch.nn.Sequential(torch.nn.ReLU())
    x = torch.tensor([-1.0, 2.0])
    mod, params = relay.frontend.from_pytorch(
        _trace(model, x),
        [("x", (2,))],
        custom_convert_map={"aten::relu": lambda inputs, types: relay.negative(inputs[0])},
    )
    np.testing.assert_array_equal(_evaluate(mod, params, x=x.numpy()), [1.0, -2.0])


def test_facade_exports_from_pytorch():
    from compiler.tvm import relay as tvm_relay

    assert tvm_relay.frontend.from_pytorch is relay.frontend.from_pytorch


# --- traps -------------------------------------------------------------------------------------


def test_op_not_implemented_lists_every_unsupported_operator():
    class Odd(torch.nn.Module):
        def forward(self, x):
            y = torch.cumsum(x, 0) + torch.flip(x, [0])
            return torch.special.erfinv(y * 0.1) + torch.cumsum(y, 0)

    with pytest.raises(OpNotImplemented) as info:
        relay.frontend.from_pytorch(_trace(Odd(), torch.rand(3)), [("x", (3,))])
    message = str(info.value)
    assert isinstance(info.value, NotImplementedError)
    assert "3 operators" in message
    assert "aten::cumsum (x2)" in message
    assert "aten::erfinv" in message and "aten::flip" in message
    assert "custom_convert_map" in message


def test_branch_on_a_run_time_tensor_is_reported():
    class Branch(torch.nn.Module):
        def forward(self, x):
            if bool(x.sum() > 0):
                return x * 2.0
            return x - 1.0

    with pytest.raises(OpNotImplemented, match=r"prim::If \(condition known only at run time\)"):
        relay.frontend.from_pytorch(torch.jit.script(Branch()), [("x", (3,))])


# --- invalid -----------------------------------------------------------------------------------


def test_wrong_number_of_input_infos_names_both_counts():
    traced = _trace(_AddWeighted(), torch.rand(2, 4), torch.rand(2, 3))
    with pytest.raises(PyTorchImportError, match=r"gives 1 input\(s\) but .* takes 2"):
        relay.frontend.from_pytorch(traced, [("x", (2, 4))])


@pytest.mark.parametrize(
    ("infos", "pattern"),
    [
        ("x", "must be a list"),
        ([("x",)], r"input_infos\[0\] must be a \(name, shape\)"),
        ([("", (2, 4)), ("y", (2, 3))], "name must be a non-empty string"),
        ([("x", (2, "a")), ("y", (2, 3))], "shape must be a sequence of ints"),
        ([("x", (2, -1)), ("y", (2, 3))], "negative dimension"),
        ([("x", ((2, 4), "floatish")), ("y", (2, 3))], "dtype 'floatish'"),
        ([("x", (2, 4)), ("x", (2, 3))], "more than one input"),
    ],
)
def test_malformed_input_infos_are_rejected_by_name(infos, pattern):
    traced = _trace(_AddWeighted(), torch.rand(2, 4), torch.rand(2, 3))
    with pytest.raises(PyTorchImportError, match=pattern):
        relay.frontend.from_pytorch(traced, infos)


def test_shape_mismatch_names_the_node():
    traced = _trace(_AddWeighted(), torch.rand(2, 4), torch.rand(2, 3))
    with pytest.raises(PyTorchImportError, match=r"PyTorch node aten::linear"):
        relay.frontend.from_pytorch(traced, [("x", (2, 5)), ("y", (2, 3))])


def test_a_scripted_check_that_fails_reports_its_message():
    scripted = torch.jit.script(torch.nn.BatchNorm2d(3).eval())
    with pytest.raises(PyTorchImportError, match=r"expected 4D input \(got 3D input\)"):
        relay.frontend.from_pytorch(scripted, [("x", (1, 3, 8))])


def test_a_plain_nn_module_is_refused():
    with pytest.raises(TypeError, match="TorchScript module"):
        relay.frontend.from_pytorch(torch.nn.ReLU(), [("x", (2,))])
