"""Small bytecode programs for the interpreter's tests, built with vm.builder (no compiler).

Each function returns a verified :class:`vm.Executable`. Kernel programs use one kernel
description, ``add`` on float32 matrices, so the whole test directory compiles it once.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np

import vm
from vm.builder import ExecutableBuilder, FunctionBuilder
from vm.isa import Opcode as O

ZERO, SUCC = 1, 2  # tags of the Peano naturals
NIL, CONS = 3, 4  # tags of a list

F32 = ("tensor", (10, 10), "float32")
ANY_F32_2D = ("tensor", (-1, -1), "float32")
I64 = ("tensor", (), "int64")
NAT = ("adt", "nat")
LIST = ("adt", "List")


def add_description(dtype: str = "float32", ndim: int = 2) -> dict:
    """The kernel description of ``add`` on two tensors of ``dtype`` and rank ``ndim``."""
    spec = [dtype, ndim]
    return {
        "inputs": [spec, spec],
        "outputs": [spec],
        "nodes": [{"op": "add", "args": [0, 1], "attrs": {}, "outputs": [spec]}],
        "results": [2],
    }


def nat(n: int) -> vm.ADT:
    """The natural number ``n`` as nested ``succ`` values, built iteratively."""
    value = vm.ADT(ZERO, [], "zero")
    for _ in range(n):
        value = vm.ADT(SUCC, [value], "succ")
    return value


def nat_value(value: vm.ADT) -> int:
    """The number a nat ADT stands for (iteratively)."""
    count = 0
    while value.tag == SUCC:
        count += 1
        value = value[0]
    assert value.tag == ZERO
    return count


def _nat_types(b: ExecutableBuilder) -> None:
    b.add_constructor(ZERO, "zero", 0, "nat")
    b.add_constructor(SUCC, "succ", 1, "nat")


def emit_match_tag(f: FunctionBuilder, value: int, tag: int, otherwise) -> None:
    """``get_tag; load_consti; if``: fall through if ``value`` has ``tag``, else jump."""
    t, c = f.reg(), f.reg()
    f.emit(O.GetTag, value, t)
    f.emit(O.LoadConsti, tag, c)
    f.emit(O.If, t, c, 1, otherwise)


def nat_programs() -> vm.Executable:
    """``copy(n)`` rebuilds a nat by non-tail recursion; ``walk(n)`` recurses to zero;
    ``only_zero(n)`` matches only ``zero`` (a ``succ`` reaches ``fatal``); ``forever(n)``
    never returns; ``main`` calls ``copy``."""
    b = ExecutableBuilder()
    _nat_types(b)
    copy, walk = b.declare("copy"), b.declare("walk")

    f = b.function("copy", ["n"], [NAT], NAT)
    result, inner, m = f.reg(), f.reg(), f.reg()
    not_zero, end = f.label(), f.label()
    emit_match_tag(f, 0, ZERO, not_zero)
    f.emit(O.AllocADT, ZERO, [], result)
    f.emit(O.Goto, end)
    f.place(not_zero)
    f.emit(O.GetField, 0, 0, m)
    f.emit(O.Invoke, copy, [m], inner)
    f.emit(O.AllocADT, SUCC, [inner], result)
    f.place(end)
    f.emit(O.Ret, result)
    b.add_function(f)

    f = b.function("walk", ["n"], [NAT], NAT)
    result, m = f.reg(), f.reg()
    not_zero, end = f.label(), f.label()
    emit_match_tag(f, 0, ZERO, not_zero)
    f.emit(O.Move, 0, result)
    f.emit(O.Goto, end)
    f.place(not_zero)
    f.emit(O.GetField, 0, 0, m)
    f.emit(O.Invoke, walk, [m], result)
    f.place(end)
    f.emit(O.Ret, result)
    b.add_function(f)

    f = b.function("only_zero", ["n"], [NAT], NAT)
    fail = f.label()
    emit_match_tag(f, 0, ZERO, fail)
    f.emit(O.Ret, 0)
    f.place(fail)
    f.emit(O.Fatal)
    b.add_function(f)

    forever = b.declare("forever")
    f = b.function("forever", ["n"], [NAT], NAT)
    r = f.reg()
    f.emit(O.Invoke, forever, [0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("main", ["n"], [NAT], NAT)
    r = f.reg()
    f.emit(O.Invoke, copy, [0], r)
    f.emit(O.Ret, r)
    b.add_function(f)
    return b.build()


#: Bytes of the storage each step of :func:`loop_programs`' loops allocates.
STEP_BYTES = 1 << 16


def loop_programs() -> vm.Executable:
    """Loops over a nat, each step allocating a storage of :data:`STEP_BYTES` and a tensor
    in it, which it passes to the next step.

    - ``steps(n, t)`` -> the last step's tensor: a tail call (``invoke; move; ret``);
    - ``counted(n, t)`` -> the same through a non-tail call (the result is wrapped);
    - ``twice(n, t)`` -> ``(steps(n, t), steps(n, t))``: two loops in one run, each
      returning to a frame that goes on.
    """
    b = ExecutableBuilder()
    _nat_types(b)
    tensor = ("tensor", (STEP_BYTES // 4,), "float32")
    for name, tail in (("steps", True), ("counted", False)):
        callee = b.declare(name)
        f = b.function(name, ["n", "t"], [NAT, tensor], tensor if tail else ("tuple", (tensor,)))
        result, m, size, storage, fresh, inner = (f.reg() for _ in range(6))
        step, end = f.label(), f.label()
        emit_match_tag(f, 0, ZERO, step)
        if tail:
            f.emit(O.Move, 1, result)
        else:
            f.emit(O.AllocADT, 0, [1], result)
        f.emit(O.Goto, end)
        f.place(step)
        f.emit(O.GetField, 0, 0, m)
        f.emit(O.LoadConsti, STEP_BYTES, size)
        f.emit(O.AllocStorage, size, 64, "float32", storage)
        f.emit(O.AllocTensor, storage, 0, [STEP_BYTES // 4], "float32", fresh)
        f.emit(O.Invoke, callee, [m, fresh], inner)
        if tail:
            f.emit(O.Move, inner, result)
        else:
            f.emit(O.GetField, inner, 0, inner)
            f.emit(O.AllocADT, 0, [inner], result)
        f.place(end)
        f.emit(O.Ret, result)
        b.add_function(f)

    steps = b.declare("steps")
    f = b.function("twice", ["n", "t"], [NAT, tensor], ("tuple", (tensor, tensor)))
    first, second, pair = f.reg(), f.reg(), f.reg()
    f.emit(O.Invoke, steps, [0, 1], first)
    f.emit(O.Invoke, steps, [0, 1], second)
    f.emit(O.AllocADT, 0, [first, second], pair)
    f.emit(O.Ret, pair)
    b.add_function(f)
    # Each step hands on a tensor no kernel wrote, which the verifier rejects (it would be
    # uninitialized memory); the memory these tests measure needs no kernel, and the VM
    # runs executables that were never verified too.
    return b.build(verify=False)


def scalar_programs() -> vm.Executable:
    """Functions on int64 scalars and tuples, without kernels.

    - ``consts()`` -> (load_consti 7, get_tag of a tuple, get_tag of zero)
    - ``pick(a, b)`` -> 1 if a == b else 0 (an ``if`` on two registers)
    - ``is_five(a)`` -> 1 if a == 5 else 0 (an ``if`` against a constant)
    - ``swap(a, b)`` -> (b, a)
    - ``second(t: (i64, i64))`` -> t.1
    - ``skip()`` -> 2, jumping over an instruction with ``goto``
    - ``middle(n: nat)`` -> 1 if n is zero else 0, entering a get_tag/load_consti/if
      sequence at its load_consti (a jump into the middle of a fused sequence)
    - ``killed(a)`` -> a, after killing a copy of it
    """
    b = ExecutableBuilder()
    _nat_types(b)

    f = b.function(
        "consts", [], [], ("tuple", (I64, ("tensor", (), "int32"), ("tensor", (), "int32")))
    )
    c, t, tag_t, z, tag_z, out = (f.reg() for _ in range(6))
    f.emit(O.LoadConsti, 7, c)
    f.emit(O.AllocADT, 0, [c, c], t)
    f.emit(O.GetTag, t, tag_t)
    f.emit(O.AllocADT, ZERO, [], z)
    f.emit(O.GetTag, z, tag_z)
    f.emit(O.AllocADT, 0, [c, tag_t, tag_z], out)
    f.emit(O.Ret, out)
    b.add_function(f)

    for name, const in (("pick", None), ("is_five", 5)):
        params = ["a", "b"] if const is None else ["a"]
        f = b.function(name, params, [I64] * len(params), I64)
        one, zero, result = f.reg(), f.reg(), f.reg()
        other, end = f.label(), f.label()
        f.emit(O.LoadConsti, 1, one)
        f.emit(O.LoadConsti, 0, zero)
        if const is None:
            f.emit(O.If, 0, 1, 1, other)
        else:
            k = f.reg()
            f.emit(O.LoadConsti, const, k)
            f.emit(O.If, 0, k, 1, other)
        f.emit(O.Move, one, result)
        f.emit(O.Goto, end)
        f.place(other)
        f.emit(O.Move, zero, result)
        f.place(end)
        f.emit(O.Ret, result)
        b.add_function(f)

    f = b.function("swap", ["a", "b"], [I64, I64], ("tuple", (I64, I64)))
    r = f.reg()
    f.emit(O.AllocADT, 0, [1, 0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("second", ["t"], [("tuple", (I64, I64))], I64)
    r = f.reg()
    f.emit(O.GetField, 0, 1, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("skip", [], [], I64)
    r = f.reg()
    f.emit(O.LoadConsti, 2, r)
    f.emit(O.Goto, 2)
    f.emit(O.LoadConsti, 3, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("middle", ["n"], [NAT], I64)
    t, c, one, zero = f.reg(), f.reg(), f.reg(), f.reg()
    inside, other = f.label(), f.label()
    f.emit(O.LoadConsti, 1, one)
    f.emit(O.LoadConsti, 0, zero)
    f.emit(O.GetTag, 0, t)
    f.emit(O.Goto, inside)
    f.emit(O.GetTag, 0, t)  # never runs: the sequence is entered below, at its load_consti
    f.place(inside)
    f.emit(O.LoadConsti, ZERO, c)
    f.emit(O.If, t, c, 1, other)
    f.emit(O.Ret, one)
    f.place(other)
    f.emit(O.Ret, zero)
    b.add_function(f)

    f = b.function("killed", ["a"], [I64], I64)
    r = f.reg()
    f.emit(O.Move, 0, r)
    f.emit(O.KillRegister, r)
    f.emit(O.Ret, 0)
    b.add_function(f)
    return b.build()


def closure_programs() -> vm.Executable:
    """``pair(c, x) = (c, x)`` lifted with one captured value; ``make(c)`` returns the
    closure of ``pair`` over ``c``; ``call(c, x)`` builds it and calls it with ``x``;
    ``apply(f, x)`` calls any closure ``f`` on ``x``; ``apply_any(f, x)`` does the same
    with ``f`` untyped, so it may not be a closure at all."""
    b = ExecutableBuilder()
    pair = b.declare("pair")
    f = b.function("pair", ["c", "x"], [I64, I64], ("tuple", (I64, I64)))
    r = f.reg()
    f.emit(O.AllocADT, 0, [0, 1], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("make", ["c"], [I64], ("func",))
    r = f.reg()
    f.emit(O.AllocClosure, pair, [0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("call", ["c", "x"], [I64, I64], ("tuple", (I64, I64)))
    clo, r = f.reg(), f.reg()
    f.emit(O.AllocClosure, pair, [0], clo)
    f.emit(O.InvokeClosure, clo, [1], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    for name, spec in (("apply", ("func",)), ("apply_any", ("any",))):
        f = b.function(name, ["f", "x"], [spec, ("any",)], ("any",))
        r = f.reg()
        f.emit(O.InvokeClosure, 0, [1], r)
        f.emit(O.Ret, r)
        b.add_function(f)
    return b.build()


def memory_programs() -> vm.Executable:
    """Storage, views, shapes and constants, without kernels.

    - ``fresh()`` -> a float32[2, 3] view of a new 24-byte storage
    - ``too_big()`` -> a float32[10, 10] view of a 24-byte storage (out of bounds)
    - ``negative()`` -> a storage of -1 bytes
    - ``three()`` -> three float32[2] views of one 24-byte storage, at offsets 0, 8, 16
    - ``overflow()`` -> the same plus a fourth at offset 24, which does not fit
    - ``scalars()`` -> three float32 scalars (0-d views) of one storage
    - ``by_reg()`` -> a float32 tensor whose shape comes from a constant int64 [3, 2]
    - ``shape(x)`` -> shape_of(x)
    - ``reshape(x: float32[2, 3])`` -> x viewed as [3, 2]
    - ``const()`` -> constant 0, a read-only float32 [2, 2]
    - ``view_const()`` -> a tensor viewing the bytes of constant 0 (refused: read-only)
    - ``any(x)`` -> get_field of x (an error unless x is a tuple)
    - ``cond(x)`` -> 1 if x == 1 (an error unless x is a scalar)
    """
    b = ExecutableBuilder()
    const = b.add_constant(np.arange(4, dtype=np.float32).reshape(2, 2))
    shape_const = b.add_constant(np.array([3, 2], dtype=np.int64))

    for name, shape, nbytes in (
        ("fresh", (2, 3), 24),
        ("too_big", (10, 10), 24),
        ("negative", (2,), -1),
    ):
        f = b.function(name, [], [], ("tensor", shape, "float32"))
        size, st, out = f.reg(), f.reg(), f.reg()
        f.emit(O.LoadConsti, nbytes, size)
        f.emit(O.AllocStorage, size, 64, "float32", st)
        f.emit(O.AllocTensor, st, 0, shape, "float32", out)
        f.emit(O.Ret, out)
        b.add_function(f)

    pair_type = ("tensor", (2,), "float32")
    scalar_type = ("tensor", (), "float32")
    for name, offsets, shape in (
        ("three", (0, 8, 16), (2,)),
        ("overflow", (0, 8, 16, 24), (2,)),
        ("scalars", (0, 4, 8), ()),
    ):
        spec = pair_type if shape else scalar_type
        f = b.function(name, [], [], ("tuple", (spec,) * len(offsets)))
        size, st, r = f.reg(), f.reg(), f.reg()
        f.emit(O.LoadConsti, 24, size)
        f.emit(O.AllocStorage, size, 64, "float32", st)
        outs = []
        for offset in offsets:
            outs.append(f.reg())
            f.emit(O.AllocTensor, st, offset, shape, "float32", outs[-1])
        f.emit(O.AllocADT, 0, outs, r)
        f.emit(O.Ret, r)
        b.add_function(f)

    f = b.function("by_reg", [], [], ("tensor", (3, 2), "float32"))
    size, st, shp, out = f.reg(), f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 24, size)
    f.emit(O.AllocStorage, size, 64, "float32", st)
    f.emit(O.LoadConst, shape_const, shp)
    f.emit(O.AllocTensorReg, st, 0, shp, "float32", out)
    f.emit(O.Ret, out)
    b.add_function(f)

    f = b.function("shape", ["x"], [("tensor", (-1, -1), "float32")], ("tensor", (2,), "int64"))
    r = f.reg()
    f.emit(O.ShapeOf, 0, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("reshape", ["x"], [("tensor", (2, 3), "float32")], ("tensor", (3, 2), "float32"))
    shp, r = f.reg(), f.reg()
    f.emit(O.LoadConst, shape_const, shp)
    f.emit(O.ReshapeTensor, 0, shp, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("const", [], [], ("tensor", (2, 2), "float32"))
    r = f.reg()
    f.emit(O.LoadConst, const, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("view_const", [], [], ("tensor", (2,), "float32"))
    c, r = f.reg(), f.reg()
    f.emit(O.LoadConst, const, c)
    f.emit(O.AllocTensor, c, 0, (2,), "float32", r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("any", ["x"], [("any",)], ("any",))
    r = f.reg()
    f.emit(O.GetField, 0, 0, r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("cond", ["x"], [("any",)], I64)
    one = f.reg()
    other = f.label()
    f.emit(O.LoadConsti, 1, one)
    f.emit(O.If, 0, one, 1, other)
    f.emit(O.Ret, one)
    f.place(other)
    f.emit(O.Ret, one)
    b.add_function(f)
    # Most of these return views no kernel wrote and view_const uses a constant as
    # storage, which the verifier rejects; they test the runtime's own allocation checks,
    # which also guard executables that were never verified.
    return b.build(verify=False)


def emit_add(f: FunctionBuilder, prim: int, a: int, b: int, shape: tuple[int, ...]) -> int:
    """Allocate a float32 ``shape`` output and add ``a`` and ``b`` into it; returns its register."""
    size, st, out = f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 4 * int(np.prod(shape)), size)
    f.emit(O.AllocStorage, size, 64, "float32", st)
    f.emit(O.AllocTensor, st, 0, shape, "float32", out)
    f.emit(O.InvokePacked, prim, [a, b, out], 1)
    return out


def kernel_programs() -> vm.Executable:
    """Programs calling the ``add`` kernel on float32 matrices.

    - ``main(x: float32[10, 10])`` -> x + x (entry-only: the rank of x is proven)
    - ``twice(x)`` -> (x + x) + (x + x) through a helper ``double`` it invokes
    - ``double(x)`` -> x + x (called only with proven tensors, so its rank is proven)
    - ``strict(x: float32[10, 10])`` -> x + x, invoked by ``relay(x: any)`` with
      whatever ``relay`` got, so the kernel checks the rank of x
    - ``captured(x: float32[10, 10])`` -> x + x, made into a closure by
      ``via_closure(x: any)`` and called with x, so the kernel checks the rank of x
    - ``pair(x)`` -> (x + x, x) as a tuple
    - ``mismatch(x: float32[?, ?], y: float32[?, ?])`` -> x + y into an output of x's
      static 10x10 shape (the kernel rejects other shapes)
    - ``chain(x: float32[?, ?], y: float32[?, ?])`` -> ((x + x) + y) + x, three
      allocation and kernel pairs back to back in one storage
    - ``loose(x: any)`` -> x + x (the kernel gets whatever rank and dtype x has)
    - ``into_const(x)`` -> writes x + x into a constant (refused)
    """
    b = ExecutableBuilder()
    prim = b.add_primitive("vm_mod_fused_add", add_description())
    const = b.add_constant(np.zeros((10, 10), dtype=np.float32))

    f = b.function("main", ["x"], [F32], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 0, (10, 10)))
    b.add_function(f)

    double = b.declare("double")
    f = b.function("double", ["x"], [F32], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 0, (10, 10)))
    b.add_function(f)

    f = b.function("twice", ["x"], [F32], F32)
    d = f.reg()
    f.emit(O.Invoke, double, [0], d)
    f.emit(O.Ret, emit_add(f, prim, d, d, (10, 10)))
    b.add_function(f)

    f = b.function("pair", ["x"], [F32], ("tuple", (F32, F32)))
    r = f.reg()
    s = emit_add(f, prim, 0, 0, (10, 10))
    f.emit(O.AllocADT, 0, [s, 0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("mismatch", ["x", "y"], [ANY_F32_2D, ANY_F32_2D], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 1, (10, 10)))
    b.add_function(f)

    f = b.function("chain", ["x", "y"], [ANY_F32_2D, ANY_F32_2D], F32)
    size, st = f.reg(), f.reg()
    f.emit(O.LoadConsti, 3 * 400, size)
    f.emit(O.AllocStorage, size, 64, "float32", st)
    h = 0
    for i, other in enumerate((0, 1, 0)):
        out = f.reg()
        f.emit(O.AllocTensor, st, 400 * i, (10, 10), "float32", out)
        f.emit(O.InvokePacked, prim, [h, other, out], 1)
        h = out
    f.emit(O.Ret, h)
    b.add_function(f)

    f = b.function("loose", ["x"], [("any",)], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 0, (10, 10)))
    b.add_function(f)

    strict = b.declare("strict")
    f = b.function("strict", ["x"], [F32], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 0, (10, 10)))
    b.add_function(f)

    f = b.function("relay", ["x"], [("any",)], F32)
    r = f.reg()
    f.emit(O.Invoke, strict, [0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    captured = b.declare("captured")
    f = b.function("captured", ["x"], [F32], F32)
    f.emit(O.Ret, emit_add(f, prim, 0, 0, (10, 10)))
    b.add_function(f)

    f = b.function("via_closure", ["x"], [("any",)], F32)
    clo, r = f.reg(), f.reg()
    f.emit(O.AllocClosure, captured, [], clo)
    f.emit(O.InvokeClosure, clo, [0], r)
    f.emit(O.Ret, r)
    b.add_function(f)

    f = b.function("into_const", ["x"], [F32], F32)
    c = f.reg()
    f.emit(O.LoadConst, const, c)
    f.emit(O.InvokePacked, prim, [0, 0, c], 1)
    f.emit(O.Ret, c)
    b.add_function(f)
    # into_const breaks the verifier's rule that a kernel writes only into its function's
    # own tensors, on purpose: it tests the runtime's check, which also guards executables
    # that were never verified. Every other function verifies (a test checks).
    return b.build(verify=False)


def traced_peak(call: Callable[[], object]) -> int:
    """The peak of memory traced by tracemalloc (numpy's buffers included) during ``call()``."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
