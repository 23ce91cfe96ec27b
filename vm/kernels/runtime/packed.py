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
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from vm.kernels.runtime.panels import PANEL
from vm.kernels.runtime.target import has_avx512

_LANES = 16
#: Columns of a panel one tile covers, and rows of ``a`` per tile. AVX-512: the whole
#: panel, two vectors of 16, by 7 rows (14 accumulators and 2 weight vectors of its 32
#: registers). AVX2 has 16 registers of 8 floats: a 16-lane vector is two of them, so
#: half a panel by 6 rows (12 accumulators, 2 weight registers, 1 broadcast); a whole
#: panel by 3 rows needs 17 and spills (one core of an AMD EPYC Zen 3: 45 GFLOP/s
#: against 70 at 6 by 16, on GPT-2's products).
TILE_COLUMNS = PANEL if has_avx512() else PANEL // 2
ROWS = 7 if has_avx512() else 6
_VECTORS = TILE_COLUMNS // _LANES

_F32 = ir.FloatType()
_I64 = ir.IntType(64)
_VEC = ir.VectorType(_F32, _LANES)


def _fma(module: ir.Module) -> ir.Function:
    name = f"llvm.fma.v{_LANES}f32"
    found = module.globals.get(name)
    if found is None:
        found = ir.Function(module, ir.FunctionType(_VEC, [_VEC] * 3), name=name)
    return found


def _address(builder: ir.IRBuilder, base: ir.Value, offset: ir.Value, kind: ir.Type) -> ir.Value:
    """``base + 4 * offset`` (float32 elements) as a pointer to ``kind``."""
    return builder.inttoptr(builder.add(base, builder.shl(offset, _I64(2))), kind.as_pointer())


def _emit_tile(builder: ir.IRBuilder, rows: int, args, add: bool) -> None:
    """The loop of a ``rows``-row tile, starting at the builder's block; it ends with the
    builder in a block that falls through to whatever follows. ``add``: the sums start
    from what ``c`` holds, else from zero."""
    pa, row_stride, k_stride, pb, ldb, k, pc, ldc = args
    fma = _fma(builder.module)
    function = builder.function
    loop = function.append_basic_block(f"tile{rows}.loop")
    done = function.append_basic_block(f"tile{rows}.done")

    def c_address(r: int, v: int) -> ir.Value:
        offset = builder.add(builder.mul(_I64(r), ldc), _I64(v * _LANES))
        return _address(builder, pc, offset, _VEC)

    zero = ir.Constant(_VEC, None)
    start = [
        [builder.load(c_address(r, v), align=4) if add else zero for v in range(_VECTORS)]
        for r in range(rows)
    ]
    entry = builder.block
    builder.cbranch(builder.icmp_signed(">", k, _I64(0)), loop, done)

    builder.position_at_end(loop)
    step = builder.phi(_I64)
    step.add_incoming(_I64(0), entry)
    acc = [[builder.phi(_VEC) for _ in range(_VECTORS)] for _ in range(rows)]
    for r in range(rows):
        for v in range(_VECTORS):
            acc[r][v].add_incoming(start[r][v], entry)
    panel_row = builder.mul(step, ldb)
    weights = [
        builder.load(_address(builder, pb, builder.add(panel_row, _I64(v * _LANES)), _VEC), align=4)
        for v in range(_VECTORS)
    ]
    undef = ir.Constant(_VEC, ir.Undefined)
    splat = ir.Constant(ir.VectorType(ir.IntType(32), _LANES), [0] * _LANES)
    summed = []
    column = builder.mul(step, k_stride)
    for r in range(rows):
        offset = builder.add(builder.mul(_I64(r), row_stride), column)
        value = builder.load(_address(builder, pa, offset, _F32), align=4)
        broadcast = builder.shuffle_vector(
            builder.insert_element(undef, value, ir.IntType(32)(0)), undef, splat
        )
        summed.append(
            [builder.call(fma, [broadcast, weights[v], acc[r][v]]) for v in range(_VECTORS)]
        )
    following = builder.add(step, _I64(1))
    step.add_incoming(following, loop)
    for r in range(rows):
        for v in range(_VECTORS):
            acc[r][v].add_incoming(summed[r][v], loop)
    builder.cbranch(builder.icmp_signed("<", following, k), loop, done)

    builder.position_at_end(done)
    finals = {}
    for r in range(rows):
        for v in range(_VECTORS):
            finals[r, v] = final = builder.phi(_VEC)
            final.add_incoming(start[r][v], entry)
            final.add_incoming(summed[r][v], loop)
    for (r, v), final in finals.items():
        builder.store(final, c_address(r, v), align=4)


