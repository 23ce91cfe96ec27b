"""float32 ``exp`` (also flushed to 0 below the normal range, for softmax), ``sigmoid``,
``tanh`` and ``erf``, a row maximum and row sums, that LLVM can vectorize; ``exp`` and swish
also as LLVM IR for vector loops written in IR.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba,
llvmlite and :mod:`vm.kernels.runtime.target`.

numba turns ``np.exp`` and friends on a float32 into calls of the C library's scalar
functions, and a loop with a call in it stays scalar. These versions are arithmetic
only (range reduction and polynomials, an LLVM bitcast for powers of two), so once
inlined LLVM can vectorize the loops that call them, if-converting the few branches;
where it does not, the branches keep the scalar code to the one path a value needs.

Accuracy, measured against float64 on dense grids of float32 inputs: ``exp`` within
2 ulp (overflow to ``inf`` above 88.72, underflow through subnormals to 0 below -103.97),
``tanh`` and ``sigmoid`` within 3 ulp, ``erf`` within 3 ulp near zero and 2 ulp of 1
beyond. NaN in gives NaN out. The polynomials were fitted here, on Chebyshev nodes,
for these ranges. Their steps (and ``exp``'s) are LLVM ``fmuladd``s: one rounding where the
host has fused multiply-add, half the operations (``erf`` 0.94 -> 0.76 ns an element, ``tanh``
0.65 -> 0.57 on one core of an Intel Xeon, Emerald Rapids). :func:`exp_ir` and
:func:`swish_ir` build the same operations in IR for the register tiles' epilogues
(:mod:`vm.kernels.runtime.packed`), so a convolution's swish has the same bits fused
into its tiles or not.

Generated kernel modules import this module as ``vx``; its source is part of the
kernel cache key (see ``vm.kernels.library``).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, register_jitable

from vm.kernels.runtime.target import has_avx512

_F = np.float32


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose IEEE bit pattern is the int32 ``bits``."""
    signature = types.float32(types.int32)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return signature, codegen


@intrinsic
def _bits_from_float(typingctx, value):
    """The IEEE bit pattern of the float32 ``value``, as an int32."""
    signature = types.int32(types.float32)

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return signature, codegen


#: Whether :func:`exp_f32` scales by its power of two with LLVM's ``ldexp``: AVX-512 does
#: that in one instruction (``vscalefps``), subnormal results included, where the two
#: products by powers of two built from the exponent's bits take nine, and each result
#: below the normal range costs a microcode assist. Both round once, so the bits are the
#: same (checked over every 257th float32). One core of an AMD EPYC Zen 4, ns an
#: element: exp of N(0, 3) 0.35 -> 0.28, of U(-110, 95) 0.63 -> 0.28; swish 0.40 -> 0.35
#: and 0.71 -> 0.49. AVX2 has no such instruction, and LLVM's expansion there was slower.
_SCALEF = has_avx512()


@intrinsic
def _ldexp(typingctx, x, k):
    """``x * 2 ** k`` for a float32 ``x`` and an int32 ``k``, rounded once (LLVM's
    ``ldexp``; see :data:`_SCALEF`)."""
    signature = types.float32(types.float32, types.int32)

    def codegen(context, builder, sig, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        function = builder.module.declare_intrinsic(
            "llvm.ldexp", [f32, i32], ir.FunctionType(f32, [f32, i32])
        )
        return builder.call(function, args)

    return signature, codegen


@intrinsic
def _mul_add(typingctx, a, b, c):
    """``a * b + c`` for float32s, rounded once where the host has fused multiply-add
    (LLVM's ``fmuladd``): half the operations of a polynomial, and the same bits as
    :func:`exp_ir`'s vector form on the same host."""
    signature = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        function = builder.module.declare_intrinsic(
            "llvm.fmuladd", [f32], ir.FunctionType(f32, [f32] * 3)
        )
        return builder.call(function, args)

    return signature, codegen


@register_jitable(inline="always")
def _ordered(bits):
    """A float32's bits as an int32 that orders like the float (-0.0 just below 0.0): the
    magnitude bits of negative floats flipped. The map is its own inverse."""
    return bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))


