"""Code generation for kernel calls with dynamic output shapes, and for zero-copy reshapes.

Compiler layer (``compiler.backend``). The code generator (:mod:`compiler.backend.codegen`)
hands a primitive call here when :func:`lowers_here` says so; :func:`emit_call` emits its
bytecode and returns the register of its value. What it needs of the code generator is
typed by :class:`FunctionEmitter` and :class:`ModuleEmitter`, so this module does not
import it. This is TVM's ``ManifestAlloc`` for
outputs of unknown shape, done at code generation time.

A *view primitive* (:func:`compiler.backend.views.is_view_primitive`: only ``reshape``,
``squeeze``, ``expand_dims`` and ``nn.batch_flatten``, applied one after another to its one
tensor parameter) never runs a kernel: it becomes ``reshape_tensor``, a view of its input that
shares its memory. The new shape is a constant (``load_const``) when both shapes are
static, else the result of the primitive's shape function. The memory plan
(:mod:`compiler.backend.memory_plan`) knows the result refers to the input's buffer.

Any other primitive whose output type has a ``?`` dimension gets its outputs at run
time::

    %s0 = shape_of %x0                      # per input (load_const when its shape is static)
    %n = load_consti <bytes>                # scratch for the shape function's outputs
    %scr = alloc_storage %n 64 uint8
    %shape = alloc_tensor %scr 0 [rank] int64
    %size = alloc_tensor %scr 8*rank [] int64
    invoke_packed <kernel>_shape_func (in: %s0, ..., out: %shape, %size)
    %st = alloc_storage %size 64 uint8      # per dynamic output
    %out = alloc_tensor_reg %st 0 %shape float32
    invoke_packed <kernel> (in: %x0, ..., out: %out)

The shape function is a primitive whose description (:func:`vm.shape_funcs.
shape_func_description`) holds the kernel's own description; the VM runs it in Python
(:mod:`vm.shape_funcs`), and it raises an error naming the operator and the shapes when
the inputs do not fit (a batch of 3 into a dense layer expecting 5 features). Outputs of
static shape in the same call still come from the function's storage pool, where the
memory plan put them; dynamic outputs are not part of the pool (each gets its own
storage, so the caller owns what is returned).
"""

from __future__ import annotations

from typing import Any as AnyT
from typing import Protocol

import numpy as np

from compiler.backend.kernel_desc import KernelDescriptionError, PrimitiveNames, describe_primitive
from compiler.backend.memory_plan import ALIGNMENT, STORAGE_DTYPE, FunctionPlan
from compiler.backend.type_specs import tensor_leaves
from compiler.backend.views import is_view_primitive
from compiler.ir.expr import Call, Expr, Function, Op, Var
from compiler.ir.types import TensorType, Type
from compiler.ir.visitor import post_order
from compiler.transform.typed_rewrite import known_type
from vm.builder import ExecutableBuilder, FunctionBuilder
from vm.isa import Opcode
from vm.kernels import KernelDescriptionError as RuntimeKernelError
from vm.shape_funcs import check_shape_func, shape_func_description

__all__ = ["FunctionEmitter", "ModuleEmitter", "emit_call", "has_dynamic_output", "lowers_here"]

#: Bytes per element of the shape function's outputs (int64 shapes and sizes).
_INT64_BYTES = 8


class ModuleEmitter(Protocol):
    """What this module needs of the module being compiled (``codegen._ModuleContext``)."""

    builder: ExecutableBuilder
    names: PrimitiveNames
    #: Per primitive function (by id, kept alive): its shape function's primitive index,
    #: the kernel's output ranks and the inputs it reads by value.
    shape_functions: dict[int, tuple[int, list[int], list[int], Function]]

    def kernel_index(self, func: Function, where: str) -> tuple[int, list[int]]: ...


class FunctionEmitter(Protocol):
    """What this module needs of the function being compiled (``codegen._FunctionCompiler``)."""

    name: str
    fb: FunctionBuilder
    context: ModuleEmitter
    plan: FunctionPlan
    #: The register of each storage of the plan.
    storages: list[int]
    #: Register of a tensor -> register of its shape vector, for tensors shaped at run time.
    known_shapes: dict[int, int]

    def error(self, message: str) -> Exception:
        """The error to raise, naming the function."""
        ...

    def hold(self, objects: frozenset[int], reg: int) -> None:
        """Record that ``reg`` may hold ``objects`` (for the plan's kills)."""
        ...

    def assemble(self, ty: Type, outputs: list[int], objects: frozenset[int]) -> int:
        """The register of a value of type ``ty`` built from kernel outputs in order."""
        ...