def _tile_codegen(add: bool):
    def codegen(context, builder, signature, args):
        # One loop per row count: the accumulators must be compile-time values.
        function = builder.function
        end = function.append_basic_block("tile.end")
        count = builder.sext(args[0], _I64) if args[0].type.width < 64 else args[0]
        switch = builder.switch(count, end)
        for rows_here in range(1, ROWS + 1):
            case = function.append_basic_block(f"tile{rows_here}")
            switch.add_case(_I64(rows_here), case)
            builder.position_at_end(case)
            _emit_tile(builder, rows_here, args[1:], add)
            builder.branch(end)
        builder.position_at_end(end)
        return context.get_dummy_value()

    return codegen


@intrinsic
def tile(typingctx, rows, pa, row_stride, k_stride, pb, ldb, k, pc, ldc):
    """``c[r, :w] = sum_k a[r * row_stride + k * k_stride] * panel[k, :w]`` for
    ``r < rows`` (1 to :data:`ROWS`; other counts do nothing) and ``w`` =
    :data:`TILE_COLUMNS`, all float32 at the byte addresses ``pa``, ``pb`` (``k`` rows of a
    panel, ``ldb`` elements apart) and ``pc`` (rows ``ldc`` elements apart)."""
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


@njit(nogil=True)
def _tile_into(rows, a, b, k, c, width, scratch):
    """One :func:`tile` of ``rows`` rows of ``a`` ``(address, row stride, k stride)`` by
    the panel ``b`` ``(address, row stride)``, its first ``width`` columns written to ``c``
    ``(address of the corner, row stride, column stride)``: straight when they are a
    contiguous 32, else through the ``(ROWS, 32)`` ``scratch`` (a short panel's padding
    must not reach ``c``; a convolution's ``c`` can be transposed)."""
    pc, c_rows, c_cols = c
    if width == PANEL and c_cols == 1:
        for first in range(0, PANEL, TILE_COLUMNS):
            tile(rows, a[0], a[1], a[2], b[0] + first * 4, b[1], k, pc + first * 4, c_rows)
        return
    for first in range(0, PANEL, TILE_COLUMNS):
        if first < width:
            corner = scratch.ctypes.data + first * 4
            tile(rows, a[0], a[1], a[2], b[0] + first * 4, b[1], k, corner, PANEL)
    for r in range(rows):
        for j in range(width):
            store(pc, r * c_rows + j * c_cols, scratch[r, j])


#: From this depth a product by whole panels runs in blocks of :data:`K_BLOCK`: a panel of
#: 2048 rows (256 KB) no longer stays in a 512 KB L2 beside the rows it meets, so every tile
#: of rows read it from L3 again. A block of a panel (32 KB) stays in L1 while the tiles of
#: rows pass, and the rows' block in L2 from panel to panel. ResNet's 3x3 convolutions of
#: 512 channels on 7x7 (K = 4608) on an AMD EPYC Zen 3 (512 KB L2): see benchmarks/NOTES.md.
BLOCKED_MIN_DEPTH = 2048
K_BLOCK = 256


@njit(nogil=True)
def _blocked(a, pw, k, c, rows, panels, tiles):
    """:func:`product_range` over whole panels in blocks of :data:`K_BLOCK` (the first
    block writes, the others add); a transposed ``c`` gets the result through a buffer."""
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
    for k0 in range(0, k, K_BLOCK):
        depth = min(K_BLOCK, k - k0)
        for panel in range(panels[1] - panels[0]):
            pb = pw + ((panel + panels[0]) * k + k0) * PANEL * 4
            for t in range(tiles):
                r0 = t * extent // tiles
                height = (t + 1) * extent // tiles - r0
                pr = pa + ((rows[0] + r0) * a_rows + k0 * a_cols) * 4
                corner = base + (r0 * ldc + panel * PANEL) * 4
                for first in range(0, PANEL, TILE_COLUMNS):
                    if k0 == 0:
                        tile(height, pr, a_rows, a_cols, pb + first * 4, PANEL, depth,
                             corner + first * 4, ldc)  # fmt: skip
                    else:
                        tile_add(height, pr, a_rows, a_cols, pb + first * 4, PANEL, depth,
                                 corner + first * 4, ldc)  # fmt: skip
    if not direct:
        first = panels[0] * PANEL
        for r in range(extent):
            for u in range(columns):
                store(pc, (rows[0] + r) * c_rows + (first + u) * c_cols, buffer[r, u])


