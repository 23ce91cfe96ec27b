"""The ahead-of-time executor: a control-flow-free ``main`` as one generated function.

Runtime layer (``vm``); imports numpy, other ``vm`` modules (``vm.kernels`` only when the
first generated module loads, keeping numba out until then), never ``compiler``.

The virtual machine decodes each instruction and dispatches it in a loop on every call.
For a program whose ``main`` is straight-line code of static shapes (a model without
``if``, ``match``, closures, ADTs or recursion) nothing needs deciding at run time, so
:class:`AotModule` decides it once, when it is created, from the *verified* executable:

1. ``main`` is run symbolically (calls to other straight-line functions are inlined with an
   explicit frame stack, no recursion), giving the sequence of kernel calls, the static
   shape and dtype of every tensor, and the storages the compiler planned
   (``alloc_storage`` / ``alloc_tensor`` offsets). Every kernel argument's dtype and rank is
   checked against the kernel's description here, once, so the calls need no checks.
2. The storages become one arena per module (each at a 64-byte aligned offset), and every
   intermediate tensor a view of it, made once. Tensors that reach the result are allocated
   fresh on every call instead, so results are the caller's and a later call never
   overwrites them.
3. The runtime's own code generator writes one Python function that checks the inputs
   (the VM's rules: :mod:`vm.args`), calls each kernel's native entry point in order on the
   arena's views, and returns the result. It is cached like the kernels: the source is
   written to ``<cache_dir>/aot/a_<sha256>.py`` and imported (Python keeps its bytecode
   beside it); the kernels themselves come from numba's disk cache as for the VM.

Nothing in the executable runs as code: the generated source holds only register-derived
names, integer shapes and offsets the generator writes itself; kernels, constants, dtypes
and arena views are passed to it as objects.

An :class:`AotModule` owns its arena, so one module must not run in two threads at once
(as with :class:`vm.VirtualMachine`, make one per thread; they share the generated code).
"""

from __future__ import annotations

import hashlib
import keyword
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vm.args import Signature, describe_value, make_converter
from vm.device import Device, check_devices, cpu
from vm.errors import UnknownFunctionError, VMError
from vm.executable import Executable
from vm.isa import Opcode
from vm.ndarray import NDArray, caller_owned
from vm.primitives import interruption_of, load_kernels
from vm.program import Instruction, VMFunction
from vm.timing import check_settings, measure, preprocessor
from vm.value_types import TypeContext
from vm.verify import verify

__all__ = ["AotExecutorFactoryModule", "AotModule", "AotUnsupportedError", "generate_source"]

#: Arena storages start at multiples of this many bytes (a cache line, and AVX-512's width).
ALIGNMENT = 64

#: Bump when the generated source changes meaning without its text changing.
AOT_CODEGEN_VERSION = 1

_SUGGESTION = "use vm.VirtualMachine (relay.create_executor('vm')) for such programs"


class AotUnsupportedError(ValueError):
    """The program is valid but not one the AOT executor runs (the message says what)."""


# ---- symbolic execution ------------------------------------------------------------------------


@dataclass
class _Tensor:
    """A tensor of the traced program, with its static type and where its memory comes from.

    ``kind`` is ``"input"`` (``ref`` = parameter index), ``"const"`` (constant index),
    ``"alloc"`` (``ref`` = (storage id, byte offset)) or ``"view"`` (``ref`` = the viewed
    tensor's id; a reshape)."""

    id: int
    kind: str
    ref: Any
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class _Call:
    """One kernel call: primitive index, argument tensor ids, how many are outputs."""

    prim: int
    args: tuple[int, ...]
    num_outputs: int
    where: str


@dataclass
class _Trace:
    """``main`` as straight-line kernel calls over typed tensors."""

    params: list[tuple[str, tuple[int, ...], str]]
    tensors: list[_Tensor] = field(default_factory=list)
    #: Kernel calls and the tensor ids that appear (alloc/view) before each, in order.
    steps: list[tuple[str, Any]] = field(default_factory=list)
    storages: list[int] = field(default_factory=list)  # sizes in bytes, by storage id
    result: Any = None  # nested tuples of tensor ids

    def add(self, kind: str, ref: Any, shape: tuple[int, ...], dtype: str) -> int:
        tensor = _Tensor(len(self.tensors), kind, ref, tuple(int(d) for d in shape), dtype)
        self.tensors.append(tensor)
        return tensor.id


@dataclass
class _Frame:
    function: VMFunction
    regs: list[Any]
    pc: int = 0
    ret_dst: int | None = None


_CONTROL_FLOW = {
    Opcode.If: "control flow (an if or match expression)",
    Opcode.Goto: "control flow (an if or match expression)",
    Opcode.GetTag: "pattern matching on algebraic data types",
    Opcode.Fatal: "pattern matching (a match that can fail)",
    Opcode.AllocClosure: "closures (a function value)",
    Opcode.InvokeClosure: "closures (a call of a function value)",
    Opcode.ShapeOf: "dynamic shapes (shape_of)",
    Opcode.AllocTensorReg: "dynamic shapes (a tensor sized at run time)",
}