@register_jitable
def max_f32(row):
    """The largest element of the 1-D float32 array ``row``: NaN if any element is NaN,
    ``-inf`` if it is empty."""
    # A float maximum in order keeps a loop scalar (LLVM may not reorder the comparisons
    # without fast-math flags); the same maximum over ordered integers, with NaN found by
    # a separate or, vectorizes: a softmax row of 128 took 0.3 us instead of 1.
    top = np.int32(-2147483648)
    nan = False
    for j in range(row.shape[0]):
        value = row[j]
        top = max(top, _ordered(_bits_from_float(value)))
        nan |= value != value
    if nan:
        return np.float32(np.nan)
    if row.shape[0] == 0:
        return np.float32(-np.inf)
    return _float_from_bits(_ordered(top))


# Sums below may add in any order (fast-math "reassoc", on these functions only): LLVM then
# keeps several vector lanes of partial sums, three times faster than four scalar running
# sums on a 768-long row. They add in float64, so the order moves the result by far less
# than a float32 ulp. numba compiles each separately with its own flags and LLVM inlines the
# result, flags kept, so the kernels that call them stay strict everywhere else.


@register_jitable(fastmath={"reassoc"})
def sum_f64(row):
    """The float64 sum of the 1-D array ``row``'s elements (0.0 if it is empty)."""
    total = 0.0
    for j in range(row.shape[0]):
        total += np.float64(row[j])
    return total


@register_jitable(fastmath={"reassoc"})
def squared_deviations_f64(row, center):
    """The float64 sum of ``(row[j] - center) ** 2``, each square taken in ``row``'s
    dtype as numpy's ``var`` of that dtype does."""
    total = 0.0
    for j in range(row.shape[0]):
        d = row[j] - center
        total += np.float64(d * d)
    return total


_LOG2E = _F(1.4426950408889634)
# ln 2 split so that n * _LN2_HI is exact for the |n| <= 150 used here.
_LN2_HI = _F(0.693359375)
_LN2_LO = _F(-2.12194440e-4)
# Where exp's argument is clamped: past these the result is 0 or inf already, and the
# clamp keeps n an int32 whose n * _LN2_HI is exact.
_EXP_LOW, _EXP_HIGH = _F(-104.0), _F(89.0)
# e ** r on [-ln 2 / 2, ln 2 / 2]: Taylor to degree 7 is within 1 ulp there. Highest
# degree first, as Horner's rule takes them.
_EXP_TAYLOR = tuple(_F(1.0 / math.factorial(d)) for d in range(7, -1, -1))


@register_jitable(inline="always")
def exp_f32(x):
    """``e ** x`` for a float32 ``x``."""
    # The clamp keeps NaN (max and min return their first argument when comparisons fail).
    x = min(max(x, _EXP_LOW), _EXP_HIGH)
    n = np.floor(_mul_add(x, _LOG2E, _F(0.5)))
    r = _mul_add(n, -_LN2_HI, x)
    r = _mul_add(n, -_LN2_LO, r)
    # Horner's rule written out: a loop over the tuple, inlined, upsets numba's SSA checks.
    t = _EXP_TAYLOR
    p = _mul_add(t[0], r, t[1])
    p = _mul_add(p, r, t[2])
    p = _mul_add(p, r, t[3])
    p = _mul_add(p, r, t[4])
    p = _mul_add(p, r, t[5])
    p = _mul_add(p, r, t[6])
    p = _mul_add(p, r, t[7])
    k = np.int32(n)
    if _SCALEF:
        return _ldexp(p, k)
    half = k >> np.int32(1)
    scale_a = _float_from_bits((half + np.int32(127)) << np.int32(23))
    scale_b = _float_from_bits((k - half + np.int32(127)) << np.int32(23))
    return p * scale_a * scale_b


