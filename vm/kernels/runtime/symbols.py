"""Every name by which compiled code reaches outside itself, in one place: the LLVM symbols
the runtime exports and the Python handlers compiled code calls through the bridge.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports llvmlite only.

A kernel loaded from numba's disk cache was linked in another process, at other
addresses: it finds the runtime's functions and data by these names, which are compiled
into its machine code (a bridge handler by a CRC of its name, see
:mod:`vm.kernels.runtime.bridge`). They are a contract between every cached kernel and
the runtime that loads it, so they live here and nowhere else; this file is part of the
library hash, so renaming one rebuilds every kernel rather than leaving cached code that
links to a name nobody exports.
"""

from __future__ import annotations

import threading

from llvmlite import binding

# --- LLVM symbols ------------------------------------------------------------------------------

#: numpy's OpenBLAS ``cblas_sgemm``/``cblas_dgemm`` (or numpy fallbacks), and the function
#: that sets the calling thread's BLAS thread count (:mod:`vm.kernels.runtime.products`).
SGEMM = "relayvm_sgemm"
DGEMM = "relayvm_dgemm"
BLAS_THREADS = "relayvm_blas_threads"
#: The shared-job slot's words, and libc's ``write`` for wake-up bytes
#: (:mod:`vm.kernels.runtime.jobs`).
JOB_SLOT = "relayvm_job_slot"
WRITE = "relayvm_write"
#: The bridge's one C-callable dispatcher (:mod:`vm.kernels.runtime.bridge`).
KERNEL_CALLBACK = "relayvm_kernel_callback"
#: C entry points compiled on first need (:func:`vm.kernels.runtime.callbacks.entry`): a
#: product, a stack of products, the packed dense product, the float32 convolution's
#: column blocks, float32 depthwise images by groups and channels-last, float32 grouped
#: convolutions of wider groups, the register tiles of a panel that every product by a
#: packed weight runs, a convolution's products by pixel panels, a range of a pointwise
#: convolution's (pixel panel, weight panel) items, and a product by a packed weight
#: stored transposed (pixels as the tiles' rows, channels as the output's rows). A job's
#: loops need none: its chunk code runs them on the caller's thread too
#: (:func:`vm.kernels.runtime.jobs.run_here`).
PRODUCT = "relayvm_product"
BATCHED = "relayvm_batched"
PACKED = "relayvm_packed"
CONV_BLOCKS = "relayvm_conv_blocks"
DEPTHWISE_GROUPS = "relayvm_depthwise_groups"
DEPTHWISE_CHANNELS = "relayvm_depthwise_channels"
GROUPED = "relayvm_grouped"
TILE = "relayvm_tile"
PIXEL_PANELS = "relayvm_pixel_panels"
POINTWISE_ITEMS = "relayvm_pointwise_items"
TRANSPOSED = "relayvm_transposed"

#: Every symbol above.
SYMBOLS = (
    SGEMM,
    DGEMM,
    BLAS_THREADS,
    JOB_SLOT,
    WRITE,
    KERNEL_CALLBACK,
    PRODUCT,
    BATCHED,
    PACKED,
    CONV_BLOCKS,
    DEPTHWISE_GROUPS,
    DEPTHWISE_CHANNELS,
    GROUPED,
    TILE,
    PIXEL_PANELS,
    POINTWISE_ITEMS,
    TRANSPOSED,
)

# --- bridge handlers ---------------------------------------------------------------------------

#: Float convolutions that leave compiled code (:mod:`vm.kernels.runtime.convolution`).
CONV_IMAGE = "convolution.conv_image"
CONV_PACKED = "convolution.conv_packed"
CONV_WINOGRAD = "convolution.conv_winograd"
CONV_WINOGRAD_TRANSFORMED = "convolution.conv_winograd_transformed"
CONV_TRANSPOSE_IMAGE = "convolution.conv_transpose_image"
#: Pools shared as Python tasks (:mod:`vm.kernels.runtime.pool_loops`).
MAX_POOL_PLANES = "pool_loops.max_pool_planes"
AVG_POOL_PLANES = "pool_loops.avg_pool_planes"

#: Every bridge handler above.
BRIDGE_HANDLERS = (
    CONV_IMAGE,
    CONV_PACKED,
    CONV_WINOGRAD,
    CONV_WINOGRAD_TRANSFORMED,
    CONV_TRANSPOSE_IMAGE,
    MAX_POOL_PLANES,
    AVG_POOL_PLANES,
)

_LOCK = threading.Lock()
_EXPORTED: dict[str, int] = {}


def export(symbol: str, address: int) -> None:
    """Make ``address`` the LLVM symbol ``symbol`` of this process, for code compiled or
    loaded from then on.

    Parameters
    ----------
    symbol : str
        One of :data:`SYMBOLS` (or a test's own).
    address : int
        The function's or data's address; it must stay valid for the life of the process.
    """
    with _LOCK:
        binding.add_symbol(symbol, address)
        _EXPORTED[symbol] = address


def exported() -> dict[str, int]:
    """The symbols this process has exported so far, with their addresses."""
    with _LOCK:
        return dict(_EXPORTED)
