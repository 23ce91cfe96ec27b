"""Products by a prepacked float32 weight: ``out = a @ w.T`` with ``w`` stored in panels
of :data:`PANEL` output features, the ``NC32n`` layout of ``nn.contrib_dense_pack``.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba and llvmlite.

OpenBLAS copies ("packs") both operands into its own panel layout on every call. For a
constant weight that copy is wasted work, and on the products of a batch-64 MLP it is what
separates OpenBLAS from the core's peak (benchmarks/NOTES.md). A weight folded at compile
time into ``(N / 32, K, 32)`` panels is read in order, and each panel is multiplied by
:data:`ROWS` rows of ``a`` at a time by :func:`tile`: an LLVM loop over K whose
accumulators, ``ROWS`` by :data:`TILE_COLUMNS` floats, are 16-lane vectors held in
registers, one fused multiply-add per (row, vector) and K step. numba's compiler has no
vector type and does not vectorise that loop on its own (its scalar form is several times
slower), so the loop is written as LLVM IR through a numba intrinsic; numba caches it on
disk with the functions that call it.

LLVM lowers the 16-lane vectors to whatever the host has (two 8-lane halves on AVX2);
there a tile covers half a panel, so the accumulators still fit the registers.

The tiles are compiled into two C entry points, once per process, and not inlined
elsewhere: numba optimises each compiled function with everything it calls linked in,
and the tile's loops (one per row count, with and without a start from ``c``), inlined
at four places and again in every job and entry point that reached them, made the
first packed product in a process with an empty cache compile for 23 s on two cores
(9 s now). Products by rows call a panel's tiles by symbol (:data:`run_panel`); a call
costs a few nanoseconds against the tile's loop over ``k``. A convolution's products
by pixel panels, where ``k`` can be 16, run all their tiles in one call
(:data:`run_pixel_panels`). Code that reaches these loops declares the symbols in its
``links`` (:func:`vm.kernels.runtime.callbacks.entry`, :func:`vm.kernels.runtime.jobs.chunk`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from vm.kernels.runtime import callbacks, symbols, target
from vm.kernels.runtime import vecmath as vx
from vm.kernels.runtime import vector_ir as vir
from vm.kernels.runtime.atomics import load_word, store_word
from vm.kernels.runtime.panels import PANEL
from vm.kernels.runtime.target import has_avx512
from vm.kernels.runtime.vector_ir import F32, I64, LANES, VEC

#: Columns of a panel one tile covers, and rows of ``a`` per tile. AVX-512: the whole
#: panel, two vectors of 16, by 7 rows (14 accumulators and 2 weight vectors of its 32
#: registers). AVX2 has 16 registers of 8 floats: a 16-lane vector is two of them, so
#: half a panel by 6 rows (12 accumulators, 2 weight registers, 1 broadcast); a whole
#: panel by 3 rows needs 17 and spills (one core of an AMD EPYC Zen 3: 45 GFLOP/s
#: against 70 at 6 by 16, on GPT-2's products).
TILE_COLUMNS = PANEL if has_avx512() else PANEL // 2
ROWS = 7 if has_avx512() else 6
_VECTORS = TILE_COLUMNS // LANES


#: The activation an epilogue applies last (word 2 of its header, :func:`post_epilogue`):
#: a clamp to ``[lo, hi]`` keeping NaN as ``clip`` does, one turning NaN into ``lo`` as
#: ``nn.relu`` does, ``x * sigmoid(x)`` (swish, or SiLU: EfficientNet's activation), or
#: the gelu ``(x * (erf(x / lo) + 1)) * hi`` as exporters write a transformer's
#: (``lo`` the square root of 2, ``hi`` one half), or its tanh form as GPT-2 writes it
#: (:func:`gelu_tanh`; both a dense layer's epilogue only, see :func:`post_columns`).
CLAMP, RELU, SWISH, GELU, GELU_TANH = 0, 1, 2, 3, 4
#: The coefficient of the cube in the tanh gelu (:func:`gelu_tanh`), as every exporter
#: writes it; a kernel checks its own constant against it before it fuses the gelu.
GELU_CUBIC = np.float32(0.044715)


#: Rows from which a tile of products by weight panels (:func:`tile`, :func:`tile_add`)
#: asks, as it reads each row of its panel, for the same columns ``k`` rows further on: the
#: next panel when the tile runs a whole one (weights are packed panel after panel), the
#: next block of its own when it runs a block of a deep product; either is what a later
#: pass reads. In a model a deep layer's weight comes from memory, and a tile that waited
#: for its panel left the multiply-adds idle; asked for while the tiles before it compute
#: from L2, it is in cache when they come to it. ResNet's 3x3 convolution of 512 channels
#: at 7x7 (9.4 MB of weight, caches evicted before each call, two threads, AMD EPYC Zen 5):
#: 0.92 -> 0.70 ms, as onnxruntime (0.69). A tile of few rows is bound by its loads, and
#: the extra requests slowed an MLP at batch 1 by a fifth; the pixel panels' tiles (with an
#: epilogue) hold data, not weights, in their panels, and never ask.
AHEAD_MIN_ROWS = 4


def _emit_tile(builder: ir.IRBuilder, rows: int, args, add: bool, post=None) -> None:
    """The loop of a ``rows``-row tile, starting at the builder's block; it ends with the
    builder in a block that falls through to whatever follows. ``add``: the sums start
    from what ``c`` holds, else from zero. ``post``: ``(bias, lo, hi, activation,
    residual, delta)``, the epilogue :func:`tile_post` applies to each row before it is
    stored."""
    pa, row_stride, k_stride, pb, ldb, k, pc, ldc = args
    fma = vir.fma(builder.module)
    function = builder.function
    loop = function.append_basic_block(f"tile{rows}.loop")
    done = function.append_basic_block(f"tile{rows}.done")

    def c_address(r: int, v: int) -> ir.Value:
        offset = builder.add(builder.mul(I64(r), ldc), I64(v * LANES))
        return vir.address(builder, pc, offset, VEC)

    zero = ir.Constant(VEC, None)
    start = [
        [builder.load(c_address(r, v), align=4) if add else zero for v in range(_VECTORS)]
        for r in range(rows)
    ]
    entry = builder.block
    builder.cbranch(builder.icmp_signed(">", k, I64(0)), loop, done)

    builder.position_at_end(loop)
    step = builder.phi(I64)
    step.add_incoming(I64(0), entry)
    acc = [[builder.phi(VEC) for _ in range(_VECTORS)] for _ in range(rows)]
    for r in range(rows):
        for v in range(_VECTORS):
            acc[r][v].add_incoming(start[r][v], entry)
    panel_row = builder.mul(step, ldb)
    if post is None and rows >= AHEAD_MIN_ROWS:
        ahead = builder.add(pb, builder.shl(builder.add(panel_row, builder.mul(k, ldb)), I64(2)))
        for line in range(0, TILE_COLUMNS * 4, 64):
            vir.prefetch(builder, builder.add(ahead, I64(line)), 0, 2)
    weights = [
        builder.load(vir.address(builder, pb, builder.add(panel_row, I64(v * LANES)), VEC), align=4)
        for v in range(_VECTORS)
    ]
    summed = []
    column = builder.mul(step, k_stride)
    for r in range(rows):
        offset = builder.add(builder.mul(I64(r), row_stride), column)
        broadcast = vir.splat(builder, builder.load(vir.address(builder, pa, offset, F32), align=4))
        summed.append(
            [builder.call(fma, [broadcast, weights[v], acc[r][v]]) for v in range(_VECTORS)]
        )
    following = builder.add(step, I64(1))
    step.add_incoming(following, loop)
    for r in range(rows):
        for v in range(_VECTORS):
            acc[r][v].add_incoming(summed[r][v], loop)
    builder.cbranch(builder.icmp_signed("<", following, k), loop, done)

    builder.position_at_end(done)
    finals = {}
    for r in range(rows):
        for v in range(_VECTORS):
            finals[r, v] = final = builder.phi(VEC)
            final.add_incoming(start[r][v], entry)
            final.add_incoming(summed[r][v], loop)
    if post is not None:
        # No bias (address 0): a float of the panel is read in its place and dropped.
        bias_at, lo, hi, activation, residual, delta = post
        has_bias = builder.icmp_signed("!=", bias_at, I64(0))
        # Without a residual, delta is 0: c itself is read in its place and dropped.
        delta = builder.select(residual, delta, I64(0))
        for r in range(rows):
            at = builder.select(has_bias, builder.add(bias_at, I64(4 * r)), pa)
            bias = builder.load(builder.inttoptr(at, F32.as_pointer()), align=4)
            bias = builder.select(has_bias, bias, ir.Constant(F32, 0.0))
            for v in range(_VECTORS):
                value = builder.fadd(finals[r, v], vir.splat(builder, bias))
                address = builder.ptrtoint(c_address(r, v), I64)
                at_residual = builder.inttoptr(builder.add(address, delta), VEC.as_pointer())
                added = builder.fadd(value, builder.load(at_residual, align=4))
                finals[r, v] = builder.select(residual, added, value)
        # One branch for the whole tile: swish's exponentials would cost a clamped tile
        # several times its clamp.
        swish = builder.icmp_signed("==", activation, I64(SWISH))
        relu = builder.icmp_signed("==", activation, I64(RELU))
        with builder.if_else(swish) as (then, otherwise):
            with then:
                for (r, v), final in finals.items():
                    builder.store(vx.swish_ir(builder, final), c_address(r, v), align=4)
            with otherwise:
                for (r, v), final in finals.items():
                    builder.store(_post(builder, final, (lo, hi, relu)), c_address(r, v), align=4)
        return
    for (r, v), final in finals.items():
        builder.store(final, c_address(r, v), align=4)


def _post(builder: ir.IRBuilder, value: ir.Value, bounds) -> ir.Value:
    """``value`` clamped to ``[lo, hi]`` as the kernels' elementwise code clamps: ``clip``
    keeps a NaN (numpy's ``minimum``/``maximum``), ``relu`` (``x if x > lo else lo``)
    turns it into ``lo``; ``-inf`` and ``inf`` leave values alone."""
    lo, hi, relu = bounds
    low, high = vir.splat(builder, lo), vir.splat(builder, hi)
    below = builder.select(
        relu,
        builder.fcmp_unordered("<=", value, low),
        builder.fcmp_ordered("<", value, low),
    )
    value = builder.select(below, low, value)
    return builder.select(builder.fcmp_ordered(">", value, high), high, value)


def _tile_codegen(add: bool, post: bool = False):
    def codegen(context, builder, signature, args):
        # One loop per row count: the accumulators must be compile-time values.
        function = builder.function
        end = function.append_basic_block("tile.end")
        count = builder.sext(args[0], I64) if args[0].type.width < 64 else args[0]
        bounds = None
        if post:
            residual = builder.icmp_signed("!=", args[13], I64(0))
            bounds = (args[9], args[10], args[11], args[12], residual, args[14])
        switch = builder.switch(count, end)
        for rows_here in range(1, ROWS + 1):
            case = function.append_basic_block(f"tile{rows_here}")
            switch.add_case(I64(rows_here), case)
            builder.position_at_end(case)
            _emit_tile(builder, rows_here, args[1:9], add, bounds)
            builder.branch(end)
        builder.position_at_end(end)
        return context.get_dummy_value()

    return codegen


@intrinsic
def tile(typingctx, rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc):
    """``c[r, :w] = sum_k a[r * row_stride + k * k_stride] * panel[k, :w]`` for
    ``r < rows`` (1 to :data:`ROWS`; other counts do nothing) and ``w`` =
    :data:`TILE_COLUMNS`, all float32 at the byte addresses ``pa``, ``pb`` (``k`` rows of a
    panel, ``ldb`` elements apart) and ``pc`` (rows ``ldc`` elements apart). From
    :data:`AHEAD_MIN_ROWS` rows it also prefetches the panel's columns ``k`` rows on."""
    arguments = (rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc)
    if not all(isinstance(t, types.Integer) for t in arguments):
        return None
    return types.none(*([types.int64] * 9)), _tile_codegen(False)


@intrinsic
def tile_add(typingctx, rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc):
    """:func:`tile` adding the products to what ``c`` holds (the blocks of a long ``k``)."""
    arguments = (rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc)
    if not all(isinstance(t, types.Integer) for t in arguments):
        return None
    return types.none(*([types.int64] * 9)), _tile_codegen(True)


@intrinsic
def tile_post(typingctx, rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, bias, lo, hi,
              activation, residual, delta):  # fmt: skip
    """:func:`tile` whose row ``r`` is stored as ``act(sum + bias[r] + res)``: ``bias`` is
    the byte address of ``rows`` float32s (0: none), ``res`` the float32 at ``delta``
    bytes from the element when ``residual`` is nonzero, ``act`` the ``activation``
    (:data:`CLAMP` to the float32 bounds ``lo`` and ``hi``, :data:`RELU`'s clamp, see
    :func:`_post`, or :data:`SWISH`). A convolution's bias, residual add and activation,
    applied while the tile is in registers instead of by a pass over the output that
    memory must serve again."""
    integers = (rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, bias, activation, residual,
                delta)  # fmt: skip
    return _post_typing(integers, (lo, hi), add=False)


@intrinsic
def tile_add_post(typingctx, rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, bias, lo, hi,
                  activation, residual, delta):  # fmt: skip
    """:func:`tile_post` adding the products to what ``c`` holds: the blocks of a long
    ``k`` after the first (those before the last pass no bias, no residual and a
    :data:`CLAMP` to the infinities)."""
    integers = (rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, bias, activation, residual,
                delta)  # fmt: skip
    return _post_typing(integers, (lo, hi), add=True)


def _post_typing(integers: tuple, bounds: tuple, add: bool):
    if not all(isinstance(t, types.Integer) for t in integers):
        return None
    if not all(isinstance(t, types.Float) for t in bounds):
        return None
    signature = types.none(*([types.int64] * 10), types.float32, types.float32,
                           *([types.int64] * 3))  # fmt: skip
    return signature, _tile_codegen(add, post=True)


_TILE = types.void(*([types.int64] * 10))


@njit(nogil=True)
def _panel(rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, add):
    # A whole panel: both halves of it on AVX2, one call of the entry point for both.
    for first in range(0, PANEL, TILE_COLUMNS):
        if add:
            tile_add(rows, pa, row_stride, k_stride, pb + first * 4, ldb, k, pc + first * 4, ldc)
        else:
            tile(rows, pa, row_stride, k_stride, pb + first * 4, ldb, k, pc + first * 4, ldc)


@callbacks.entry(symbols.TILE, _TILE)
def _panel_entry(rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, add):
    """:func:`tile_add` if ``add``, else :func:`tile`, over the :data:`PANEL` columns."""
    # The strides callers use, as constants: the tile's address arithmetic then folds
    # into its loads (with every stride a variable, one core lost 15-30% on the pixel
    # panels of a convolution, which now have their own entry point).
    if k_stride == 1 and ldb == PANEL:  # rows of data
        _panel(rows, pa, row_stride, 1, pb, PANEL, k, pc, ldc, add)
    elif row_stride == 1 and ldb == PANEL:  # pixels of a column matrix
        _panel(rows, pa, 1, k_stride, pb, PANEL, k, pc, ldc, add)
    else:
        _panel(rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, add)


#: ``run_panel(rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc, add)``: :func:`tile`,
#: or :func:`tile_add` when ``add`` is 1, over the :data:`PANEL` columns at ``pb`` (into
#: the ``PANEL`` contiguous columns at ``pc``), by symbol.
run_panel = types.ExternalFunction(symbols.TILE, _TILE)


@njit(nogil=True)
def _tile_into(rows, a, b, k, c, width, scratch):
    """One :func:`tile` of ``rows`` rows of ``a`` ``(address, row stride, k stride)`` by
    the panel ``b`` ``(address, row stride)``, its first ``width`` columns written to ``c``
    ``(address of the corner, row stride, column stride)``: straight when they are a
    contiguous 32, else through the ``(ROWS, 32)`` ``scratch`` (a short panel's padding
    must not reach ``c``; a convolution's ``c`` can be transposed)."""
    pc, c_rows, c_cols = c
    if width == PANEL and c_cols == 1:
        run_panel(rows, a[0], a[1], a[2], b[0], b[1], k, pc, c_rows, 0)
        return
    run_panel(rows, a[0], a[1], a[2], b[0], b[1], k, np.int64(scratch.ctypes.data), PANEL, 0)
    for r in range(rows):
        for j in range(width):
            store(pc, r * c_rows + j * c_cols, scratch[r, j])


#: From this depth a product by whole panels runs in blocks of at most :data:`K_BLOCK`: a
#: panel of 2048 rows (256 KB) no longer stays in a 512 KB L2 beside the rows it meets, so
#: every tile of rows read it from L3 again. A block of a panel (32 KB) stays in L1 while
#: the tiles of rows pass, and the rows' block in L2 from panel to panel. ResNet's 3x3
#: convolutions of 512 channels on 7x7 (K = 4608) on an AMD EPYC Zen 3 (512 KB L2): see
#: benchmarks/NOTES.md. A product whose result is transposed (a convolution's) pays for
#: blocks with a buffer, and takes them only from here.
BLOCKED_MIN_DEPTH = 2048
K_BLOCK = 256


def _direct_blocked_min_depth() -> int:
    """The depth from which a product that writes its result in place runs in blocks: the
    first whose tile columns of a weight panel (:data:`TILE_COLUMNS` floats per step of
    ``k``) exceed the first-level data cache, so that every tile of rows would read them
    from L2 again. AVX-512 tiles take 128 bytes of the weight per step of ``k`` for 14
    multiply-adds, more than L2 keeps up with (Intel Xeon, Emerald Rapids, 48 KB L1, two
    threads against onnxruntime: 128x768x3072 1.20-1.24x -> 1.12x, 196x1536x384 1.31x ->
    1.17x); AVX2 tiles take half as much, so their blocks start at twice the depth."""
    return min(BLOCKED_MIN_DEPTH, target.l1_data_bytes() // (TILE_COLUMNS * 4) + 1)


DIRECT_BLOCKED_MIN_DEPTH = _direct_blocked_min_depth()


def _prefetch_intrinsic(name: str, write: int, locality: int, doc: str):
    """An intrinsic calling ``llvm.prefetch`` on a byte address: ``write`` 1 asks for the
    line to be owned for writing, ``locality`` 0-3 how close to the core to keep it."""

    def prefetch_at(typingctx, address):
        if not isinstance(address, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            vir.prefetch(builder, args[0], write, locality)
            return context.get_dummy_value()

        return types.none(types.int64), codegen

    prefetch_at.__name__ = prefetch_at.__qualname__ = name
    prefetch_at.__doc__ = doc
    return intrinsic(prefetch_at)


prefetch = _prefetch_intrinsic(
    "prefetch",
    0,
    2,
    """Ask for the cache line at byte ``address`` to be brought into L2 (``prefetcht1`` on
    x86), without waiting for it.""",
)

prefetch_write = _prefetch_intrinsic(
    "prefetch_write",
    1,
    3,
    """Ask for the cache line at byte ``address`` to be owned for writing (``prefetchw`` on
    x86), without waiting for it: a store to a line in no cache waits for the line to be
    read first, and a store buffer full of such stores stalls the core.""",
)


#: Tiles of rows from which a product by panels prefetches the next panel. With fewer,
#: the product streams its weight as fast as the cores' own prefetchers fetch it, and a
#: panel's prefetches at once only queued ahead of the tile's loads (an MLP of one row
#: per call, 784-512-512-10: 38 -> 44 us).
PREFETCH_MIN_TILES = 4


@njit(nogil=True)
def _prefetch_part(address, size, part, parts):
    """Prefetch part ``part`` of ``parts`` of the ``size`` bytes at ``address``: the
    weight panel the next pass of a product by panels reads, a slice with each tile of
    this one. In a model the weights come from memory (GPT-2's 340 MB exceed any L3),
    and the first tile of each panel waited for it: a 768->3072 layer of 128 rows took
    2.8 ms against 2.0 alone (Intel Xeon, Emerald Rapids, 2 threads)."""
    lo = size * part // parts
    hi = size * (part + 1) // parts
    for at in range(lo - lo % 64, hi, 64):
        prefetch(address + at)


@njit(nogil=True)
def _blocked(a, pw, k, c, rows, panels, tiles):
    """:func:`product_range` over whole panels in blocks of equal depth, at most
    :data:`K_BLOCK` (the first block writes, the others add); a transposed ``c`` gets the
    result through a buffer."""
    pa, a_rows, a_cols = a
    pc, c_rows, c_cols = c
    extent = rows[1] - rows[0]
    columns = (panels[1] - panels[0]) * PANEL
    direct = c_cols == 1
    buffer = np.empty((0 if direct else extent, columns), np.float32)
    if direct:
        base, ldc = pc + (rows[0] * c_rows + panels[0] * PANEL) * 4, c_rows
    else:
        base, ldc = np.int64(buffer.ctypes.data), columns
    count = panels[1] - panels[0]
    # Equal blocks: a last one of a few rows of k would store and reload every tile of
    # the result for little work.
    step = -(-k // -(-k // K_BLOCK))
    for k0 in range(0, k, step):
        depth = min(step, k - k0)
        for panel in range(count):
            pb = pw + ((panel + panels[0]) * k + k0) * PANEL * 4
            # The block after this one: of the next panel, or of the first at the next k.
            if panel + 1 < count:
                following, size = pb + k * PANEL * 4, depth
            else:
                following = pw + (panels[0] * k + k0 + depth) * PANEL * 4
                size = min(step, k - k0 - depth)
            for t in range(tiles):
                if tiles >= PREFETCH_MIN_TILES:
                    _prefetch_part(following, size * PANEL * 4, t, tiles)
                r0 = t * extent // tiles
                height = (t + 1) * extent // tiles - r0
                pr = pa + ((rows[0] + r0) * a_rows + k0 * a_cols) * 4
                corner = base + (r0 * ldc + panel * PANEL) * 4
                run_panel(height, pr, a_rows, a_cols, pb, PANEL, depth, corner, ldc,
                          1 if k0 > 0 else 0)  # fmt: skip
    if not direct:
        first = panels[0] * PANEL
        for r in range(extent):
            for u in range(columns):
                store(pc, (rows[0] + r) * c_rows + (first + u) * c_cols, buffer[r, u])


@njit(nogil=True)
def product_range(a, pw, k, units, c, rows, panels, rows_outer, post=0):
    """Rows ``rows[0]:rows[1]`` by panels ``panels[0]:panels[1]`` of the float32 product
    ``c = a @ w.T`` of ``a`` (``k`` columns) by the packed weight at ``pw`` (``units`` of
    its rows exist).

    ``a`` and ``c`` are ``(address, row stride, column stride)`` in elements: a row of
    ``a`` is one row of data for a dense layer, one output pixel of an im2col matrix for a
    convolution (whose ``c`` is transposed: its columns are rows of the output; see
    :func:`_tile_into`). ``rows_outer`` walks tiles of rows in the outer loop, for
    weights small enough to stay in cache while the rows stream past; else panels, so
    that each panel of a big weight is read once, and a long ``k`` in blocks.

    ``post``, when not 0, is the address of a dense layer's epilogue
    (:func:`post_epilogue`, one bias per column of ``c``, which must not be transposed):
    applied by :func:`post_columns` to each strip of ``c`` as soon as it is final, while
    it is still in cache, and by whichever thread computed it."""
    # Callers pass literals, unsigned addresses and int64s: one set of types for the loops
    # below, so that numba compiles them once rather than once per caller.
    i = np.int64
    _product_range((i(a[0]), i(a[1]), i(a[2])), i(pw), i(k), i(units),
                   (i(c[0]), i(c[1]), i(c[2])), (i(rows[0]), i(rows[1])),
                   (i(panels[0]), i(panels[1])), i(rows_outer), i(post))  # fmt: skip


@njit(nogil=True)
def _product_range(a, pw, k, units, c, rows, panels, rows_outer, post):
    pa, a_rows, a_cols = a
    pc, c_rows, c_cols = c
    scratch = np.empty((ROWS, PANEL), np.float32)
    # Tiles of equal height (to one row): a last tile of one or two rows would wait on its
    # few accumulators' multiply-add latency for as long as a full tile takes.
    extent = rows[1] - rows[0]
    tiles = -(-extent // ROWS)
    full = min(panels[1], units // PANEL)
    deep = k >= (BLOCKED_MIN_DEPTH if c_cols != 1 else DIRECT_BLOCKED_MIN_DEPTH)
    if deep and not rows_outer and full > panels[0]:
        _blocked(a, pw, k, c, rows, (panels[0], full), tiles)
        if post != 0:
            post_columns(pc, c_rows, rows, (panels[0] * PANEL, full * PANEL), post)
        panels = (full, panels[1])
    count = panels[1] - panels[0]
    columns = (panels[0] * PANEL, min(units, panels[1] * PANEL))
    panel_bytes = k * PANEL * 4
    for outer in range(tiles if rows_outer else count):
        for inner in range(count if rows_outer else tiles):
            t, panel = (outer, inner) if rows_outer else (inner, outer)
            if not rows_outer and outer + 1 < count and tiles >= PREFETCH_MIN_TILES:
                _prefetch_part(pw + (panels[0] + outer + 1) * panel_bytes, panel_bytes, t, tiles)
            r0 = rows[0] + t * extent // tiles
            height = rows[0] + (t + 1) * extent // tiles - r0
            panel += panels[0]
            first = panel * PANEL
            width = min(PANEL, units - first)
            pr = pa + r0 * a_rows * 4
            pb = pw + panel * k * PANEL * 4
            corner = pc + (r0 * c_rows + first * c_cols) * 4
            _tile_into(height, (pr, a_rows, a_cols), (pb, np.int64(PANEL)), k,
                       (corner, c_rows, c_cols), width, scratch)  # fmt: skip
        if post != 0:
            # The strip this pass of the outer loop finished: a tile of rows across the
            # panels, or a group of panels down the rows. A panel alone is too narrow:
            # rows of 32 columns ran mostly in the epilogue loops' scalar remainders.
            if rows_outer:
                r0 = rows[0] + outer * extent // tiles
                strip = (r0, rows[0] + (outer + 1) * extent // tiles)
                post_columns(pc, c_rows, strip, columns, post)
            elif (outer + 1) % POST_PANELS == 0 or outer == count - 1:
                first = (panels[0] + outer // POST_PANELS * POST_PANELS) * PANEL
                last = min(units, (panels[0] + outer + 1) * PANEL)
                post_columns(pc, c_rows, rows, (first, last), post)


#: Panels a product by panels finishes before it applies their epilogue (a strip of
#: 256 columns down the rows it computed).
POST_PANELS = 8


@njit(nogil=True, error_model="numpy")  # see gelu
def activate(row, lo, hi, activation):
    """``row[j] = act(row[j])`` for every element of the float32 ``row``: the epilogue's
    ``activation`` (:func:`post_epilogue`) with its constants ``lo`` and ``hi``. One loop
    per case, the case tested outside it, so that LLVM vectorizes them."""
    width = row.size
    if activation == GELU:
        for j in range(width):
            row[j] = gelu(row[j], lo, hi)
    elif activation == GELU_TANH:
        for j in range(width):
            row[j] = gelu_tanh(row[j], lo, hi)
    elif activation == SWISH:
        for j in range(width):
            row[j] = vx.swish_f32(row[j])
    else:
        relu = activation == RELU
        for j in range(width):
            row[j] = clamp(row[j], lo, hi, relu)


@njit(nogil=True, error_model="numpy")
def post_columns(pc, ldc, rows, columns, post):
    """The epilogue at address ``post`` (:func:`post_epilogue`) on rows ``rows[0]:rows[1]``
    and columns ``columns[0]:columns[1]`` of the float32 matrix at ``pc`` (rows ``ldc``
    elements apart, columns contiguous), column ``u`` biased by bias ``u``: a dense layer's
    bias, residual and activation."""
    lo, hi, activation, residual, delta = post_fields(post)
    u0, width = columns[0], columns[1] - columns[0]
    bias = carray(floats(post + (POST_HEADER + u0) * 4), (width,))
    for r in range(rows[0], rows[1]):
        at = pc + (r * ldc + u0) * 4
        # Arrays, not loads and stores at computed addresses, and a loop per case with
        # the case tested outside it: LLVM vectorizes those (a gelu by addresses stayed
        # scalar, 3x slower).
        row = carray(floats(at), (width,))
        if residual:
            added = carray(floats(at + delta), (width,))
            for j in range(width):
                row[j] = np.float32(np.float32(row[j] + bias[j]) + added[j])
        else:
            for j in range(width):
                row[j] = np.float32(row[j] + bias[j])
        activate(row, lo, hi, activation)


@njit(nogil=True)
def panel_product(pa, k, rows, b, columns, c, post=0, unit=0):
    """``c[r, j] = sum_k a[r, k] * b[k, j]`` for ``r < rows`` and ``j < columns``, all
    float32: ``a`` is one panel of a packed weight at address ``pa`` (its rows 1 element
    apart, its ``k`` steps a panel apart), ``b`` a plain matrix ``(address, row stride)``
    whose groups of 32 columns are read as panels (an im2col block of pixels), ``c``
    ``(address, row stride)`` with contiguous rows. The last group of columns, when
    short, is read as a whole panel: ``b`` must have 31 readable elements after its last
    row. ``post``, when not 0, is the address of an epilogue (:func:`post_epilogue`)
    whose bias row ``unit`` is the panel's first: each row is stored biased and clamped.

    This is a convolution's product in its NCHW orientation: each tile writes 32
    contiguous pixels of :data:`ROWS` output channels straight to the output, all of them
    in one call of :data:`run_pixel_panels`."""
    i = np.int64
    run_pixel_panels(i(pa), i(k), i(rows), i(b[0]), i(b[1]), i(columns), i(c[0]), i(c[1]),
                     i(post), i(unit))  # fmt: skip


_PIXEL_PANELS = types.void(*([types.int64] * 10))


def _pixel_k_block() -> int:
    """The depth of the blocks a product by pixel panels runs a long ``k`` in: the
    largest power of two whose blocks of the weight panel and of the pixel panel (a
    :data:`PANEL` floats wide row per step of ``k`` each) fill at most three quarters of
    the first-level data cache, so that every tile of the item after the first finds both
    there. A tile walks its block a row of the input apart; blocks any deeper are read
    from L2 again by every tile (Intel Xeon, Emerald Rapids, 48 KB L1, one thread: 1024
    to 256 channels at 14x14 102 GFLOP/s in blocks of 256, 124 in blocks of 128; 2048 to
    512 at 7x7 86 and 99)."""
    rows = target.l1_data_bytes() * 3 // 4 // (2 * PANEL * 4)
    block = 16
    while block * 2 <= rows:
        block *= 2
    return block


PIXEL_K_BLOCK = _pixel_k_block()


@register_jitable
def one_k_block(k):
    """Whether the pixel panels run a product of depth ``k`` as one block of it (a ``k``
    within half a block of one runs so, not as a full block and a scrap)."""
    return k <= PIXEL_K_BLOCK * 3 // 2


#: float32 words of an epilogue's header (:func:`post_epilogue`) before its biases: lo,
#: hi, the activation (:data:`CLAMP`, :data:`RELU` or :data:`SWISH`), whether a residual
#: is added, and the residual's distance from the output in bytes (an int64 in words 4
#: and 5).
POST_HEADER = 6


@njit(nogil=True)
def post_epilogue(units, bias, lo, hi, activation, residual, out):
    """The epilogue a convolution's loops apply as they store each element of output
    channel (unit) ``u``: ``act(sum + bias[u] + residual)``, as a float32 array whose
    address the loops take (see :data:`POST_HEADER`). ``bias`` has ``units`` elements, or
    one for all of them; ``residual`` is an array of ``out``'s shape and layout to add
    element by element, or an empty one for none (the loops find an element's residual
    at a fixed distance from it); ``activation`` is :data:`CLAMP` (to ``[lo, hi]``, NaN
    kept as ``clip`` keeps it), :data:`RELU` (the clamp turning NaN into ``lo``, as
    ``nn.relu`` does) or :data:`SWISH`. ``residual`` may be ``out`` itself (the memory
    plan writes a pointwise convolution's output over its residual when the residual
    dies there, :mod:`compiler.backend.in_place`); the delta is then 0 and the loops
    that support it read each element's residual just before they store it
    (:func:`writes_over_residual`)."""
    post = np.empty(POST_HEADER + units, np.float32)
    post[0], post[1], post[2] = lo, hi, activation
    post[3] = 1.0 if residual.size else 0.0
    delta = np.int64(residual.ctypes.data) - np.int64(out.ctypes.data) if residual.size else 0
    store_word(post.ctypes.data, 2, delta)
    step = 0 if bias.size == 1 else 1
    for u in range(units):
        post[POST_HEADER + u] = bias[u * step]
    return post


@njit(nogil=True)
def post_address(post):
    """The address compiled loops take for the epilogue array ``post``: 0 when it is
    empty (no epilogue)."""
    return np.int64(post.ctypes.data) if post.size else np.int64(0)


@njit(nogil=True)
def writes_over_residual(post):
    """Whether the epilogue at address ``post`` (not 0) adds a residual that is the output
    itself: an output the memory plan put in place of its residual (delta 0), which the
    loops must read at each element before they store it, and never store a partial sum
    into."""
    return load(post, 3) != 0 and load_word(post, 2) == 0


@njit(nogil=True)
def moved_residual(post, units, residual, out):
    """A copy of the epilogue at address ``post`` (``units`` biases) that reads its
    residual from ``residual``, laid out as ``out``: for a loop that cannot write over
    the residual (:func:`writes_over_residual`), given a copy of it."""
    moved = carray(floats(post), (POST_HEADER + units,)).copy()
    store_word(moved.ctypes.data, 2, np.int64(residual.ctypes.data) - np.int64(out.ctypes.data))
    return moved


@njit(nogil=True)
def post_fields(post):
    """``(lo, hi, activation, residual, delta)`` of the epilogue at address ``post`` (not
    0)."""
    activation, residual = np.int64(load(post, 2)), np.int64(load(post, 3) != 0)
    return load(post, 0), load(post, 1), activation, residual, load_word(post, 2)


@njit(nogil=True)
def clamp(v, lo, hi, relu):
    """``v`` clamped as the tiles clamp it (see :func:`_post`)."""
    if relu:
        v = v if v > lo else lo
    elif v < lo:
        v = lo
    return hi if v > hi else v


# numpy's error model for the functions that reach sigmoid_f32's division: Python's
# checks it for zero, and the branch keeps the loops around it scalar (8x slower).


@njit(nogil=True, error_model="numpy")
def gelu(v, divisor, half):
    """``(v * (erf(v / divisor) + 1)) * half`` in float32, each step rounded as the
    kernels' elementwise code rounds ``divide``, ``erf``, ``add`` and two ``multiply``s."""
    inner = np.float32(vx.erf_f32(np.float32(v / divisor)) + np.float32(1.0))
    return np.float32(np.float32(v * inner) * half)


@njit(nogil=True, error_model="numpy")
def gelu_tanh(v, scale, half):
    """``(v * half) * (tanh((v + v * v * v * GELU_CUBIC) * scale) + 1)`` in float32 (the
    ``scale`` is the square root of 2 / pi, ``half`` one half), each step rounded as the
    kernels' elementwise code rounds the ``multiply``s, ``add``s and ``tanh`` GPT-2's
    exported gelu is made of (its cube is two ``multiply``s after ``SimplifyPower``)."""
    cube = np.float32(np.float32(v * v) * v)
    inner = np.float32(v + np.float32(cube * GELU_CUBIC))
    t = np.float32(vx.tanh_f32(np.float32(inner * scale)) + np.float32(1.0))
    return np.float32(np.float32(v * half) * t)


@njit(nogil=True)
def apply_post(out, post, first=0):
    """The epilogue at address ``post`` (:func:`post_epilogue`; 0: none) on a
    ``(units, pixels)`` float32 ``out`` with contiguous rows (part of the output the
    epilogue was made for) whose row ``u`` is unit ``first + u``, for the loops that
    cannot apply it as they store.

    The loops take the rows by address (:func:`_post_rows`), one set of argument types
    whatever the view: compiled for each view type, they took 1.3-2.5 s of each
    process's compile per type (three for ResNet-50's library units, AMD EPYC Zen 4),
    and a view typed as any layout (``a[:, :n]``) left them scalar.

    Raises
    ------
    ValueError
        If ``out`` is not float32 or its rows are not contiguous.
    """
    if post == 0 or out.shape[0] == 0 or out.shape[1] == 0:
        return
    if out.itemsize != 4 or (out.shape[1] > 1 and out.strides[1] != 4):
        raise ValueError("apply_post: the output must be float32 with contiguous rows")
    i = np.int64
    _post_rows(i(out.ctypes.data), i(out.shape[0]), i(out.shape[1]), i(out.strides[0] // 4),
               i(post), i(first))  # fmt: skip


@njit(nogil=True, error_model="numpy")
def _post_rows(pc, units, pixels, ldc, post, first):
    """:func:`apply_post` on ``units`` rows of ``pixels`` floats, ``ldc`` apart from byte
    address ``pc``."""
    lo, hi, activation, residual, delta = post_fields(post)
    relu = activation == RELU
    for u in range(units):
        bias = load(post, POST_HEADER + first + u)
        at = pc + u * ldc * 4
        row = carray(floats(at), (pixels,))
        # Loops from 0 over a row, one per case, reading and writing it by one name: LLVM
        # vectorizes them (from another start, numpy's negative-index rule kept them
        # scalar, 7x slower; through two names for the same row, its overlap check did).
        if activation == SWISH and residual:
            for j in range(pixels):
                v = np.float32(np.float32(row[j] + bias) + load(at + delta, j))
                row[j] = vx.swish_f32(v)
        elif activation == SWISH:
            for j in range(pixels):
                v = np.float32(row[j] + bias)
                row[j] = vx.swish_f32(v)
        elif residual:
            for j in range(pixels):
                row[j] = clamp(np.float32(np.float32(row[j] + bias) + load(at + delta, j)), lo, hi,
                               relu)  # fmt: skip
        else:
            for j in range(pixels):
                row[j] = clamp(np.float32(row[j] + bias), lo, hi, relu)


@callbacks.entry(symbols.PIXEL_PANELS, _PIXEL_PANELS)
def _pixel_panels_entry(pa, k, rows, pb, ldb, columns, pc, ldc, post, unit):
    """:func:`panel_product`, its tiles inline:
    a thin layer's ``k`` (16 input channels) is a short loop, and a call per tile cost
    such a layer a fifth of its time."""
    # Without an epilogue the tiles clamp to the infinities, a few instructions against a
    # tile's hundreds of multiply-adds; so do the blocks of a long k before the last.
    none = np.int64(0)
    infinity = np.float32(np.inf)
    bias, lo, hi, activation, residual, delta = none, -infinity, infinity, none, none, none
    if post != 0:
        lo, hi, activation, residual, delta = post_fields(post)
        bias = post + (POST_HEADER + unit) * 4
    tiles = -(-rows // ROWS)
    block = k if one_k_block(k) else PIXEL_K_BLOCK
    # An output written over its own residual (delta 0, see post_epilogue) must not hold
    # a block's partial sums: they would replace the residual before the last block adds
    # it. Those sums then stay in the scratch tiles too.
    in_place = residual != 0 and delta == 0 and block < k
    for first in range(0, columns, PANEL):
        width = min(PANEL, columns - first)
        # A short last panel: its extra columns hold whatever follows b's rows, and go
        # through the scratch tiles so they do not reach c.
        base, ld = pc + first * 4, ldc
        short = width < PANEL or in_place
        if short:
            # The tiles add the bias; the residual and the activation come with the copy
            # out.
            scratch = np.empty((PANEL, PANEL), np.float32)
            base, ld = np.int64(scratch.ctypes.data), np.int64(PANEL)
        for k0 in range(0, k, block):
            depth = min(block, k - k0)
            last = k0 + depth == k
            for t in range(tiles):
                r0 = t * rows // tiles
                height = (t + 1) * rows // tiles - r0
                a = pa + (k0 * PANEL + r0) * 4
                b = pb + (k0 * ldb + first) * 4
                target = base + r0 * ld * 4
                tb = bias + r0 * 4 if last and bias else none
                tlo, thi, tact, tres = lo, hi, activation, residual
                if short or not last:
                    tlo, thi, tact, tres = -infinity, infinity, none, none
                for half in range(0, PANEL, TILE_COLUMNS):
                    if k0 == 0:
                        tile_post(height, a, 1, PANEL, b + half * 4, ldb, depth, target + half * 4,
                                  ld, tb, tlo, thi, tact, tres, delta)  # fmt: skip
                    else:
                        tile_add_post(height, a, 1, PANEL, b + half * 4, ldb, depth,
                                      target + half * 4, ld, tb, tlo, thi, tact, tres,
                                      delta)  # fmt: skip
        if short:
            _finish_rows(pc + first * 4, ldc, np.int64(scratch.ctypes.data), rows, width,
                         residual, delta, lo, hi, activation)  # fmt: skip


@njit(nogil=True, error_model="numpy")  # see gelu
def _finish_rows(pc, ldc, sums_at, rows, width, residual, delta, lo, hi, activation):
    """``c[r, j] = act(sums[r, j] + res[r, j])`` (no add without ``residual``) for ``r <
    rows`` and ``j < width``: the copy of a short pixel panel out of its scratch tile
    (``sums`` at ``sums_at``, rows :data:`PANEL` apart) into ``c`` at ``pc`` (rows ``ldc``
    apart), the residual ``delta`` bytes from each element. Arrays over raw addresses,
    one loop per case with the case tested outside it, so that LLVM vectorizes them:
    element by element, the case tested for each, the short panel of a 7x7 plane (17 of
    its 49 pixels) took a 192 to 1152 expansion from 165 to 235 us with a clamp; and a
    call per row on slices of the scratch tile (reference counted) cost 55 ns a row, a
    96 to 576 expansion at 14x14 (a short panel of 4 pixels) 127 us against 76 for
    12x16 pixels (Intel Xeon, Emerald Rapids, 2 threads)."""
    for r in range(rows):
        at = pc + r * ldc * 4
        row = carray(floats(at), (width,))
        sums = carray(floats(sums_at + r * PANEL * 4), (width,))
        if residual:
            added = carray(floats(at + delta), (width,))
            for j in range(width):
                row[j] = np.float32(sums[j] + added[j])
        else:
            for j in range(width):
                row[j] = sums[j]
        activate(row, lo, hi, activation)


#: ``run_pixel_panels(pa, k, rows, pb, ldb, columns, pc, ldc, post, unit)``:
#: :func:`panel_product`, by symbol.
run_pixel_panels = types.ExternalFunction(symbols.PIXEL_PANELS, _PIXEL_PANELS)


#: Packed weights up to this many bytes stay in a core's L2 cache while rows stream past.
CACHED_WEIGHT_BYTES = 1 << 19


def _pointer_codegen(kind):
    pointer = types.CPointer(kind)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(types.int64), codegen


@intrinsic
def floats(typingctx, address):
    """The float32 pointer at byte ``address`` (for :func:`numba.carray`)."""
    return _pointer_codegen(types.float32) if isinstance(address, types.Integer) else None


@intrinsic
def doubles(typingctx, address):
    """The float64 pointer at byte ``address`` (for :func:`numba.carray`)."""
    return _pointer_codegen(types.float64) if isinstance(address, types.Integer) else None


@intrinsic
def int64s(typingctx, address):
    """The int64 pointer at byte ``address`` (for :func:`numba.carray`)."""
    return _pointer_codegen(types.int64) if isinstance(address, types.Integer) else None


@intrinsic
def store(typingctx, base, index, value):
    """Write float32 ``value`` to element ``index`` of the float32 array at ``base``."""
    if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.float32)
        builder.store(value, vir.address(builder, args[0], args[1], F32), align=4)
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, value), codegen


def _pairs_codegen(odd_too: bool):
    """The code of :func:`split_pairs` (``odd_too``) or :func:`take_evens`: the even
    elements of each 16 pairs by one shuffle of two vector loads, the odd ones by a
    second; the pairs left over one at a time."""

    def codegen(context, builder, signature, args):
        source, even, *rest = (
            context.cast(builder, value, kind, types.int64)
            for value, kind in zip(args, signature.args)
        )
        odd, count = rest if odd_too else (None, rest[0])
        vectors = builder.lshr(count, I64(4))
        indices = ir.VectorType(ir.IntType(32), LANES)
        evens = ir.Constant(indices, list(range(0, 2 * LANES, 2)))
        odds = ir.Constant(indices, list(range(1, 2 * LANES, 2)))
        with cgutils.for_range(builder, vectors) as loop:
            at = builder.mul(loop.index, I64(2 * LANES))
            low = builder.load(vir.address(builder, source, at, VEC), align=4)
            high = builder.load(
                vir.address(builder, source, builder.add(at, I64(LANES)), VEC), align=4
            )
            to = builder.mul(loop.index, I64(LANES))
            builder.store(builder.shuffle_vector(low, high, evens),
                          vir.address(builder, even, to, VEC), align=4)  # fmt: skip
            if odd_too:
                builder.store(builder.shuffle_vector(low, high, odds),
                              vir.address(builder, odd, to, VEC), align=4)  # fmt: skip
        done = builder.mul(vectors, I64(LANES))
        with cgutils.for_range(builder, builder.sub(count, done)) as loop:
            m = builder.add(done, loop.index)
            pair = builder.mul(m, I64(2))
            first = builder.load(vir.address(builder, source, pair, F32), align=4)
            builder.store(first, vir.address(builder, even, m, F32), align=4)
            if odd_too:
                second = builder.load(
                    vir.address(builder, source, builder.add(pair, I64(1)), F32), align=4
                )
                builder.store(second, vir.address(builder, odd, m, F32), align=4)
        return context.get_dummy_value()

    return codegen


@intrinsic
def split_pairs(typingctx, source, even, odd, count):
    """``even[m] = source[2 m]`` and ``odd[m] = source[2 m + 1]`` for ``m < count``, float32s at
    the byte addresses ``source``, ``even`` and ``odd``: a row split by column phase for a
    stride of 2. Two vector loads and two shuffles per 16 pairs; numba's loop of the same
    reads one element at a time (0.5 ns an element against a copy's 0.05 in cache)."""
    if not all(isinstance(t, types.Integer) for t in (source, even, odd, count)):
        return None
    return types.none(types.int64, types.int64, types.int64, types.int64), _pairs_codegen(True)


@njit(nogil=True)
def split_row(source, even, odd, width):
    """``even[m] = source[2 m]`` and ``odd[m] = source[2 m + 1]`` for the ``width`` float32s
    of a row at byte address ``source``: :func:`split_pairs` over its pairs, and an odd
    width's last element as the last even one (the row's column phases for a stride of 2,
    as im2col and the max pools read them)."""
    split_pairs(source, even, odd, width // 2)
    if width % 2:
        store(even, width // 2, load(source, width - 1))


@intrinsic
def take_evens(typingctx, source, even, count):
    """``even[m] = source[2 m]`` for ``m < count``, float32s at the byte addresses ``source``
    and ``even``: every other element of a row, as a column stride of 2 reads it, by
    vector shuffles where numba's loop gathers one element at a time. It reads
    ``source[2 m + 1]`` too for every ``m`` below ``count`` rounded down to 16."""
    if not all(isinstance(t, types.Integer) for t in (source, even, count)):
        return None
    return types.none(types.int64, types.int64, types.int64), _pairs_codegen(False)


@intrinsic
def load(typingctx, base, index):
    """Element ``index`` of the float32 array at ``base``."""
    if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        index = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.load(vir.address(builder, args[0], index, F32), align=4)

    return types.float32(types.int64, index), codegen