class _Int:
    """A register holding a ``load_consti`` value."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class _Storage:
    __slots__ = ("id",)

    def __init__(self, storage_id: int) -> None:
        self.id = storage_id


class _Ref:
    """A register holding tensor ``id``."""

    __slots__ = ("id",)

    def __init__(self, tensor_id: int) -> None:
        self.id = tensor_id


def _unsupported(where: str, what: str) -> AotUnsupportedError:
    return AotUnsupportedError(
        f"the AOT executor cannot run this program: {where} uses {what}; {_SUGGESTION}"
    )


def _spec_text(spec: Sequence[Any]) -> str:
    if spec[0] == "tensor":
        dims = ", ".join("?" if d < 0 else str(d) for d in spec[1])
        return f"Tensor[({dims}), {spec[2]}]"
    if spec[0] == "adt":
        return f"ADT {spec[1]}"
    return {"tuple": "tuple", "func": "function"}.get(spec[0], "any (a type variable)")


def trace(exe: Any, func_name: str = "main") -> _Trace:
    """Run ``func_name`` of a verified ``exe`` symbolically (see the module docstring).

    Raises
    ------
    AotUnsupportedError
        If the function takes or computes anything but static-shape tensors and tuples of
        them, uses control flow, closures, ADTs, recursion or dynamic shapes; the message
        names the function, the instruction and the construct.
    """
    main = exe.get_function(func_name)
    params = []
    for name, spec in zip(main.params, main.param_types):
        if spec[0] != "tensor" or any(d < 0 for d in spec[1]):
            raise _unsupported(
                f"parameter {name!r} of @{func_name}",
                f"type {_spec_text(spec)} (the AOT executor takes tensors of static shape)",
            )
        params.append((name, tuple(spec[1]), spec[2]))
    out = _Trace(params)
    regs: list[Any] = [None] * main.register_file_size
    for i, (_, shape, dtype) in enumerate(params):
        regs[i] = _Ref(out.add("input", i, shape, dtype))
    stack = [_Frame(main, regs)]
    consts: dict[int, int] = {}
    while True:
        frame = stack[-1]
        function = frame.function
        pc = frame.pc
        instruction: Instruction = function.instructions[pc]
        frame.pc += 1
        op, ops, r = instruction.opcode, instruction, frame.regs
        where = f"@{function.name} instruction {pc} ({op.name})"
        if op in _CONTROL_FLOW:
            raise _unsupported(where, _CONTROL_FLOW[op])
        if op is Opcode.Ret:
            value = r[ops.result]
            stack.pop()
            if not stack:
                out.result = _result_ids(value, where)
                return out
            assert frame.ret_dst is not None  # only the entry frame has none, popped last
            stack[-1].regs[frame.ret_dst] = value
        elif op is Opcode.Move:
            r[ops.dst] = r[ops.src]
        elif op is Opcode.KillRegister:
            r[ops.reg] = None
        elif op is Opcode.LoadConsti:
            r[ops.dst] = _Int(int(ops.value))
        elif op is Opcode.LoadConst:
            index = ops.const_index
            if index not in consts:
                array = exe.constant_values[index]
                consts[index] = out.add("const", index, array.shape, array.dtype.name)
            r[ops.dst] = _Ref(consts[index])
        elif op is Opcode.AllocStorage:
            size = r[ops.size]
            if not isinstance(size, _Int):
                raise _unsupported(where, "dynamic shapes (a storage sized at run time)")
            out.storages.append(size.value)
            r[ops.dst] = _Storage(len(out.storages) - 1)
        elif op is Opcode.AllocTensor:
            storage = r[ops.storage]
            if not isinstance(storage, _Storage):
                raise _unsupported(where, "a tensor in memory that alloc_storage did not make")
            tid = out.add("alloc", (storage.id, int(ops.offset)), ops.shape, ops.dtype)
            if ops.offset + out.tensors[tid].nbytes > out.storages[storage.id]:
                raise AotUnsupportedError(
                    f"{where}: a {ops.dtype}{list(ops.shape)} tensor at byte offset {ops.offset} "
                    f"does not fit in its {out.storages[storage.id]}-byte storage"
                )
            r[ops.dst] = _Ref(tid)
            out.steps.append(("tensor", tid))
        elif op is Opcode.AllocADT:
            if ops.tag != 0:
                info = exe.constructor_by_tag.get(ops.tag)
                name = info.name if info is not None else f"tag {ops.tag}"
                raise _unsupported(where, f"algebraic data types (constructor {name})")
            r[ops.dst] = tuple(r[f] for f in ops.fields)
        elif op is Opcode.GetField:
            value = r[ops.object]
            if not isinstance(value, tuple):
                raise _unsupported(where, "a projection from something that is not a tuple")
            r[ops.dst] = value[ops.index]
        elif op is Opcode.Invoke:
            if len(stack) > len(exe.functions):
                raise _unsupported(where, "recursion")
            callee = exe.functions[ops.func_index]
            callee_regs: list[Any] = [None] * callee.register_file_size
            callee_regs[: len(ops.args)] = [r[a] for a in ops.args]
            stack.append(_Frame(callee, callee_regs, ret_dst=ops.dst))
        elif op is Opcode.ReshapeTensor:
            r[ops.dst] = _reshape(exe, out, r, ops, where)
        elif op is Opcode.InvokePacked:
            _invoke_packed(exe, out, r, ops, where)
        else:  # pragma: no cover - every opcode is handled above
            raise _unsupported(where, f"the instruction {op.name}")


def _tensor_of(value: Any, where: str, what: str) -> int:
    if not isinstance(value, _Ref):
        found = "a tuple" if isinstance(value, tuple) else "a storage or an integer"
        raise _unsupported(where, f"{found} as {what}")
    return value.id


def _reshape(exe: Any, out: _Trace, r: list[Any], ops: Any, where: str) -> _Ref:
    source = out.tensors[_tensor_of(r[ops.tensor], where, "the tensor to reshape")]
    shape_ref = r[ops.newshape]
    shape_tensor = out.tensors[_tensor_of(shape_ref, where, "a new shape")]
    if shape_tensor.kind != "const":
        raise _unsupported(where, "dynamic shapes (a reshape to a shape computed at run time)")
    shape = tuple(int(d) for d in np.asarray(exe.constant_values[shape_tensor.ref]).reshape(-1))
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != int(
        np.prod(source.shape, dtype=np.int64)
    ):
        raise AotUnsupportedError(
            f"{where}: cannot reshape {source.dtype}{list(source.shape)} to {list(shape)}"
        )
    tid = out.add("view", source.id, shape, source.dtype)
    out.steps.append(("tensor", tid))
    return _Ref(tid)


def _invoke_packed(exe: Any, out: _Trace, r: list[Any], ops: Any, where: str) -> None:
    primitive = exe.primitives[ops.prim_index]
    description = primitive.description
    if "shape_func" in description:
        raise _unsupported(where, f"dynamic shapes (the shape function {primitive.name})")
    wanted = [tuple(t) for t in description["inputs"]] + [tuple(t) for t in description["outputs"]]
    args = tuple(_tensor_of(r[a], where, "a kernel argument") for a in ops.args)
    if len(args) != len(wanted):
        raise AotUnsupportedError(
            f"{where}: kernel {primitive.name} takes {len(wanted)} arrays, "
            f"the call passes {len(args)}"
        )
    first_output = len(args) - ops.num_outputs
    for k, (tid, (dtype, ndim)) in enumerate(zip(args, wanted)):
        tensor = out.tensors[tid]
        if tensor.dtype != dtype or len(tensor.shape) != ndim:
            raise AotUnsupportedError(
                f"{where}: argument {k} of kernel {primitive.name} is "
                f"{tensor.dtype}{list(tensor.shape)}, but the kernel takes a {dtype} tensor "
                f"of rank {ndim}"
            )
        if k >= first_output and _root(out, tid).kind != "alloc":
            raise AotUnsupportedError(
                f"{where}: output {k - first_output} of kernel {primitive.name} is not memory "
                "the program allocated (kernels write only to alloc_tensor's tensors)"
            )
    out.steps.append(("kernel", _Call(ops.prim_index, args, ops.num_outputs, where)))


def _root(out: _Trace, tid: int) -> _Tensor:
    tensor = out.tensors[tid]
    while tensor.kind == "view":
        tensor = out.tensors[tensor.ref]
    return tensor


def _result_ids(value: Any, where: str) -> Any:
    """The result as nested tuples of tensor ids, built without recursion."""
    root: list[Any] = [None]
    built: list[tuple[list[Any], list[Any], int]] = []
    work = [(value, root, 0)]
    while work:
        item, parent, index = work.pop()
        if isinstance(item, tuple):
            fields: list[Any] = [None] * len(item)
            built.append((fields, parent, index))
            work.extend((field, fields, i) for i, field in enumerate(item))
        else:
            parent[index] = _tensor_of(item, where, "a result")
    for fields, parent, index in reversed(built):
        parent[index] = tuple(fields)
    return root[0]


def _leaves(result: Any) -> list[Any]:
    """The leaves of nested tuples, in order, without recursion."""
    leaves, stack = [], [result]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(reversed(item))
        else:
            leaves.append(item)
    return leaves


# ---- code generation ---------------------------------------------------------------------------


@dataclass
class _Generated:
    """The generated source and what its ``make`` function is given."""

    source: str
    #: Line number -> the kernel call on it (for errors).
    lines: dict[int, tuple[str, str]]
    #: Tensor ids made once per module (views of the arena, constants, views of them).
    static: list[int]
    num_outputs: int
    #: The dtypes ``d0, d1, ...`` of the tensors made per call, in order.
    dtypes: list[str]


def generate_source(exe: Any, plan: _Trace, machine_index: int | None = None) -> _Generated:
    """The source of the module for ``plan``: ``make(B)`` returns ``main``.

    ``B`` is the list of bound objects, in this order: the kernels' entry points (one per
    primitive index used, ``K``), the input converters, the dtypes, the static tensors,
    then the helpers of :data:`_HELPERS` (``last`` is a one-item list that keeps the latest
    result, for ``get_output``; ``NOTHING`` marks an argument left out).

    With ``machine_index`` (the function's index in ``exe``), the source is the virtual
    machine's straight-line form instead (:mod:`vm.straight`): ``make(B)`` returns
    ``(invoke, call)``, both taking exactly the function's arguments by position.
    ``invoke`` checks them as ``main`` does and records them in ``inputs`` (the machine's
    dict of inputs, under ``machine_index``); ``call`` takes arguments already checked.
    Neither catches a kernel's error: the machine runs the call again in its interpreter,
    which names what was wrong. The helpers are then those of :data:`_MACHINE_HELPERS`.
    """
    tensors = plan.tensors
    leaves = _leaves(plan.result)
    fresh: set[int] = set()
    for leaf in leaves:
        root = _root(plan, leaf)
        if root.kind == "alloc":
            fresh.add(root.id)
    # A tensor is made per call if it is an input, fresh, or a view of such; else once.
    per_call: set[int] = set()
    for tensor in tensors:
        viewed_per_call = tensor.kind == "view" and tensor.ref in per_call
        if tensor.kind == "input" or tensor.id in fresh or viewed_per_call:
            per_call.add(tensor.id)
    static = [t.id for t in tensors if t.id not in per_call]
    prims = sorted({step.prim for kind, step in plan.steps if kind == "kernel"})
    dtypes = sorted({t.dtype for t in tensors if t.id in per_call})
    n = len(plan.params)
    machine = machine_index is not None
    flavor = "the virtual machine's straight-line tier" if machine else "AOT codegen"

    lines: list[str] = [
        f"# Generated by vm.aot ({flavor} v{AOT_CODEGEN_VERSION}) from a verified executable.",
        "",
        "",
        "def make(B):",
    ]
    bound = 0

    def bind(name: str) -> None:
        nonlocal bound
        lines.append(f"    {name} = B[{bound}]")
        bound += 1

    for p in prims:
        bind(f"k{p}")
    for i in range(n):
        bind(f"conv{i}")
    for i in range(len(dtypes)):
        bind(f"d{i}")
    for tid in static:
        bind(f"t{tid}")
    for helper in _MACHINE_HELPERS if machine else _HELPERS:
        bind(helper)
    dtype_name = {name: f"d{i}" for i, name in enumerate(dtypes)}
    checks: list[str] = []
    for i, (_, shape, dtype) in enumerate(plan.params):
        name = f"t{i}"
        # The machine's own tensors (vm.nd.array, earlier results) pass as plain arrays do.
        checks.append(
            f"if (type({name}) is not ndarray and type({name}) is not tensor) or "
            f"{name}.dtype is not {dtype_name[dtype]} or {name}.shape != {shape!r} or not "
            f"{name}.flags.c_contiguous:"
        )
        checks.append(f"    {name} = conv{i}({name})")
    body: list[str] = []
    kernel_lines: dict[int, tuple[str, str]] = {}
    for kind, step in plan.steps:
        if kind == "tensor":
            tensor = tensors[step]
            if tensor.id not in per_call:
                continue
            if tensor.kind == "view":
                body.append(f"t{tensor.id} = t{tensor.ref}.reshape({tensor.shape!r})")
            else:
                body.append(
                    f"t{tensor.id} = empty(tensor, {tensor.shape!r}, {dtype_name[tensor.dtype]})"
                )
        else:
            body.append(f"k{step.prim}({', '.join(f't{a}' for a in step.args)})")
            kernel_lines[len(body)] = (exe.primitives[step.prim].name, step.where)
    # Results: fresh tensors as they are; inputs and constants as the VM exports them.
    # (Under new names: a constant's name is the closure's, which main must not assign.)
    leaf_names = {}
    result: list[str] = []
    for leaf in sorted(set(leaves)):
        if _root(plan, leaf).id in fresh:
            leaf_names[leaf] = f"t{leaf}"
        else:
            leaf_names[leaf] = f"o{leaf}"
            result.append(f"o{leaf} = own(t{leaf})")
    result_expr = _emit_result(plan.result, leaf_names, result)
    params = ", ".join(f"t{i}" for i in range(n))

    def block(indent: str, block_lines: list[str]) -> None:
        lines.extend(indent + line for line in block_lines)

    if machine:
        positional = f"{params}, /" if n else ""
        lines += ["", f"    def call({positional}):"]
        block("        ", body + result + [f"return {result_expr}"])
        lines += ["", f"    def invoke({positional}):"]
        block("        ", checks)
        lines.append(f"        inputs[{machine_index}] = [{params}]")
        block("        ", body + result + [f"return {result_expr}"])
        lines += ["", "    return invoke, call", ""]
        kernel_lines = {}
    else:
        names = [name for name, _, _ in plan.params]
        if _plain_names(names):
            # Parameters by their own names: Python binds positional and keyword arguments
            # (and reports wrong ones) at no cost, and an argument left out is the input set.
            signature = ", ".join(f"{name}=NOTHING" for name in names)
            lines += ["", f"    def main({signature}):"]
            for i, name in enumerate(names):
                lines.append(f"        t{i} = {name} if {name} is not NOTHING else missing({i})")
        else:
            lines += ["", "    def main(*args, **kwargs):"]
            lines.append(f"        if kwargs or len(args) != {n}:")
            lines.append("            args = prepare(args, kwargs)")
            if n:
                lines.append(f"        {params}{',' if n == 1 else ''} = args")
        block("        ", checks)
        lines.append("        try:")
        first = len(lines)
        block("            ", body or ["pass"])
        kernel_lines = {first + k: v for k, v in kernel_lines.items()}
        lines.append("        except Exception as error:")
        lines.append("            raise fail(error) from None")
        block("        ", result)
        lines.append(f"        last[0] = {result_expr}")
        lines.append(f"        return {result_expr}")
        lines += ["", "    return main", ""]
    return _Generated(
        source="\n".join(lines),
        lines=kernel_lines,
        static=static,
        num_outputs=len(leaves),
        dtypes=dtypes,
    )


#: What ``make`` binds after the kernels, converters, dtypes and static tensors, in order.
#: What both flavors' ``make`` binds first among the helpers (see :func:`bound_objects`).
_SHARED_HELPERS = ("empty", "tensor", "ndarray", "own")
_HELPERS = (*_SHARED_HELPERS, "fail", "prepare", "missing", "last", "NOTHING")
#: What the straight-line tier's ``make`` binds there instead (see :func:`generate_source`).
_MACHINE_HELPERS = (*_SHARED_HELPERS, "inputs")

_INTERNAL = re.compile(r"(k|conv|d|t|o|u)[0-9]+")
_RESERVED = {*_HELPERS, "B", "make", "main", "args", "kwargs", "error"}


def _plain_names(names: Sequence[str]) -> bool:
    """Whether parameter names can be the generated function's own: distinct ASCII
    identifiers, no keywords, no dunders, none of the generated code's names. (Anything
    else, such as ONNX's ``input.1``, takes the ``*args, **kwargs`` form.)"""
    return len(set(names)) == len(names) and all(
        name.isascii()
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("__")
        and name not in _RESERVED
        and not _INTERNAL.fullmatch(name)
        for name in names
    )


def _emit_result(result: Any, leaf_names: Mapping[int, str], lines: list[str]) -> str:
    """Tuples are built bottom-up into temporaries, so nesting never deepens an expression."""
    if not isinstance(result, tuple):
        return leaf_names[result]
    counter = 0
    order: list[tuple[Any, str]] = []
    names: dict[int, str] = {}
    stack: list[tuple[Any, bool]] = [(result, False)]
    while stack:
        item, expanded = stack.pop()
        if not isinstance(item, tuple):
            continue
        if expanded:
            name = f"u{counter}"
            counter += 1
            names[id(item)] = name
            order.append((item, name))
            continue
        stack.append((item, True))
        stack.extend((field, False) for field in item)
    for item, name in order:
        parts = [names[id(f)] if isinstance(f, tuple) else leaf_names[f] for f in item]
        text = ", ".join(parts) + ("," if len(parts) == 1 else "")
        lines.append(f"{name} = ({text})")
    return names[id(result)]


# ---- the module cache --------------------------------------------------------------------------

_MODULES: dict[str, Any] = {}
_LOCK = threading.Lock()


def _load_generated(source: str) -> Callable[[list[Any]], Callable[..., Any]]:
    """``make`` from the module holding ``source``, written to and imported from the cache."""
    from vm.kernels import cache  # deferred: numba, until the first generated module

    key = hashlib.sha256(source.encode()).hexdigest()
    with _LOCK:
        module = _MODULES.get(key)
        if module is None:
            directory = cache.cache_dir() / "aot"
            directory.mkdir(parents=True, exist_ok=True)
            path = cache.write_module(directory, f"a_{key}.py", source)
            module = cache.import_module(path, f"_relayvm_aot_{key}")
            if getattr(module, "make", None) is None:  # pragma: no cover - a tampered cache
                raise VMError(f"the cached AOT module {path} does not define make()")
            _MODULES[key] = module
    return module.make


# ---- the executor ------------------------------------------------------------------------------

_NOTHING = object()


class AotModule:
    """A control-flow-free ``main`` compiled ahead of time into one generated function.

    Parameters
    ----------
    module : vm.Executable or AotModule
        The program (verified here), or another module whose compiled program to share
        (TVM's ``AotModule(factory["default"](dev))``); this module gets its own arena.
    device : vm.Device or None
        Where to run; only the CPU exists.
    func_name : str
        The function to compile (``"main"``).

    Attributes
    ----------
    run : callable
        ``run(*args, **kwargs)`` runs the function: positional arguments in order, keyword
        ones by parameter name; with none, the inputs :meth:`set_input` set are used (and,
        when the parameter names are plain identifiers, for any argument left out). Returns a
        tensor (a numpy array the caller owns) or a tuple of them. It *is* the generated
        function, so calling it costs one Python call.

    Raises
    ------
    AotUnsupportedError
        If the program has control flow, closures, ADTs, recursion or dynamic shapes.
    vm.InvalidExecutableError
        If the executable fails verification.
    vm.VMError
        If one of its kernels cannot be built.

    Examples
    --------
    >>> module = vm.aot.AotModule(relay.vm.compile(mod))   # doctest: +SKIP
    >>> y = module.run(x)                                  # doctest: +SKIP
    """

    _shared: _Shared

    def __init__(self, module: Any, device: Any = None, func_name: str = "main") -> None:
        check_devices(device, "the AOT executor")
        if isinstance(module, AotModule):
            self._shared = module._shared
        else:
            if not isinstance(module, Executable):
                raise TypeError(
                    f"AotModule needs a vm.Executable or an AotModule, got {describe_value(module)}"
                )
            self._shared = compile_function(module, func_name)
        self._device = device
        shared = self._shared
        self._signature = shared.signature
        self._inputs: list[Any] = [_NOTHING] * len(shared.trace.params)
        self._last: list[Any] = [_NOTHING]
        self.run = shared.make(self._bound())

    # -- construction ---------------------------------------------------------------------

    def _bound(self) -> list[Any]:
        shared = self._shared
        lines = shared.generated.lines

        def fail(error: Exception) -> BaseException:
            interrupted = interruption_of(error)
            if interrupted is not None:
                return interrupted  # Ctrl-C in a kernel's call into Python, as itself
            return _kernel_error(error, lines, self.run.__code__, shared.func_name)

        def prepare(args: tuple, kwargs: dict) -> Sequence[Any]:
            return self._prepare(args, kwargs)

        def missing(index: int) -> Any:
            value = self._inputs[index]
            if value is _NOTHING:
                name = self._signature.names[index]
                raise TypeError(
                    f"{self._signature.label} was called without argument {name!r}, and no "
                    "input was set for it with set_input"
                )
            return value

        return [
            *bound_objects(shared),
            fail,
            prepare,
            missing,
            self._last,
            _NOTHING,
        ]

    def _prepare(self, args: tuple, kwargs: dict) -> Sequence[Any]:
        signature = self._signature
        if kwargs:
            return signature.bind(args, kwargs)
        if args or not signature.arity:
            raise signature.count_error(len(args))
        missing = [n for n, v in zip(signature.names, self._inputs) if v is _NOTHING]
        if missing:
            raise TypeError(
                f"{signature.label} was called without arguments, and no input was set "
                f"for {', '.join(repr(m) for m in missing)} with set_input"
            )
        return self._inputs

    # -- TVM's executor interface ---------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``run(*args, **kwargs)``."""
        return self.run(*args, **kwargs)

    def invoke(self, func_name: str = "main", *args: Any, **kwargs: Any) -> Any:
        """``run(*args, **kwargs)``, for code written against the VM's ``invoke``."""
        self._check_name(func_name)
        return self.run(*args, **kwargs)

    def _check_name(self, func_name: Any) -> None:
        if func_name != self._shared.func_name:
            raise UnknownFunctionError(func_name, [self._shared.func_name])

    @property
    def executable(self) -> Any:
        """The executable this module was compiled from."""
        return self._shared.exe

    @property
    def source(self) -> str:
        """The generated function's source (for reading; it is what runs)."""
        return self._shared.generated.source

    def set_input(self, key: Any = None, value: Any = None, **params: Any) -> None:
        """Set inputs by parameter name or position, as TVM's ``AotModule.set_input``.

        Values are checked against the parameter's type at once (the VM's rules).

        Raises
        ------
        TypeError, ValueError
            For an unknown name or index, or a value of the wrong dtype or shape.
        """
        if key is not None:
            self._set_one(key, value)
        for name, item in params.items():
            self._set_one(name, item)

    def _set_one(self, key: Any, value: Any) -> None:
        names = self._signature.names
        if isinstance(key, str):
            index = self.get_input_index(key)
            if index < 0:
                raise TypeError(
                    f"{self._signature.label} has no input named {key!r}; its inputs are "
                    f"{', '.join(names) or 'none'}"
                )
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            index = int(key)
            if not 0 <= index < len(names):
                raise IndexError(
                    f"input index {index} is out of range; {self._signature.label} has "
                    f"{len(names)} input(s)"
                )
        else:
            raise TypeError(f"an input key must be a name or an index, got {describe_value(key)}")
        self._inputs[index] = self._shared.converters[index](value)

    def get_input_index(self, name: str) -> int:
        """The position of input ``name``, or -1 if there is none (as TVM)."""
        names = self._signature.names
        return names.index(name) if name in names else -1

    def get_input(self, index: int) -> Any:
        """The input set at ``index`` (by :meth:`set_input`)."""
        value = self._inputs[index]
        if value is _NOTHING:
            raise ValueError(f"input {index} has not been set; call set_input first")
        return value

    def get_num_inputs(self) -> int:
        """How many inputs the function takes."""
        return len(self._signature.names)

    def get_num_outputs(self) -> int:
        """How many tensors the result holds (a tuple result counts its leaves)."""
        return self._shared.generated.num_outputs

    def get_output(self, index: int, out: np.ndarray | None = None) -> Any:
        """Tensor ``index`` of the last run's result (tuples are flattened in order).

        With ``out``, copies the tensor into it and returns ``out``.

        Raises
        ------
        ValueError
            Before any run.
        IndexError
            For an index past the outputs.
        """
        outputs = self.get_outputs()
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"an output index must be an int, got {describe_value(index)}")
        if not 0 <= index < len(outputs):
            raise IndexError(
                f"output index {index} is out of range; the function has {len(outputs)} output(s)"
            )
        value = outputs[index]
        if out is None:
            return value
        if not isinstance(out, np.ndarray) or out.shape != value.shape or out.dtype != value.dtype:
            raise ValueError(
                f"get_output({index}, out): out must be a {value.dtype} array of shape "
                f"{value.shape}, got {describe_value(out)}"
            )
        out[...] = value
        return out

    def get_outputs(self) -> list[Any]:
        """Every tensor of the last run's result, in order."""
        if self._last[0] is _NOTHING:
            raise ValueError("no outputs yet: run the module first")
        return _leaves(self._last[0])

    def get_device(self) -> Any:
        """The device the module runs on."""

        return self._device if self._device is not None else cpu()

    # -- timing ---------------------------------------------------------------------------

    def time_evaluator(
        self,
        func_name: str = "main",
        dev: Any = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        f_preproc: Callable[..., Any] | str | None = None,
    ) -> Callable[..., Any]:
        """A callable timing ``run`` with TVM's loop, returning a :class:`vm.BenchmarkResult`.

        The callable takes ``run``'s arguments (checked once, before timing; with none, the
        inputs set are used). ``func_name`` may also be ``"run"``, TVM's name for it.
        """

        if func_name != "run":
            self._check_name(func_name)
        check_devices(dev, "time_evaluator")
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )
        preproc = preprocessor(f_preproc)
        run = self.run

        def evaluate(*args: Any, **kwargs: Any) -> Any:
            values = self._checked(args, kwargs)
            return measure(lambda: run(*values), args, preproc, **settings)

        return evaluate

    def benchmark(
        self,
        device: Any = None,
        *args: Any,
        func_name: str = "main",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        **kwargs: Any,
    ) -> Any:
        """Time ``run`` as TVM's ``benchmark`` does; returns a :class:`vm.BenchmarkResult`.

        Arguments, if given, are set as inputs once, untimed; with ``end_to_end=True`` each
        timed call passes them again, so their checks are timed too.
        """

        if device is not None and not isinstance(device, Device):
            raise TypeError(
                "benchmark's first argument is the device (vm.cpu() or None), got "
                f"{describe_value(device)}; pass inputs after it"
            )
        self._check_name(func_name)
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=0 if min_repeat_ms is None else min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )
        run = self.run
        if end_to_end:
            return measure(lambda: run(*args, **kwargs), (), None, **settings)
        values = self._checked(args, kwargs)
        return measure(lambda: run(*values), (), None, **settings)

    def _checked(self, args: tuple, kwargs: dict) -> list[Any]:
        """Arguments converted once (or the inputs set, when none are given)."""
        if args or kwargs or not self._signature.arity:
            if kwargs:
                args = self._signature.bind(args, kwargs)
            values = self._signature.convert_all(args)
        else:
            values = list(self._prepare((), {}))
        return values

    def __repr__(self) -> str:
        shared = self._shared
        kernels = sum(1 for kind, _ in shared.trace.steps if kind == "kernel")
        return (
            f"AotModule(@{shared.func_name}, {kernels} kernel calls, "
            f"{sum(shared.trace.storages)} arena bytes)"
        )


