"""The converter table covers every operator the frontend promises (returns)."""

from __future__ import annotations

from compiler.frontend.onnx_registry import supported_ops

PROMISED = (
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Sin",
    "Cos", "Tanh", "Sigmoid", "Erf", "Floor", "Ceil", "Round", "Sign", "Relu", "LeakyRelu",
    "PRelu", "Clip", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "Not", "And", "Or", "Where", "Cast", "Identity", "Dropout", "MatMul", "Gemm", "Conv",
    "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
    "BatchNormalization", "LayerNormalization", "InstanceNormalization", "Softmax",
    "LogSoftmax", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split",
    "Slice", "Gather", "Expand", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
    "ReduceProd", "ArgMax", "ArgMin", "Shape", "Constant", "ConstantOfShape", "Pad",
    "Upsample", "Resize",
)  # fmt: skip


def test_every_promised_operator_has_a_converter():
    supported = supported_ops()
    assert supported == sorted(supported)
    missing = sorted(set(PROMISED) - set(supported))
    assert not missing, f"no converter for {missing}"