def has_dynamic_output(call: Call) -> bool:
    """Whether the call's (checked) type has a tensor with a ``?`` dimension."""
    ty = call._checked_type
    if ty is None:
        return False
    try:
        leaves = tensor_leaves(ty)
    except TypeError:
        return False
    return any(not leaf.is_static for leaf in leaves)


def lowers_here(func: Expr, call: Call) -> bool:
    """Whether :func:`emit_call` compiles this primitive call (a view, or dynamic outputs)."""
    return is_view_primitive(func) or has_dynamic_output(call)


def emit_call(compiler: FunctionEmitter, call: Call, inputs: list[int]) -> int:
    """Emit a primitive call that :func:`lowers_here`; returns the register of its value.

    Parameters
    ----------
    compiler : FunctionEmitter
        The function being compiled (its builder, module context and memory plan).
    call : Call
        The call of a primitive function, type-checked.
    inputs : list of int
        The registers of the kernel's tensor inputs, in description order (tuple
        arguments already projected into their fields).

    Raises
    ------
    compiler.backend.codegen.CodegenError
        If the primitive cannot become a kernel or its shapes cannot be computed.
    """
    func = call.op
    assert isinstance(func, Function)
    try:
        plan_outputs = compiler.plan.kernel_outputs(call)
    except KeyError:
        raise compiler.error(
            "internal error: a kernel call the memory plan does not know"
        ) from None
    if is_view_primitive(func):
        return _emit_view(compiler, func, call, inputs[0])
    return _emit_dynamic(compiler, func, call, inputs, plan_outputs)


def _emit_view(compiler: FunctionEmitter, func: Function, call: Call, source: int) -> int:
    fb = compiler.fb
    in_type = known_type(func.params[0])
    out_type = call._checked_type
    assert isinstance(in_type, TensorType) and isinstance(out_type, TensorType)
    if in_type.is_static and out_type.is_static:
        shape = np.array(out_type.concrete_shape, dtype=np.int64)
        shape_reg = fb.reg()
        fb.emit(Opcode.LoadConst, compiler.context.builder.add_constant(shape), shape_reg)
    else:
        # Shape function (it also checks the element count, naming the operator).
        shape_reg = _emit_shape_function(compiler, func, [source], [in_type])[0][0]
    dst = fb.reg()
    fb.emit(Opcode.ReshapeTensor, source, shape_reg, dst)
    compiler.known_shapes[dst] = shape_reg
    # The view refers to its input's buffer (the plan aliases them): registers holding it
    # are cleared with that buffer's storage.
    compiler.hold(compiler.plan.alias(call), dst)
    return dst


def _emit_dynamic(
    compiler: FunctionEmitter,
    func: Function,
    call: Call,
    inputs: list[int],
    plan_outputs: tuple[int, ...],
) -> int:
    fb = compiler.fb
    plan = compiler.plan
    ty = call._checked_type
    assert ty is not None
    leaves = tensor_leaves(ty)
    in_types = [leaf for p in func.params for leaf in tensor_leaves(_param_type(compiler, p))]
    # The kernel first: if the runtime cannot build it, that is the error to report.
    index, kept = compiler.context.kernel_index(func, compiler.name)
    shapes, sizes = _emit_shape_function(compiler, func, inputs, in_types)
    outputs: list[int] = []
    for k, leaf in enumerate(leaves):
        obj = plan_outputs[k] if k < len(plan_outputs) else None
        placed = plan.objects[obj] if obj is not None else None
        dst = fb.reg()
        if leaf.is_static and placed is not None and placed.storage is not None:
            fb.emit(
                Opcode.AllocTensor,
                compiler.storages[placed.storage],
                placed.offset,
                leaf.concrete_shape,
                leaf.dtype,
                dst,
            )
        else:
            storage = fb.reg()
            fb.emit(Opcode.AllocStorage, sizes[k], ALIGNMENT, STORAGE_DTYPE, storage)
            fb.emit(Opcode.AllocTensorReg, storage, 0, shapes[k], leaf.dtype, dst)
            compiler.known_shapes[dst] = shapes[k]
        if obj is not None:
            compiler.hold(frozenset((obj,)), dst)
        outputs.append(dst)
    read = [inputs[i] for i in kept]  # the shape function above reads them all
    fb.emit(Opcode.InvokePacked, index, read + outputs, len(outputs))
    return compiler.assemble(ty, outputs, plan.alias(call))


def _param_type(compiler: FunctionEmitter, param: Var) -> Type:
    ty = known_type(param)
    if ty is None:
        raise compiler.error(
            f"primitive parameter %{param.name_hint} has no type; run type inference first"
        )
    return ty