@dataclass
class _Shared:
    """What every module of one executable shares: the plan, kernels and generated code."""

    exe: Any
    func_name: str
    trace: _Trace
    generated: _Generated
    make: Callable[[list[Any]], Callable[..., Any]]
    entries: list[Any]
    converters: list[Any]
    dtypes: list[np.dtype]
    signature: Signature


def kernel_examples(exe: Any) -> dict[int, list[tuple[tuple[int, ...], str]]]:
    """The shapes and dtypes of one call of each primitive that a straight-line function of
    ``exe`` calls (inputs, then outputs), by primitive index.

    A builder process runs each kernel it builds once on zeros of these shapes
    (:mod:`vm.prebuild`), so that the library code a kernel reaches through Python only for
    some shapes (the convolution algorithms) is compiled there, into the disk cache, and
    not by the machine's first call. Functions :func:`trace` refuses add nothing.
    """
    examples: dict[int, list[tuple[tuple[int, ...], str]]] = {}
    for function in exe.functions:
        try:
            plan = trace(exe, function.name)
        except AotUnsupportedError:
            continue
        for prim, example in _examples(plan).items():
            examples.setdefault(prim, example)
    return examples


def compile_function(
    exe: Any, func_name: str, kernels: Sequence[Any] | None = None, machine_index: int | None = None
) -> _Shared:
    """Trace ``func_name`` of ``exe``, generate its source and load it.

    Without ``kernels`` (the executable's loaded kernels, by primitive index), ``exe`` is
    verified and the kernels the function calls are built; a virtual machine passes its
    own (its executable was verified when it was loaded or compiled). ``machine_index``
    selects the machine's straight-line form (see :func:`generate_source`).

    Raises
    ------
    AotUnsupportedError
        If the function is not straight-line code of static shapes (see :func:`trace`).
    """
    if not isinstance(func_name, str) or func_name not in exe.globals:
        raise UnknownFunctionError(func_name, exe.globals)
    if kernels is None:
        verify(exe)
    plan = trace(exe, func_name)
    generated = generate_source(exe, plan, machine_index)
    # Only the kernels the function calls are built (inlined callees included).
    used = sorted({step.prim for kind, step in plan.steps if kind == "kernel"})
    if kernels is None:

        def examples() -> dict[int, list[tuple[tuple[int, ...], str]]]:
            by_prim = _examples(plan)
            return {k: by_prim[prim] for k, prim in enumerate(used)}

        kernels = load_kernels(_Subset(exe, used), examples) if used else []
    else:
        kernels = [kernels[i] for i in used]
    function = exe.get_function(func_name)
    signature = Signature(function, TypeContext(exe.functions, exe.constructor_by_tag))
    converters = [
        make_converter(spec, f"{signature.label}: argument {i} ({name!r})")
        for i, (name, spec) in enumerate(zip(function.params, function.param_types))
    ]
    return _Shared(
        exe=exe,
        func_name=func_name,
        trace=plan,
        generated=generated,
        make=_load_generated(generated.source),
        entries=[k.entry for k in kernels],
        converters=converters,
        dtypes=[np.dtype(d) for d in generated.dtypes],
        signature=signature,
    )


