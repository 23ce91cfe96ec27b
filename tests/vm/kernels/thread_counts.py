"""Programs whose kernels split work between threads and use every register-tile path, run
in a process of their own: for comparing runs under different thread counts, and compiled
for another instruction set.

Test support (``tests/vm/kernels``); imports ``compiler`` to build the programs, which tests
may. Run as ``python -m tests.vm.kernels.thread_counts RUNS`` (``RELAYVM_NUM_THREADS``
set by the caller): prints one JSON object, each case's name to the hex digests of its
``RUNS`` outputs. ``python -m tests.vm.kernels.thread_counts --save PATH`` writes each
case's output to the ``.npz`` file ``PATH`` instead, with the instruction set the kernels
were compiled for under the key ``isa``.

Every other run starts after a pause long enough for idle workers to stop polling and fall
asleep, so that a run finds them both awake (products shared) and asleep (the caller alone,
or sharing from part way).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable

import numpy as np

import vm

#: Longer than a worker polls before it sleeps (vm.kernels.runtime.spin.POLLS, about 2 ms).
PAUSE = 0.02


def _normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype("float32")


def _compiled(params: list, body, feeds: list[np.ndarray]) -> Callable[[], np.ndarray]:
    """``body`` over ``params`` compiled at opt_level 3 and loaded in a VM; calling the
    result runs it on ``feeds``."""
    from compiler import relay

    mod = relay.IRModule()
    mod["main"] = relay.Function(params, body)
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe, vm.cpu())
    return lambda: _flat(machine.invoke("main", *feeds))


def _flat(value: object) -> np.ndarray:
    """A result's arrays, a tuple's fields in order, as one flat array."""
    if isinstance(value, list | tuple):
        return np.concatenate([_flat(part) for part in value])
    return np.ascontiguousarray(value).ravel()


def _conv(h, rng: np.random.Generator, channels: int, out: int, kernel: int, stride: int):
    from compiler import relay

    weight = _normal(rng, (out, channels, kernel, kernel), (2.0 / (channels * kernel**2)) ** 0.5)
    pad = kernel // 2
    h = relay.nn.conv2d(h, relay.const(weight), strides=(stride, stride), padding=(pad, pad))
    scale = rng.uniform(0.5, 1.5, (out, 1, 1)).astype("float32")
    return h * relay.const(scale) + relay.const(_normal(rng, (out, 1, 1), 0.1))


def winograd_conv(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A 3x3 stride-1 convolution that the compiler turns into a Winograd one: its planes'
    products and transforms are big enough to share."""
    from compiler import relay

    x = relay.var("x", shape=(1, 32, 40, 40), dtype="float32")
    body = relay.nn.relu(_conv(x, rng, 32, 32, 3, 1))
    return _compiled([x], body, [_normal(rng, (1, 32, 40, 40))])