def _emit_shape_function(
    compiler: FunctionEmitter, func: Function, inputs: list[int], in_types: list[TensorType]
) -> tuple[list[int], list[int]]:
    """Emit the call of ``func``'s shape function on the shapes of ``inputs``; returns the
    registers of each output's shape vector and of its size in bytes."""
    fb = compiler.fb
    builder = compiler.context.builder
    index, ranks, by_value = _shape_function_index(compiler, func)
    known = compiler.known_shapes
    shape_inputs = []
    for position, (reg, ty) in enumerate(zip(inputs, in_types)):
        if position in by_value:
            # A data-dependent shape (dyn.reshape's newshape, arange's bounds): the shape
            # function reads the tensor itself.
            shape_inputs.append(reg)
            continue
        if reg in known:
            # The register was shaped by an earlier shape function, in the same straight-line
            # code (both registers are written once), so its shape vector is still there.
            shape_inputs.append(known[reg])
            continue
        shape_reg = fb.reg()
        if ty.is_static:
            shape = np.array(ty.concrete_shape, dtype=np.int64)
            fb.emit(Opcode.LoadConst, builder.add_constant(shape), shape_reg)
        else:
            fb.emit(Opcode.ShapeOf, reg, shape_reg)
        shape_inputs.append(shape_reg)
    # One scratch storage holds every output shape vector, then every byte size.
    offsets = []
    total = 0
    for rank in ranks:
        offsets.append(total)
        total += rank * _INT64_BYTES
    size_offsets = [total + k * _INT64_BYTES for k in range(len(ranks))]
    total += len(ranks) * _INT64_BYTES
    nbytes = fb.reg()
    fb.emit(Opcode.LoadConsti, total, nbytes)
    scratch = fb.reg()
    fb.emit(Opcode.AllocStorage, nbytes, ALIGNMENT, STORAGE_DTYPE, scratch)
    shapes, sizes = [], []
    for rank, offset in zip(ranks, offsets):
        reg = fb.reg()
        fb.emit(Opcode.AllocTensor, scratch, offset, (rank,), "int64", reg)
        shapes.append(reg)
    for offset in size_offsets:
        reg = fb.reg()
        fb.emit(Opcode.AllocTensor, scratch, offset, (), "int64", reg)
        sizes.append(reg)
    fb.emit(Opcode.InvokePacked, index, shape_inputs + shapes + sizes, len(shapes) + len(sizes))
    return shapes, sizes


def _shape_function_index(
    compiler: FunctionEmitter, func: Function
) -> tuple[int, list[int], list[int]]:
    """The primitive index of ``func``'s shape function (described and checked once per
    module), the ranks of the kernel's outputs, and the inputs it reads by value."""
    context = compiler.context
    table = context.shape_functions
    cached = table.get(id(func))
    if cached is None:
        try:
            base, kernel = describe_primitive(func)
            if is_view_primitive(func):
                kernel = _explicit_squeeze_axes(func, kernel)
            description = shape_func_description(kernel)
            check_shape_func(description)
        except (KernelDescriptionError, RuntimeKernelError) as err:
            raise compiler.error(
                f"the shapes of the primitive function calling {_op_names(func)} cannot be "
                f"computed at run time: {err}"
            ) from None
        name = context.names.name(f"{base}_shape_func", description)
        index = context.builder.add_primitive(name, description)
        ranks = [ndim for _, ndim in kernel["outputs"]]
        by_value = list(description.get("values", []))
        cached = table[id(func)] = (index, ranks, by_value, func)  # the function is kept alive
    return cached[0], cached[1], cached[2]


def _explicit_squeeze_axes(func: Function, kernel: dict[str, AnyT]) -> dict[str, AnyT]:
    """``kernel`` with each ``squeeze`` without ``axis`` given the axes its type removed.

    The type removes only dimensions known to be 1; at run time a ``?`` dimension may be 1
    too, and the shape function could not tell which 1s to keep. A view chain's nodes are
    its calls from the innermost out, so they pair up with the description's nodes.
    """
    calls: list[Call] = []
    node = func.body
    while isinstance(node, Call):
        calls.append(node)
        node = node.args[0]
    nodes = []
    for call, entry in zip(reversed(calls), kernel["nodes"]):
        arg_type = known_type(call.args[0])
        if entry["op"] == "squeeze" and entry["attrs"].get("axis") is None:
            assert isinstance(arg_type, TensorType)
            axes = [i for i, d in enumerate(arg_type.shape) if isinstance(d, int) and d == 1]
            entry = {**entry, "attrs": {**entry["attrs"], "axis": axes}}
        nodes.append(entry)
    return {**kernel, "nodes": nodes}


def _op_names(func: Function) -> str:
    """``nn.dense+nn.relu``: the operators a primitive calls, for messages."""
    names: list[str] = []
    for node in post_order(func.body):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name not in names:
            names.append(node.op.name)
    return "+".join(names) or "call"
