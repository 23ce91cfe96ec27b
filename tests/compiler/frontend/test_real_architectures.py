"""Real architectures end to end (returns): built from transformers' (and, where its wheel
loads, torchvision's) configs with random weights, exported to ONNX, imported, compiled at
``opt_level=3`` and run on the VM, against onnxruntime.

Skipped without torch, transformers and onnxruntime (``pip install -e '.[models]'``). By
default one small model runs (MobileNetV2: depthwise and 1x1 convolutions, clip, global
pooling); ``RELAYVM_ALL_MODELS=1`` runs every model of :mod:`benchmarks.wild_models`
(minutes each on two cores, most of it compiling kernels the first time).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")

import vm  # noqa: E402
from benchmarks import wild_models  # noqa: E402
from compiler import relay  # noqa: E402

#: The model CI-sized runs check; the others need RELAYVM_ALL_MODELS=1.
DEFAULT = "mobilenet_v2"
ALL = os.environ.get("RELAYVM_ALL_MODELS") == "1"


def _params() -> list:
    params = []
    for wild in wild_models.available():
        marks = [] if wild.name == DEFAULT else [pytest.mark.models]
        if wild.name != DEFAULT and not ALL:
            marks.append(pytest.mark.skip(reason="set RELAYVM_ALL_MODELS=1 to run every model"))
        params.append(pytest.param(wild, id=wild.name, marks=marks))
    return params


@pytest.mark.parametrize("wild", _params())
def test_a_real_architecture_matches_onnxruntime(wild: wild_models.WildModel) -> None:
    data, feeds = wild_models.export(wild)
    mod, params = relay.frontend.from_onnx(data)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, params=params)
    result = vm.VirtualMachine(exe).invoke("main", **feeds)
    got = [r.numpy() for r in result] if isinstance(result, tuple) else [result.numpy()]
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        scale = float(np.abs(e).max()) or 1.0
        assert float(np.abs(g - e).max()) / scale < 1e-4, wild.name


def _detector_onnx(classes: int = 3) -> bytes:
    """A single-shot detector: transformers' MobileNetV2 features, a convolutional head
    giving every 7x7 cell a box and class scores, then ONNX's own post-processing appended
    to the exported graph (NonMaxSuppression, and the gathers of the kept boxes, scores
    and labels), as detection exports end."""
    import io

    import onnx
    import torch
    import transformers
    from onnx import helper, numpy_helper

    class Detector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            config = transformers.MobileNetV2Config()
            self.backbone = transformers.MobileNetV2Model(config)
            self.boxes = torch.nn.Conv2d(1280, 4, 1)
            self.scores = torch.nn.Conv2d(1280, classes, 1)

        def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = self.backbone(pixel_values, return_dict=True).last_hidden_state
            corners = torch.sigmoid(self.boxes(features)).flatten(2).transpose(1, 2)  # 1, N, 4
            low, high = corners[..., :2], corners[..., 2:]
            boxes = torch.cat([torch.minimum(low, high), torch.maximum(low, high)], dim=2)
            return boxes, torch.sigmoid(self.scores(features)).flatten(2)  # 1, C, N

    torch.manual_seed(0)
    module = Detector().eval()
    wild_models._randomize(module, 0)
    image = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            module, (torch.from_numpy(image),), buffer, input_names=["pixel_values"],
            output_names=["boxes", "scores"], opset_version=17, dynamo=False,
        )  # fmt: skip
    proto = onnx.load_from_string(buffer.getvalue())
    graph = proto.graph
    constants = {
        "limit": np.array([5], "int64"), "iou": np.array([0.4], "float32"),
        "zero": np.array([0], "int64"),
        "box_column": np.array([2], "int64"), "class_column": np.array([1], "int64"),
    }  # fmt: skip
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
    # The score threshold is an input, so that one executable keeps different box counts.
    graph.input.append(helper.make_tensor_value_info("threshold", onnx.TensorProto.FLOAT, [1]))
    graph.node.extend(
        [
            helper.make_node(
                "NonMaxSuppression", ["boxes", "scores", "limit", "iou", "threshold"], ["kept"]
            ),
            helper.make_node("Squeeze", ["boxes", "zero"], ["all_boxes"]),
            helper.make_node("Gather", ["kept", "box_column"], ["box_index"], axis=1),
            helper.make_node("Squeeze", ["box_index"], ["box_flat"]),
            helper.make_node("Gather", ["all_boxes", "box_flat"], ["det_boxes"], axis=0),
            helper.make_node("GatherND", ["scores", "kept"], ["det_scores"]),
            helper.make_node("Gather", ["kept", "class_column"], ["labels_2d"], axis=1),
            helper.make_node("Squeeze", ["labels_2d"], ["det_labels"]),
        ]
    )
    del graph.output[:]
    graph.output.extend(
        [
            helper.make_tensor_value_info("det_boxes", onnx.TensorProto.FLOAT, ["k", 4]),
            helper.make_tensor_value_info("det_scores", onnx.TensorProto.FLOAT, ["k"]),
            helper.make_tensor_value_info("det_labels", onnx.TensorProto.INT64, ["k"]),
        ]
    )
    onnx.checker.check_model(proto)
    return proto.SerializeToString()


def test_a_detector_with_non_maximum_suppression_matches_onnxruntime_on_every_image() -> None:
    data = _detector_onnx()
    mod, params = relay.frontend.from_onnx(data)
    with relay.transform.PassContext(opt_level=3):
        machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    counts = set()
    for scale, threshold in ((1.0, 0.0), (3.0, 0.5), (0.2, 0.6), (1.0, 0.99)):
        image = (rng.standard_normal((1, 3, 224, 224)) * scale).astype("float32")
        feeds = {"pixel_values": image, "threshold": np.array([threshold], "float32")}
        got = [r.numpy() for r in machine.invoke("main", **feeds)]
        expected = session.run(None, feeds)
        assert [g.shape for g in got] == [e.shape for e in expected]
        np.testing.assert_array_equal(got[2], expected[2])  # labels
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-4, atol=1e-5)
        counts.add(got[2].shape[0])
    assert len(counts) > 1, counts  # one executable, several box counts