def packed_conv(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A 3x3 stride-2 convolution by a packed weight (register tiles, column blocks)."""
    from compiler import relay

    x = relay.var("x", shape=(1, 32, 56, 56), dtype="float32")
    body = _conv(x, rng, 32, 64, 3, 2)
    return _compiled([x], body, [_normal(rng, (1, 32, 56, 56))])


def dense_packed(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A dense layer by a constant (so packed) weight."""
    from compiler import relay

    x = relay.var("x", shape=(16, 512), dtype="float32")
    body = relay.nn.dense(x, relay.const(_normal(rng, (384, 512), 0.05)))
    return _compiled([x], body, [_normal(rng, (16, 512))])


def dense_blas(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """Dense layers by weights given at run time (OpenBLAS): one small enough for compiled
    code alone, one big enough for the threads' Python tasks when no worker polls."""
    from compiler import relay

    x = relay.var("x", shape=(8, 512), dtype="float32")
    w = relay.var("w", shape=(256, 512), dtype="float32")
    y = relay.var("y", shape=(48, 512), dtype="float32")
    v = relay.var("v", shape=(512, 512), dtype="float32")
    body = relay.Tuple([relay.nn.dense(x, w), relay.nn.dense(y, v)])
    feeds = [_normal(rng, (8, 512)), _normal(rng, (256, 512)), _normal(rng, (48, 512)),
             _normal(rng, (512, 512))]  # fmt: skip
    return _compiled([x, w, y, v], body, feeds)


def batch_products(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """``nn.batch_matmul`` of a few heads, as attention makes them."""
    from compiler import relay

    a = relay.var("a", shape=(4, 96, 128), dtype="float32")
    b = relay.var("b", shape=(4, 64, 128), dtype="float32")
    body = relay.nn.batch_matmul(a, b)
    return _compiled([a, b], body, [_normal(rng, (4, 96, 128)), _normal(rng, (4, 64, 128))])


def small_resnet(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A ResNet-style network: stem, max pool, two residual stages (Winograd and packed
    convolutions, a 1x1 projection), global pool and a dense classifier."""
    from compiler import relay

    x = relay.var("x", shape=(1, 3, 160, 160), dtype="float32")
    h = relay.nn.relu(_conv(x, rng, 3, 32, 7, 2))
    h = relay.nn.max_pool2d(h, pool_size=(3, 3), strides=(2, 2), padding=(1, 1))
    channels = 32
    for out, stride in ((32, 1), (64, 2)):
        shortcut = h if stride == 1 else _conv(h, rng, channels, out, 1, stride)
        y = relay.nn.relu(_conv(h, rng, channels, out, 3, stride))
        h = relay.nn.relu(_conv(y, rng, out, out, 3, 1) + shortcut)
        channels = out
    h = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(h))
    body = relay.nn.dense(h, relay.const(_normal(rng, (10, channels), 0.1)))
    return _compiled([x], body, [_normal(rng, (1, 3, 160, 160))])


def depthwise_block(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """MobileNetV2's inverted residual: 1x1 expansion, 3x3 depthwise, 1x1 projection."""
    from compiler import relay

    x = relay.var("x", shape=(1, 24, 28, 28), dtype="float32")
    h = relay.clip(_conv(x, rng, 24, 96, 1, 1), 0.0, 6.0)
    weight = _normal(rng, (96, 1, 3, 3), 1.0 / 3.0)
    h = relay.nn.conv2d(h, relay.const(weight), padding=(1, 1), groups=96)
    h = relay.clip(h, 0.0, 6.0)
    body = _conv(h, rng, 96, 24, 1, 1) + x
    return _compiled([x], body, [_normal(rng, (1, 24, 28, 28))])


def depthwise_stride2(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """MobileNetV2's downsampling depthwise layer: 3x3, stride 2, rows split by column phase
    in registers, a whole block of outputs and a part."""
    from compiler import relay

    x = relay.var("x", shape=(1, 32, 56, 56), dtype="float32")
    weight = _normal(rng, (32, 1, 3, 3), 1.0 / 3.0)
    h = relay.nn.conv2d(x, relay.const(weight), strides=(2, 2), padding=(1, 1), groups=32)
    body = relay.clip(h, 0.0, 6.0)
    return _compiled([x], body, [_normal(rng, (1, 32, 56, 56))])


def grouped_window(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """Grouped 3x3 layers whose bands read their windows in place: RegNet's groups of 64
    channels (bias and relu applied by the bands), and groups of 16 channels, half a panel
    of output channels, at stride 2."""
    from compiler import relay

    x = relay.var("x", shape=(1, 128, 28, 28), dtype="float32")
    weight = _normal(rng, (128, 64, 3, 3), 1.0 / 24.0)
    h = relay.nn.conv2d(x, relay.const(weight), padding=(1, 1), groups=2)
    h = relay.nn.relu(relay.nn.bias_add(h, relay.const(_normal(rng, (128,)))))
    weight = _normal(rng, (128, 16, 3, 3), 1.0 / 12.0)
    body = relay.nn.conv2d(h, relay.const(weight), strides=(2, 2), padding=(1, 1), groups=8)
    return _compiled([x], body, [_normal(rng, (1, 128, 28, 28))])


def attention_rows(rng: np.random.Generator) -> Callable[[], np.ndarray]:
    """A projection, its layer normalization and a softmax of the heads' scores: rows
    shared between the threads (vm.kernels.runtime.rows)."""
    from compiler import relay

    x = relay.var("x", shape=(128, 256), dtype="float32")
    h = relay.nn.dense(x, relay.const(_normal(rng, (256, 256), 1.0 / 16.0)))
    gamma, beta = relay.const(_normal(rng, (256,))), relay.const(_normal(rng, (256,)))
    normed = relay.nn.layer_norm(h, gamma, beta)
    heads = relay.reshape(normed, (8, 128, 32))
    scores = relay.nn.softmax(relay.nn.batch_matmul(heads, heads))
    return _compiled([x], relay.Tuple([normed, scores]), [_normal(rng, (128, 256))])


CASES = {
    "winograd_conv": winograd_conv,
    "packed_conv": packed_conv,
    "dense_packed": dense_packed,
    "dense_blas": dense_blas,
    "batch_products": batch_products,
    "small_resnet": small_resnet,
    "depthwise_block": depthwise_block,
    "depthwise_stride2": depthwise_stride2,
    "grouped_window": grouped_window,
    "attention_rows": attention_rows,
}


def digests(runs: int) -> dict[str, list[str]]:
    """Each case's output digests over ``runs`` runs (see the module docstring)."""
    found: dict[str, list[str]] = {}
    for seed, (name, build) in enumerate(CASES.items()):
        run = build(np.random.default_rng(seed))
        found[name] = []
        for i in range(runs):
            if i % 2:
                time.sleep(PAUSE)
            found[name].append(hashlib.sha256(run().tobytes()).hexdigest())
    return found


def outputs() -> dict[str, np.ndarray]:
    """Each case's output from one run (the same inputs and weights as :func:`digests`)."""
    return {
        name: build(np.random.default_rng(seed))()
        for seed, (name, build) in enumerate(CASES.items())
    }


if __name__ == "__main__":
    if sys.argv[1] == "--save":
        from vm.kernels.runtime.target import target_features

        np.savez(sys.argv[2], isa=np.array(sorted(target_features())), **outputs())
    else:
        print(json.dumps(digests(int(sys.argv[1]))))
