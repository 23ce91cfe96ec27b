"""Kernels of every path that shares work with the polling worker threads, run in a fresh
process: which kinds of job the kernel loader registered, and whether any job was offered
with no chunk code registered for its kind.

Test support (``tests/vm/kernels``); imports ``compiler`` for the references, which tests
may. Run as ``python -m tests.vm.kernels.sharing_kernels``: builds and runs each kernel
with the workers polling, checks its results against the references, and prints one JSON
object: ``registered`` (the kinds of :mod:`vm.kernels.runtime.jobs` registered afterwards),
``unregistered_posts``, ``jobs_posted`` (jobs the workers were offered) and ``cases``
(the names run). A process that imported nothing but the kernel loader has registered
nothing: whatever is registered at the end, the kernels' loader required.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from tests.vm.kernels.harness import SUMS, Program, check, packed
from tests.vm.kernels.workers import workers_polling

RNG = np.random.default_rng(21)


def _normal(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def dense() -> tuple[Program, list[int]]:
    """``nn.dense`` by a run-time weight: OpenBLAS products shared by rows or columns."""
    program = Program([_normal(64, 256), _normal(128, 256)])
    return program, program.add("nn.dense", [0, 1])


def dense_packed() -> tuple[Program, list[int]]:
    """``nn.contrib_dense_pack``: register tiles by a packed weight."""
    weight = _normal(96, 512)
    program = Program([_normal(16, 512), packed(weight)])
    return program, program.add("nn.contrib_dense_pack", [0, 1], units=96)


def batch_matmul() -> tuple[Program, list[int]]:
    """``nn.batch_matmul`` of a few heads."""
    program = Program([_normal(4, 96, 128), _normal(4, 64, 128)])
    return program, program.add("nn.batch_matmul", [0, 1])


def conv_im2col() -> tuple[Program, list[int]]:
    """A strided ``nn.conv2d``: im2col, then a product shared without the GIL."""
    program = Program([_normal(1, 16, 32, 32), _normal(32, 16, 3, 3)])
    return program, program.add("nn.conv2d", [0, 1], strides=(2, 2), padding=(1, 1))


def conv_winograd() -> tuple[Program, list[int]]:
    """A 3x3 stride-1 ``nn.conv2d`` with enough channels and tiles for Winograd."""
    program = Program([_normal(1, 32, 40, 40), _normal(32, 32, 3, 3)])
    return program, program.add("nn.conv2d", [0, 1], padding=(1, 1))


def conv_packed_blocks() -> tuple[Program, list[int]]:
    """A packed convolution with enough output rows for column blocks."""
    weight = _normal(64, 8, 3, 3)
    program = Program([_normal(1, 8, 40, 36), packed(weight)])
    op = "nn.contrib_conv2d_gemm_without_weight_transform"
    return program, program.add(op, [0, 1], channels=64, kernel_size=(3, 3), padding=(1, 1))


def conv_packed_im2row() -> tuple[Program, list[int]]:
    """A packed convolution by a weight too big for the cache: im2row split by output
    rows, then the packed product."""
    weight = _normal(256, 128, 3, 3)
    program = Program([_normal(1, 128, 14, 14), packed(weight)])
    op = "nn.contrib_conv2d_gemm_without_weight_transform"
    return program, program.add(op, [0, 1], channels=256, kernel_size=(3, 3), padding=(1, 1))


def depthwise_groups() -> tuple[Program, list[int]]:
    """A depthwise ``nn.conv2d`` with long rows: groups shared."""
    program = Program([_normal(1, 64, 32, 32), _normal(64, 1, 3, 3)])
    return program, program.add("nn.conv2d", [0, 1], groups=64, padding=(1, 1))


def depthwise_channels_last() -> tuple[Program, list[int]]:
    """A depthwise ``nn.conv2d`` with short rows: channels-last runs shared."""
    program = Program([_normal(1, 200, 9, 9), _normal(200, 1, 3, 3)])
    return program, program.add("nn.conv2d", [0, 1], groups=200, padding=(1, 1))


def max_pool() -> tuple[Program, list[int]]:
    """ResNet's 3x3/2 ``nn.max_pool2d`` on enough planes to share."""
    program = Program([_normal(1, 16, 64, 64)])
    return program, program.add(
        "nn.max_pool2d", [0], pool_size=(3, 3), strides=(2, 2), padding=(1, 1)
    )


