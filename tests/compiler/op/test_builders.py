"""Builder functions (``relay.add``, ``relay.sum``, ``relay.nn.dense``) build normalized calls."""

from __future__ import annotations

import builtins
import inspect

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call, Constant, Tuple, TupleGetItem, Var
from compiler.op.api import SCHEMA, schema_defaults
from compiler.op.registry import get_def, get_op


@pytest.fixture
def x():
    return relay.var("x", shape=(2, 3))


class TestReturns:
    def test_binary_builder_calls_the_registered_op(self, x):
        call = relay.add(x, x)
        assert isinstance(call, Call)
        assert call.op is get_op("add")
        assert call.args == (x, x)
        assert dict(call.attrs) == {}

    def test_python_scalars_become_tvm_default_constants(self, x):
        call = relay.multiply(x, 2.0)
        assert isinstance(call.args[1], Constant)
        assert call.args[1].data.dtype == np.float32
        assert relay.add(3, x).args[0].data.dtype == np.int32
        assert relay.logical_and(True, x).args[0].data.dtype == np.bool_

    def test_numpy_arrays_keep_their_dtype(self, x):
        call = relay.add(x, np.ones(3, dtype="float64"))
        assert call.args[1].data.dtype == np.float64
        assert call.args[1].data.shape == (3,)

    def test_operator_sugar_matches_the_builder(self, x):
        for sugar, name in ((x + x, "add"), (x - 1.0, "subtract"), (x * x, "multiply"),
                            (x / x, "divide"), (x < x, "less"), (-x, "negative")):  # fmt: skip
            assert sugar.op is get_op(name)
            assert sugar.attrs == relay.op.get_def(name).normalize_attrs({})

    def test_reduction_attributes_are_normalized(self, x):
        assert dict(relay.sum(x).attrs) == {"axis": None, "keepdims": False, "exclude": False}
        assert relay.sum(x, axis=1).attrs["axis"] == (1,)
        assert relay.mean(x, axis=[0, 1], keepdims=True).attrs == {
            "axis": (0, 1), "keepdims": True, "exclude": False,
        }  # fmt: skip
        assert relay.argmax(x, axis=0).attrs["select_last_index"] is False

    def test_shadowing_builders_do_not_break_the_builtins(self, x):
        assert relay.max(x, axis=0).op is get_op("max")
        assert relay.min(x).op is get_op("min")
        assert relay.abs(x).op is get_op("abs")
        assert relay.round(x).op is get_op("round")
        assert relay.all(relay.var("b", shape=(2,), dtype="bool")).op is get_op("all")
        assert relay.any(relay.var("b", shape=(2,), dtype="bool")).op is get_op("any")
        assert relay.sum(x).op is get_op("sum")
        # relay.Any (a dimension) and relay.any (an operator) are different things.
        assert relay.Any is not relay.any
        assert builtins.sum([1, 2]) == 3 and builtins.max(1, 2) == 2

    def test_cast_and_fills(self, x):
        assert relay.cast(x, "int32").attrs == {"dtype": "int32"}
        assert relay.cast(x, np.float16).attrs["dtype"] == "float16"
        assert relay.zeros((2, 3), "int8").attrs == {"shape": (2, 3), "dtype": "int8"}
        assert relay.ones([4]).attrs == {"shape": (4,), "dtype": "float32"}
        full = relay.full(relay.const(1.5), (2,))
        assert full.attrs == {"shape": (2,), "dtype": ""}
        assert relay.clip(x, 0, 6).attrs == {"a_min": 0.0, "a_max": 6.0}

    def test_concatenate_and_stack_wrap_a_list_in_a_tuple(self, x):
        call = relay.concatenate([x, x], axis=1)
        assert isinstance(call.args[0], Tuple)
        assert call.args[0].fields == (x, x)
        assert call.attrs == {"axis": 1}
        t = relay.var("t", relay.TupleType([relay.TensorType((2,)), relay.TensorType((2,))]))
        assert relay.stack(t).args[0] is t
        assert relay.stack(t).attrs == {"axis": 0}

    def test_split_returns_a_call_whose_items_are_projections(self, x):
        call = relay.split(x, 3, axis=1)
        assert call.op is get_op("split")
        assert call.attrs == {"indices_or_sections": 3, "axis": 1}
        item = call[2]
        assert isinstance(item, TupleGetItem)
        assert item.tuple_value is call and item.index == 2
        assert relay.split(x, [1, 2]).attrs["indices_or_sections"] == (1, 2)

    def test_shape_attributes_accept_constant_tensors(self, x):
        call = relay.reshape(x, relay.const(np.array([3, 2], dtype="int64")))
        assert call.attrs == {"newshape": (3, 2)}
        assert relay.reshape(x, -1).attrs == {"newshape": (-1,)}
        assert relay.broadcast_to(x, (4, 2, 3)).attrs == {"shape": (4, 2, 3)}

    def test_transform_defaults(self, x):
        assert relay.transpose(x).attrs == {"axes": None}
        assert relay.squeeze(x).attrs == {"axis": None}
        assert relay.expand_dims(x, 0).attrs == {"axis": 0, "num_newaxis": 1}
        assert relay.strided_slice(x, [0], [1]).attrs == {
            "begin": (0,), "end": (1,), "strides": None, "axes": None, "slice_mode": "end",
        }  # fmt: skip
        idx = relay.var("i", shape=(2,), dtype="int32")
        assert relay.take(x, idx).attrs == {"axis": None, "batch_dims": 0, "mode": "clip"}
        where = relay.where(relay.var("c", shape=(3,), dtype="bool"), x, 0.0)
        assert where.op is get_op("where") and len(where.args) == 3

    def test_nn_builders(self, x):
        w = relay.var("w", shape=(4, 3))
        assert relay.nn.dense(x, w).attrs == {"units": None, "out_dtype": ""}
        assert relay.nn.dense(x, w, units=4, out_dtype="float64").attrs["out_dtype"] == "float64"
        assert relay.nn.bias_add(x, relay.var("b", shape=(3,))).attrs == {"axis": 1}
        assert relay.nn.relu(x).op is get_op("nn.relu")
        assert relay.nn.softmax(x).attrs == {"axis": -1}
        assert relay.nn.log_softmax(x, axis=0).attrs == {"axis": 0}
        assert dict(relay.nn.batch_flatten(x).attrs) == {}
        a = relay.var("a", shape=(1, 2, 3))
        # TVM's positional order: out_dtype comes before the transpose flags.
        assert relay.nn.batch_matmul(a, a, "float64").attrs == {
            "out_dtype": "float64", "transpose_a": False, "transpose_b": True,
        }  # fmt: skip

    def test_builders_accept_variables_unchanged(self, x):
        assert isinstance(relay.exp(x).args[0], Var)
        assert relay.exp(x).args[0] is x