# exp_f32 is normal from here on (float32's smallest normal is e ** -87.34).
_EXP_NORMAL_LOW = _F(-87.0)


@register_jitable(inline="always")
def exp_flushed_f32(x):
    """``e ** x`` for a float32 ``x``, but 0 where that would be below float32's normal
    range (under 1.6e-38, the same to within that): for a softmax, whose masked entries
    (``-inf`` or float32's lowest, minus the row's maximum) would otherwise each produce
    a subnormal. x86 cores take a microcode assist of a hundred cycles or more to produce
    one and again to read it: GPT-2's causal 12x128x128 softmax ran 3x slower (567 against
    180 us on an Intel Xeon, Emerald Rapids)."""
    e = exp_f32(max(x, _EXP_NORMAL_LOW))
    # Written so that NaN (every comparison false) keeps exp's NaN.
    return _F(0.0) if x < _EXP_NORMAL_LOW else e


def _vector_intrinsic(
    module: ir.Module, name: str, kind: ir.VectorType, arity: int, exponent: bool = False
) -> ir.Function:
    """LLVM's intrinsic ``name`` on float32 vectors of type ``kind`` (``arity`` of them; with
    ``exponent``, then an int32 vector, as ``llvm.ldexp`` takes), declared once per module
    (llvmlite's ``declare_intrinsic`` names no vector types)."""
    arguments = [kind] * arity
    full = f"{name}.v{kind.count}f32"
    if exponent:
        arguments.append(ir.VectorType(ir.IntType(32), kind.count))
        full += f".v{kind.count}i32"
    found = module.globals.get(full)
    if found is None:
        found = ir.Function(module, ir.FunctionType(kind, arguments), name=full)
    return found


