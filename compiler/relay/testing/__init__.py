"""TVM's ``relay.testing``: standard networks as Relay modules with initialized weights.

Compiler layer (``compiler.relay``). TVM's tutorials and many user scripts start from
``mod, params = relay.testing.resnet.get_workload(num_layers=18)``; so can ours:

- :mod:`~compiler.relay.testing.mlp`: a multilayer perceptron (``get_workload``);
- :mod:`~compiler.relay.testing.resnet`: ResNet-18/34/50/101/152 (``get_workload``);
- :mod:`~compiler.relay.testing.mobilenet`: MobileNet v1 (``get_workload``);
- :mod:`~compiler.relay.testing.vgg`: VGG-11/13/16/19 (``get_workload``);
- :mod:`~compiler.relay.testing.squeezenet`: SqueezeNet 1.0 and 1.1 (``get_workload``);
- :mod:`~compiler.relay.testing.densenet`: DenseNet-121/161/169/201 (``get_workload``);
- :mod:`~compiler.relay.testing.inception_v3`: Inception v3 (``get_workload``);
- :mod:`~compiler.relay.testing.dcgan`: the DCGAN generator (``get_workload``);
- :mod:`~compiler.relay.testing.lstm`: an unrolled LSTM (``get_workload``, ``lstm_cell``);
- :func:`create_workload` (:mod:`~compiler.relay.testing.init`): a module and its parameters,
  every weight drawn from a seeded Xavier initializer, from any Relay function;
- :func:`run_infer_type` and :func:`run_opt_pass` (:mod:`~compiler.relay.testing.passes`):
  one expression through type inference or any passes.

The weights are random: the networks are for compiling, timing and checking backends
against each other, not for predictions.
"""

from __future__ import annotations

from compiler.relay.testing import (
    dcgan,
    densenet,
    inception_v3,
    init,
    layers,
    lstm,
    mlp,
    mobilenet,
    resnet,
    squeezenet,
    vgg,
)
from compiler.relay.testing.init import Xavier, create_workload
from compiler.relay.testing.passes import run_infer_type, run_opt_pass

__all__ = [
    "Xavier",
    "create_workload",
    "dcgan",
    "densenet",
    "inception_v3",
    "init",
    "layers",
    "lstm",
    "mlp",
    "mobilenet",
    "resnet",
    "run_infer_type",
    "run_opt_pass",
    "squeezenet",
    "vgg",
]