class TestMalformed:
    def test_wrong_attribute_kind_names_operator_and_attribute(self, x):
        with pytest.raises(TypeError, match="attribute axis of sum must hold ints"):
            relay.sum(x, axis=["a"])
        with pytest.raises(TypeError, match="attribute keepdims of mean must be a bool"):
            relay.mean(x, keepdims="yes")
        with pytest.raises(TypeError, match="attribute a_min of clip must be a number"):
            relay.clip(x, "low", 1.0)

    def test_unsupported_dtype(self, x):
        with pytest.raises(TypeError, match="unsupported dtype 'complex64'"):
            relay.cast(x, "complex64")
        with pytest.raises(TypeError, match=r"attribute out_dtype of nn\.dense"):
            relay.nn.dense(x, x, out_dtype="qint8")

    def test_choice_attributes_list_the_choices(self, x):
        idx = relay.var("i", shape=(2,), dtype="int32")
        with pytest.raises(TypeError, match="mode of take must be one of 'clip', 'wrap', 'fast'"):
            relay.take(x, idx, mode="raise")
        with pytest.raises(TypeError, match="slice_mode of strided_slice must be one of"):
            relay.strided_slice(x, [0], [1], slice_mode="stop")

    def test_unknown_attribute(self, x):
        from compiler.op.api import call_op

        with pytest.raises(TypeError, match=r"operator sum got unknown attribute.*axes"):
            call_op("sum", [x], axes=(0,))

    def test_concatenate_needs_a_sequence_or_expression(self):
        with pytest.raises(TypeError, match="expected a list or tuple of expressions"):
            relay.concatenate(5, axis=0)


class TestSchemaDefaults:
    def test_builder_signatures_show_the_schema_defaults(self):
        params = inspect.signature(relay.nn.conv2d).parameters
        for spec in get_def("nn.conv2d").attrs:
            assert params[spec.name].default == spec.default, spec.name
        assert inspect.signature(relay.sum).parameters["keepdims"].default is False

    def test_a_schema_parameter_must_name_an_attribute_with_a_default(self):
        with pytest.raises(ValueError, match=r"nn\.softmax has no attribute axes"):

            @schema_defaults("nn.softmax")
            def softmax(data: object, axes: int = SCHEMA) -> None:
                pass

        with pytest.raises(ValueError, match="reshape has no attribute newshape with a default"):

            @schema_defaults("reshape")
            def reshape(data: object, newshape: object = SCHEMA) -> None:
                pass