def exp_ir(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """:func:`exp_f32` in LLVM IR, lane by lane of the float32 vector ``x``: the same
    operations in the same order, so the same bits, for loops written as IR (the register
    tiles' epilogues, :mod:`vm.kernels.runtime.packed`)."""
    kind = x.type
    lanes = kind.count
    ints = ir.VectorType(ir.IntType(32), lanes)

    def splat(value, of=kind):
        scalar = of.element
        return ir.Constant(of, [scalar(float(value) if of is kind else int(value))] * lanes)

    low, high = splat(_EXP_LOW), splat(_EXP_HIGH)
    # max(x, low) and min(., high) as numba builds them: the bound where it compares so.
    x = builder.select(builder.fcmp_ordered(">", low, x), low, x)
    x = builder.select(builder.fcmp_ordered("<", high, x), high, x)
    floor = _vector_intrinsic(builder.module, "llvm.floor", kind, 1)
    fmuladd = _vector_intrinsic(builder.module, "llvm.fmuladd", kind, 3)

    def mul_add(a, b, c):
        return builder.call(fmuladd, [a, b, c])

    n = builder.call(floor, [mul_add(x, splat(_LOG2E), splat(0.5))])
    r = mul_add(n, splat(-_LN2_HI), x)
    r = mul_add(n, splat(-_LN2_LO), r)
    p = splat(_EXP_TAYLOR[0])
    for c in _EXP_TAYLOR[1:]:
        p = mul_add(p, r, splat(c))
    k = builder.fptosi(n, ints)
    if _SCALEF:
        ldexp = _vector_intrinsic(builder.module, "llvm.ldexp", kind, 1, exponent=True)
        return builder.call(ldexp, [p, k])
    half = builder.ashr(k, splat(1, ints))
    bias = splat(127, ints)
    scale_a = builder.shl(builder.add(half, bias), splat(23, ints))
    scale_b = builder.shl(builder.add(builder.sub(k, half), bias), splat(23, ints))
    p = builder.fmul(p, builder.bitcast(scale_a, kind))
    return builder.fmul(p, builder.bitcast(scale_b, kind))


def swish_ir(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``x * sigmoid_f32(x)`` in LLVM IR on a float32 vector, bit for bit as the kernels'
    elementwise code computes ``multiply(x, sigmoid(x))``."""
    one = ir.Constant(x.type, [ir.FloatType()(1.0)] * x.type.count)
    e = exp_ir(builder, builder.fneg(x))
    return builder.fmul(x, builder.fdiv(one, builder.fadd(one, e)))


@register_jitable(inline="always")
def sigmoid_f32(x):
    """``1 / (1 + e ** -x)`` for a float32 ``x``."""
    return _F(1.0) / (_F(1.0) + exp_f32(-x))


@register_jitable(inline="always")
def swish_f32(x):
    """``x * sigmoid(x)`` for a float32 ``x``, as the kernels' ``multiply(x, sigmoid(x))``
    computes it (:func:`swish_ir` is the same in IR)."""
    return np.float32(x * sigmoid_f32(x))


@register_jitable(inline="always")
def tanh_f32(x):
    """``tanh(x)`` for a float32 ``x``."""
    # Both pieces are computed and one is selected: a branch per element kept the loops
    # that call this scalar.
    a = abs(x)
    # x + x**3 Q(x**2), fitted on [0, 0.625]; there 1 - 2 / (e**2x + 1) would lose the
    # low bits to cancellation.
    z = x * x
    q = _mul_add(_F(0.0021114798728376627), z, _F(-0.008153002709150314))
    q = _mul_add(q, z, _F(0.021695885807275772))
    q = _mul_add(q, z, _F(-0.05394705757498741))
    q = _mul_add(q, z, _F(0.13333220779895782))
    q = _mul_add(q, z, _F(-0.3333333134651184))
    near = _mul_add(x * z, q, x)
    large = _F(1.0) - _F(2.0) / (exp_f32(a + a) + _F(1.0))
    far = large if x >= _F(0.0) else -large
    return near if a < _F(0.625) else far


@register_jitable(inline="always")
def erf_f32(x):
    """``erf(x)`` for a float32 ``x``."""
    # Both pieces are computed and one is selected, as in tanh_f32: on a transformer's
    # gelu (a sixth of the values beyond 1) the branches made a 128x1024 epilogue 5x
    # slower than the product before it.
    a = abs(x)
    # |x| <= 1, and NaN (every comparison false): x P(x**2).
    z = x * x
    p = _mul_add(_F(8.006874122656882e-05), z, _F(-0.0008053751080296934))
    p = _mul_add(p, z, _F(0.005192957818508148))
    p = _mul_add(p, z, _F(-0.0268560703843832))
    p = _mul_add(p, z, _F(0.11283634603023529))
    p = _mul_add(p, z, _F(-0.3761262893676758))
    p = _mul_add(p, z, _F(1.128379225730896))
    near = x * p
    # 1 - e ** -x**2 R(|x|), R fitted to erfc(x) e ** x**2 in |x| - 2.5, for 1 < |x| < 4;
    # from 4 on the same formula at 4 rounds to 1, as erf does in float32 (R, fitted
    # no further, must not be evaluated there).
    b = min(a, _F(4.0))
    u = b - _F(2.5)
    r = _mul_add(_F(1.6403465679104556e-06), u, _F(-6.259424480958842e-06))
    r = _mul_add(r, u, _F(1.4516683222609572e-05))
    r = _mul_add(r, u, _F(-5.417071588453837e-05))
    r = _mul_add(r, u, _F(0.00021267948613967746))
    r = _mul_add(r, u, _F(-0.000738109287340194))
    r = _mul_add(r, u, _F(0.0024661938659846783))
    r = _mul_add(r, u, _F(-0.007999836467206478))
    r = _mul_add(r, u, _F(0.024938151240348816))
    r = _mul_add(r, u, _F(-0.07434752583503723))
    r = _mul_add(r, u, _F(0.21080635488033295))
    large = _mul_add(-exp_f32(-(b * b)), r, _F(1.0))
    far = large if x >= _F(0.0) else -large
    return far if a > _F(1.0) else near