def bound_objects(shared: _Shared) -> list[Any]:
    """What ``make`` is given before the flavor's own helpers: the kernels' entry points,
    the input converters, the dtypes, the static tensors (on a new arena, so every caller
    gets its own) and the objects of :data:`_SHARED_HELPERS`."""
    return [
        *shared.entries,
        *shared.converters,
        *shared.dtypes,
        *_static_views(shared),
        # "empty" and "tensor": results are the VM's tensor type, as invoke's are.
        # ndarray.__new__ called directly skips type.__call__: a 10x10 result took
        # 650 ns through NDArray(shape, dtype), 390 ns this way (AMD EPYC Zen 3).
        np.ndarray.__new__,
        NDArray,
        np.ndarray,
        caller_owned,  # "own": an input or constant returned as the result
    ]


def _static_views(shared: _Shared) -> list[Any]:
    """The tensors a generated function is given once: constants, and views of a new
    arena holding its storages."""
    plan = shared.trace
    arena = _arena(plan.storages)
    views: list[Any] = []
    made: dict[int, np.ndarray] = {}
    for tid in shared.generated.static:
        tensor = plan.tensors[tid]
        if tensor.kind == "const":
            array = shared.exe.constant_values[tensor.ref]
        elif tensor.kind == "view":
            array = made[tensor.ref].reshape(tensor.shape)
        else:
            storage, offset = tensor.ref
            buffer, base = arena
            array = NDArray(tensor.shape, np.dtype(tensor.dtype), buffer, base[storage] + offset)
        made[tid] = array
        views.append(array)
    return views


