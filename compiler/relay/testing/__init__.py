"""TVM's ``relay.testing``: standard networks as Relay modules with initialized weights.

Compiler layer (``compiler.relay``). TVM's tutorials and many user scripts start from
``mod, params = relay.testing.resnet.get_workload(num_layers=18)``; so can ours:

- :mod:`~compiler.relay.testing.mlp`: a multilayer perceptron (``get_workload``);
- :mod:`~compiler.relay.testing.resnet`: ResNet-18/34/50/101/152 (``get_workload``);
- :mod:`~compiler.relay.testing.mobilenet`: MobileNet v1 (``get_workload``);
- :mod:`~compiler.relay.testing.vgg`: VGG-11/13/16/19 (``get_workload``);
- :mod:`~compiler.relay.testing.squeezenet`: SqueezeNet 1.0 and 1.1 (``get_workload``);
- :func:`create_workload` (:mod:`~compiler.relay.testing.init`): a module and its parameters,
  every weight drawn from a seeded Xavier initializer, from any Relay function;
- :func:`run_infer_type` and :func:`run_opt_pass` (:mod:`~compiler.relay.testing.passes`):
  one expression through type inference or any passes.

The weights are random: the networks are for compiling, timing and checking backends
against each other, not for predictions.
"""

from __future__ import annotations

from compiler.relay.testing import init, layers, mlp, mobilenet, resnet, squeezenet, vgg
from compiler.relay.testing.init import Xavier, create_workload
from compiler.relay.testing.passes import run_infer_type, run_opt_pass

__all__ = [
    "Xavier",
    "create_workload",
    "init",
    "layers",
    "mlp",
    "mobilenet",
    "resnet",
    "run_infer_type",
    "run_opt_pass",
    "squeezenet",
    "vgg",
]
