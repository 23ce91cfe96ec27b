"""The kernels' compiled runtime support: what generated kernels call while they run.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba,
llvmlite and ctypes, never the generator (``vm.kernels``' descriptions, rules, emitters,
source and cache) nor ``compiler``.

Modules, by job:

- Names and calls across the compiled boundary: :mod:`~vm.kernels.runtime.symbols` (every
  LLVM symbol and bridge handler name, in one place), :mod:`~vm.kernels.runtime.bridge`
  (compiled code calling Python handlers), :mod:`~vm.kernels.runtime.callbacks` (C entry
  points and chunk code compiled on first need), :mod:`~vm.kernels.runtime.atomics`.
- Threads: :mod:`~vm.kernels.runtime.jobs` (the shared-job slot and the registry of job
  kinds), :mod:`~vm.kernels.runtime.threads` (the worker pool),
  :mod:`~vm.kernels.runtime.spin` (polling without the GIL),
  :mod:`~vm.kernels.runtime.openblas` (numpy's OpenBLAS, one thread per caller).
- Products: :mod:`~vm.kernels.runtime.products` (OpenBLAS from compiled code, stacks of
  products, packed products, and the one way a product is split between threads),
  :mod:`~vm.kernels.runtime.packed` (register tiles), :mod:`~vm.kernels.runtime.target`
  (the host's vector width).
- Convolutions and pools: :mod:`~vm.kernels.runtime.convolution` (entry points and the
  paths through Python), :mod:`~vm.kernels.runtime.conv_jobs` (im2col, column blocks and
  Winograd transforms shared without the GIL), :mod:`~vm.kernels.runtime.conv_loops`,
  :mod:`~vm.kernels.runtime.pointwise`, :mod:`~vm.kernels.runtime.depthwise`,
  :mod:`~vm.kernels.runtime.winograd`, :mod:`~vm.kernels.runtime.pool_loops`.
- Rows: :mod:`~vm.kernels.runtime.rows` (softmax and layer normalization, shared by rows).
- Images: :mod:`~vm.kernels.runtime.resample` (resizing and upsampling by row and column
  tables, shared by planes).
- Scalars: :mod:`~vm.kernels.runtime.helpers` (float16 bits, integer division, checks) and
  :mod:`~vm.kernels.runtime.vecmath` (vectorizable ``exp``, ``tanh``, ``erf``).

Generated modules import the ones they call by the aliases of
:data:`vm.kernels.codegen.LIBRARY_ALIASES`. Every module here is part of the library hash
(:mod:`vm.kernels.fingerprint`).
"""