def _examples(plan: _Trace) -> dict[int, list[tuple[tuple[int, ...], str]]]:
    """:func:`kernel_examples` of one traced function."""
    examples: dict[int, list[tuple[tuple[int, ...], str]]] = {}
    for kind, step in plan.steps:
        if kind == "kernel" and step.prim not in examples:
            tensors = [plan.tensors[t] for t in step.args]
            examples[step.prim] = [(t.shape, t.dtype) for t in tensors]
    return examples


class _Subset:
    """An executable's primitives restricted to ``used`` (for :func:`load_kernels`)."""

    def __init__(self, exe: Any, used: list[int]) -> None:
        self.primitives = [exe.primitives[i] for i in used]


def _arena(storages: list[int]) -> tuple[np.ndarray, list[int]]:
    """One buffer holding every storage at an aligned offset, and those offsets."""
    offsets = []
    total = 0
    for size in storages:
        offsets.append(total)
        total += -(-max(size, 1) // ALIGNMENT) * ALIGNMENT
    raw = np.empty(total + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + total], offsets


def _kernel_error(
    error: BaseException, lines: Mapping[int, tuple[str, str]], code: Any, func_name: str
) -> VMError:
    """A VMError naming the kernel call that raised ``error``."""
    tb = error.__traceback__
    lineno: int | None = None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            lineno = tb.tb_lineno
            break
        tb = tb.tb_next
    unknown = ("a kernel", f"@{func_name}")
    name, where = lines.get(lineno, unknown) if lineno is not None else unknown
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    result = VMError(f"AOT @{func_name}: kernel {name} ({where}) failed: {message}")
    result.function = func_name
    return result


# ---- relay.build's AOT factory -----------------------------------------------------------------


class AotExecutorFactoryModule:
    """What ``relay.build(..., executor="aot")`` returns, as TVM's AOT factory.

    ``factory[mod_name](dev)`` makes an :class:`AotModule`; TVM's
    ``AotModule(factory["default"](dev))`` wraps it (sharing the compiled code).

    Parameters
    ----------
    lib : vm.Executable
        The compiled program; ``main`` must be straight-line code (checked here).
    mod_name : str
        The name the factory answers to.
    target : str
        The target it was compiled for.
    ir_mod : object, optional
        The module it was built from.
    """

    def __init__(
        self, lib: Any, mod_name: str = "default", target: str = "cpu", ir_mod: Any = None
    ):
        if not isinstance(lib, Executable):
            raise TypeError(f"lib must be a vm.Executable, got {describe_value(lib)}")
        if not isinstance(mod_name, str) or not mod_name:
            raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
        self.lib = lib
        self.libmod_name = mod_name
        self.target = target
        self.ir_mod = ir_mod
        # Checked and generated now, so an unsupported program fails at build time.
        self._prototype = AotModule(lib)

    def __getitem__(self, name: str) -> Callable[..., AotModule]:
        if name != self.libmod_name:
            raise KeyError(
                f"this factory holds module {self.libmod_name!r}, not {name!r}; "
                f"use factory[{self.libmod_name!r}]"
            )

        def create_module(device: Any = None) -> AotModule:
            return AotModule(self._prototype, device)

        return create_module

    def get_lib(self) -> Any:
        """The :class:`vm.Executable` the module is generated from."""
        return self.lib

    def export_library(self, path: Any) -> None:
        """Write the executable to ``path`` (``exe.save(path)``); the AOT function is
        regenerated from it when loaded: ``AotModule(vm.Executable.load_exec(path))``."""
        self.lib.save(path)

    def __repr__(self) -> str:
        return f"AotExecutorFactoryModule({self.libmod_name!r}, {self._prototype!r})"