def conv_transpose() -> tuple[Program, list[int]]:
    """``nn.conv2d_transpose`` (Python tasks, no job of the slot)."""
    program = Program([_normal(1, 16, 12, 12), _normal(16, 8, 3, 3)])
    return program, program.add("nn.conv2d_transpose", [0, 1], strides=(2, 2))


def conv_epilogue() -> tuple[Program, list[int]]:
    """``nn.conv2d`` -> add bias -> relu, the chain fused as the convolution's epilogue."""
    program = Program([_normal(1, 32, 28, 28), _normal(64, 32, 3, 3), _normal(64, 1, 1)])
    (conv,) = program.add("nn.conv2d", [0, 1], padding=(1, 1))
    (biased,) = program.add("add", [conv, 2])
    return program, program.add("nn.relu", [biased])


def transpose() -> tuple[Program, list[int]]:
    """NCHW to NHWC, big enough for its register tiles to be shared."""
    program = Program([_normal(1, 48, 40, 40)])
    return program, program.add("transpose", [0], axes=(0, 2, 3, 1))


def global_mean() -> tuple[Program, list[int]]:
    """A squeeze-excite block's mean over each plane: the row sums shared by planes."""
    program = Program([_normal(1, 32, 56, 56)])
    return program, program.add("mean", [0], axis=(2, 3), keepdims=True)


def softmax() -> tuple[Program, list[int]]:
    """Attention scores' softmax over the last axis: rows shared."""
    program = Program([_normal(4, 64, 96)])
    return program, program.add("nn.softmax", [0])


def layer_norm() -> tuple[Program, list[int]]:
    """A transformer's layer normalization over the last axis: rows shared."""
    program = Program([_normal(64, 384), _normal(384), _normal(384)])
    return program, program.add("nn.layer_norm", [0, 1, 2])


def upsampling() -> tuple[Program, list[int]]:
    """A segmentation head's bilinear upsampling of its class planes: planes shared."""
    program = Program([_normal(1, 21, 16, 16)])
    return program, program.add("nn.upsampling", [0], scale_h=4.0, scale_w=4.0, method="bilinear")


CASES: dict[str, Callable[[], tuple[Program, list[int]]]] = {
    "dense": dense,
    "dense_packed": dense_packed,
    "batch_matmul": batch_matmul,
    "conv_im2col": conv_im2col,
    "conv_winograd": conv_winograd,
    "conv_packed_blocks": conv_packed_blocks,
    "conv_packed_im2row": conv_packed_im2row,
    "depthwise_groups": depthwise_groups,
    "depthwise_channels_last": depthwise_channels_last,
    "max_pool": max_pool,
    "conv_transpose": conv_transpose,
    "conv_epilogue": conv_epilogue,
    "transpose": transpose,
    "global_mean": global_mean,
    "softmax": softmax,
    "layer_norm": layer_norm,
    "upsampling": upsampling,
}


def main() -> dict:
    from vm.kernels.runtime import jobs

    for build in CASES.values():
        program, results = build()
        # Twice: the first call loads the kernel (and may find the workers asleep).
        for _ in range(2):
            assert workers_polling(), "no worker polls"
            check(program, results, tolerances=SUMS)
    return {
        "registered": sorted(jobs.registered()),
        "unregistered_posts": jobs.unregistered_posts(),
        "jobs_posted": jobs.jobs_posted(),
        "cases": sorted(CASES),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