@njit(nogil=True)
def product_range(a, pw, k, units, c, rows, panels, rows_outer):
    """Rows ``rows[0]:rows[1]`` by panels ``panels[0]:panels[1]`` of the float32 product
    ``c = a @ w.T`` of ``a`` (``k`` columns) by the packed weight at ``pw`` (``units`` of
    its rows exist).

    ``a`` and ``c`` are ``(address, row stride, column stride)`` in elements: a row of
    ``a`` is one row of data for a dense layer, one output pixel of an im2col matrix for a
    convolution (whose ``c`` is transposed: its columns are rows of the output; see
    :func:`_tile_into`). ``rows_outer`` walks tiles of rows in the outer loop, for
    weights small enough to stay in cache while the rows stream past; else panels, so
    that each panel of a big weight is read once, and a long ``k`` in blocks."""
    pa, a_rows, a_cols = a
    pc, c_rows, c_cols = c
    scratch = np.empty((ROWS, PANEL), np.float32)
    # Tiles of equal height (to one row): a last tile of one or two rows would wait on its
    # few accumulators' multiply-add latency for as long as a full tile takes.
    extent = rows[1] - rows[0]
    tiles = -(-extent // ROWS)
    full = min(panels[1], units // PANEL)
    if k >= BLOCKED_MIN_DEPTH and not rows_outer and full > panels[0]:
        _blocked(a, pw, k, c, rows, (panels[0], full), tiles)
        panels = (full, panels[1])
    count = panels[1] - panels[0]
    for outer in range(tiles if rows_outer else count):
        for inner in range(count if rows_outer else tiles):
            t, panel = (outer, inner) if rows_outer else (inner, outer)
            r0 = rows[0] + t * extent // tiles
            height = rows[0] + (t + 1) * extent // tiles - r0
            panel += panels[0]
            first = panel * PANEL
            width = min(PANEL, units - first)
            pr = pa + r0 * a_rows * 4
            pb = pw + panel * k * PANEL * 4
            corner = pc + (r0 * c_rows + first * c_cols) * 4
            _tile_into(height, (pr, a_rows, a_cols), (pb, PANEL), k, (corner, c_rows, c_cols),
                       width, scratch)  # fmt: skip


@njit(nogil=True)
def panel_product(a, k, rows, b, columns, c):
    """``c[r, j] = sum_k a[r, k] * b[k, j]`` for ``r < rows`` and ``j < columns``, all
    float32: ``a`` is ``(address, row stride, k stride)`` in elements, ``b`` a plain
    matrix ``(address, row stride)`` whose groups of 32 columns are read as panels (an
    im2col block of pixels), ``c`` ``(address, row stride)`` with contiguous rows. The
    last group of columns, when short, is read as a whole panel: ``b`` must have 31
    readable elements after its last row.

    This is a convolution's product in its NCHW orientation, with the packed weight as
    ``a`` (rows of one panel: row stride 1, k stride 32): each tile writes 32 contiguous
    pixels of :data:`ROWS` output channels straight to the output."""
    pa, a_rows, a_cols = a
    pb, ldb = b
    pc, ldc = c
    scratch = np.empty((ROWS, PANEL), np.float32)
    tiles = -(-rows // ROWS)
    for first in range(0, columns, PANEL):
        width = min(PANEL, columns - first)
        for t in range(tiles):
            r0 = t * rows // tiles
            height = (t + 1) * rows // tiles - r0
            # A short last panel: its extra columns hold whatever follows b's rows.
            corner = pc + (r0 * ldc + first) * 4
            _tile_into(height, (pa + r0 * a_rows * 4, a_rows, a_cols), (pb + first * 4, ldb), k,
                       (corner, ldc, 1), width, scratch)  # fmt: skip


#: Packed weights up to this many bytes stay in a core's L2 cache while rows stream past.
CACHED_WEIGHT_BYTES = 1 << 19


@intrinsic
def store(typingctx, base, index, value):
    """Write float32 ``value`` to element ``index`` of the float32 array at ``base``."""
    if not (isinstance(base, types.Integer) and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.float32)
        builder.store(value, _address(builder, args[0], args[1], _F32), align=4)
        return context.get_dummy_value()

    return types.none(types.int64, types.int64, value), codegen
