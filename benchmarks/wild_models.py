"""Real architectures, as users bring them: built from their libraries' configs with random
weights (no downloads), exported to ONNX with ``torch.onnx.export``.

Benchmarks layer; imports torch and transformers (optional extras, ``pip install -e
'.[models]'``), and torchvision where it loads. :func:`available` lists the models this
environment can build; :func:`export` gives one as ONNX bytes with its inputs.
``bench_wild`` times them against onnxruntime and
``tests/compiler/frontend/test_real_architectures.py`` checks them.
"""

from __future__ import annotations

import importlib.util
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WildModel:
    """One architecture: where it comes from, how to build it, and its example input."""

    name: str
    source: str  # "transformers" or "torchvision"
    build: Callable[[], object]  # -> torch.nn.Module in eval mode
    inputs: Callable[[np.random.Generator], dict[str, np.ndarray]]
    #: What the model computes, for the tables.
    what: str
    #: Paths of the convolutions whose outputs are a detector's raw logits and box
    #: offsets, with the spread each should have (see :func:`_calibrate`).
    heads: tuple[tuple[str, float, float], ...] = ()


def _image(size: int = 224) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {"pixel_values": rng.standard_normal((1, 3, size, size)).astype("float32")}


def _tokens(length: int, vocab: int) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {"input_ids": rng.integers(0, vocab, (1, length)).astype("int64")}


class _Outputs:
    """Wraps a transformers model so that export sees plain tensors, not output objects."""

    def __new__(cls, model: object, field: str) -> object:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *args: object) -> object:
                return getattr(self.model(*args, return_dict=True), field)

        return Wrapped().eval()


def _transformers(config: str, model: str, field: str, **kwargs: object):
    def build() -> object:
        import transformers

        cfg = getattr(transformers, config)(**kwargs)
        return _Outputs(getattr(transformers, model)(cfg).eval(), field)

    return build


def _torchvision(name: str, **kwargs: object):
    def build() -> object:
        import torchvision

        builder: object = torchvision.models
        for part in name.split("."):
            builder = getattr(builder, part)
        return builder(weights=None, **kwargs).eval()  # type: ignore[operator]

    return build


_BERT = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12}
_GPT2 = {"n_embd": 768, "n_layer": 12, "n_head": 12}

MODELS = (
    WildModel(
        "resnet50",
        "transformers",
        _transformers("ResNetConfig", "ResNetForImageClassification", "logits"),
        _image(),
        "ResNet-50 classifier",
    ),
    WildModel(
        "mobilenet_v2",
        "transformers",
        _transformers("MobileNetV2Config", "MobileNetV2ForImageClassification", "logits"),
        _image(),
        "MobileNetV2 classifier",
    ),
    WildModel(
        "efficientnet_b0",
        "transformers",
        _transformers(
            "EfficientNetConfig",
            "EfficientNetForImageClassification",
            "logits",
            width_coefficient=1.0,
            depth_coefficient=1.0,
            image_size=224,
            dropout_rate=0.2,
            hidden_dim=1280,
        ),
        _image(),
        "EfficientNet-B0 classifier",
    ),
    WildModel(
        "deeplabv3_mobilenet_v2",
        "transformers",
        _transformers(
            "MobileNetV2Config",
            "MobileNetV2ForSemanticSegmentation",
            "logits",
            num_labels=21,
        ),
        _image(256),
        "DeepLabV3 segmentation on MobileNetV2",
    ),
    WildModel(
        "segformer_b0",
        "transformers",
        _transformers(
            "SegformerConfig", "SegformerForSemanticSegmentation", "logits", num_labels=21
        ),
        _image(256),
        "SegFormer-B0 segmentation (bilinear upsampling in its decoder)",
    ),
    WildModel(
        "convnext_tiny",
        "transformers",
        _transformers("ConvNextConfig", "ConvNextForImageClassification", "logits"),
        _image(),
        "ConvNeXt-T classifier",
    ),
    WildModel(
        "regnet_y_040",
        "transformers",
        _transformers("RegNetConfig", "RegNetForImageClassification", "logits"),
        _image(),
        "RegNetY-4.0GF classifier (grouped 3x3 convolutions, squeeze-excite)",
    ),
    WildModel(
        "vit_base",
        "transformers",
        _transformers("ViTConfig", "ViTForImageClassification", "logits"),
        _image(),
        "ViT-B/16 classifier",
    ),
    WildModel(
        "bert_base",
        "transformers",
        _transformers("BertConfig", "BertModel", "last_hidden_state", **_BERT),
        _tokens(128, 30522),
        "BERT-base encoder, 128 tokens",
    ),
    WildModel(
        "gpt2",
        "transformers",
        _transformers("GPT2Config", "GPT2Model", "last_hidden_state", **_GPT2),
        _tokens(128, 50257),
        "GPT-2 (124M) decoder, 128 tokens",
    ),
    WildModel(
        "detr_resnet50",
        "transformers",
        _transformers(
            "DetrConfig",
            "DetrForObjectDetection",
            "pred_boxes",
            use_timm_backbone=False,
            use_pretrained_backbone=False,
        ),
        _image(320),
        "DETR detector (ResNet-50 backbone), boxes of 100 queries",
    ),
    WildModel("resnet18", "torchvision", _torchvision("resnet18"), _image(), "ResNet-18"),
    WildModel(
        "ssdlite320_mobilenet_v3_large",
        "torchvision",
        _torchvision("detection.ssdlite320_mobilenet_v3_large", weights_backbone=None),
        _image(320),
        "SSDlite320 detector with non-maximum suppression",
    ),
    WildModel(
        "retinanet_resnet50_fpn",
        "torchvision",
        _torchvision(
            "detection.retinanet_resnet50_fpn", weights_backbone=None, min_size=320, max_size=320
        ),
        _image(320),
        "RetinaNet detector (ResNet-50 FPN) at 320x320",
        heads=(
            ("head.classification_head.cls_logits", 1.5, -2.0),
            ("head.regression_head.bbox_reg", 0.3, 0.0),
        ),
    ),
    WildModel(
        "fasterrcnn_mobilenet_v3_large_320_fpn",
        "torchvision",
        # Every detection kept (no score threshold): the comparison covers 100 boxes.
        _torchvision(
            "detection.fasterrcnn_mobilenet_v3_large_320_fpn",
            weights_backbone=None,
            box_score_thresh=0.0,
        ),
        _image(320),
        "Faster R-CNN detector (MobileNetV3 FPN, RoI pooling) at 320x320",
        heads=(
            ("roi_heads.box_predictor.cls_score", 1.5, 0.0),
            ("roi_heads.box_predictor.bbox_pred", 0.3, 0.0),
        ),
    ),
)


