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