def _loads(source: str) -> bool:
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec(source) is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            __import__(source)
    except Exception:  # a wheel built for another torch fails in many ways at import
        return False
    return True


def available() -> list[WildModel]:
    """The models whose library imports here (torchvision's wheels need a matching torch)."""
    sources = {source: _loads(source) for source in {m.source for m in MODELS}}
    return [m for m in MODELS if sources[m.source]]


def by_name(name: str) -> WildModel:
    for wild in MODELS:
        if wild.name == name:
            return wild
    raise KeyError(f"no wild model {name!r}; known: {', '.join(m.name for m in MODELS)}")


def _randomize(module: object, seed: int) -> None:
    """Weights scaled by fan-in and normalization statistics that are not the identity, so
    activations neither vanish through the depth (the libraries' own initializers are
    meant for training, some with a standard deviation of 0.02) nor hide a wrong mean or
    variance."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for sub in module.modules():  # type: ignore[attr-defined]
            if isinstance(sub, torch.nn.modules.batchnorm._BatchNorm):
                n = sub.num_features
                sub.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
                sub.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
                if sub.affine:
                    sub.weight.copy_(torch.rand(n, generator=generator) + 0.5)
                    sub.bias.copy_(torch.randn(n, generator=generator) * 0.1)
            elif isinstance(sub, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = sub.weight[0].numel()
                sub.weight.copy_(torch.randn(sub.weight.shape, generator=generator) / fan_in**0.5)
                if sub.bias is not None:
                    sub.bias.copy_(torch.randn(sub.bias.shape, generator=generator) * 0.1)


def _calibrate(module: object, heads: tuple, args: tuple) -> None:
    """Scale each head convolution so that its outputs on ``args`` have the given standard
    deviation around the given mean. With random weights a detector's logits otherwise
    come out in the tens: every score is 1.0, every box clipped to the image, and which
    of the tied boxes a detector keeps is an accident of its sort, not a result to compare."""
    import torch

    for path, spread, centre in heads:
        conv = module
        for part in path.split("."):
            conv = getattr(conv, part)
        outputs: list = []
        hook = conv.register_forward_hook(lambda m, i, o: outputs.append(o.detach()))  # noqa: B023
        try:
            with torch.no_grad():
                module(*args)  # type: ignore[operator]
        finally:
            hook.remove()
        std = float(torch.cat([o.flatten() for o in outputs]).std()) or 1.0
        with torch.no_grad():
            conv.weight.mul_(spread / std)
            conv.bias.fill_(centre)


def export(wild: WildModel, seed: int = 0) -> tuple[bytes, dict[str, np.ndarray]]:
    """``wild`` with seeded random weights as ONNX bytes (opset 17), and example inputs."""
    import torch

    torch.manual_seed(seed)
    module = wild.build()
    _randomize(module, seed)
    feeds = wild.inputs(np.random.default_rng(seed))
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    if wild.heads:
        _calibrate(module, wild.heads, args)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            args,
            buffer,
            input_names=list(feeds),
            opset_version=17,
            dynamo=False,
        )
    return buffer.getvalue(), feeds
