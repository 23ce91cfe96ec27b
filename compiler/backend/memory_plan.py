"""Static memory planning: where each kernel output lives, and which registers to kill when.

Compiler layer (``compiler.backend``). Pure: :func:`plan_function` reads one lowered
function (type-checked, A-normal form, operators inside primitive functions) and returns
a :class:`FunctionPlan`; the code generator (:mod:`compiler.backend.codegen`) turns the
plan into ``AllocStorage`` / ``AllocTensor`` / ``KillRegister`` instructions.

Liveness
--------
One walk over the function body in evaluation order, the same order the code generator
emits bytecode in, numbers the program points. Every kernel call gets a position, and so
does every consumer of a value (a call, a tuple, a projection, the test of an ``if`` or
``match``, the move of a branch result into the merge register, the return). Because a
Relay function's bytecode only jumps forward, every execution visits positions in
increasing order, so an object used last at position ``q`` is dead after ``q`` on every
path. The walk is a loop over an explicit task stack (no recursion per let binding).

The objects tracked are *buffers* (one per tensor output of each kernel call) and
*foreign* values (results of ``Invoke`` / ``InvokeClosure``, allocated by the callee).
Each value carries the set of objects it may reference, with one level of field
structure for tuples and constructor values, so that ``%t.0`` refers to only the first
output of a kernel. Tuples, constructor values, projections, pattern variables and the
merge of ``if`` / ``match`` branches propagate these sets (the merge takes the union of
its branches, so a value bound across a merge stays tracked). A buffer's interval runs
from its kernel call to the last use of any value referring to it. A buffer *escapes*,
and is never overwritten afterwards, when a value referring to it is returned, passed to
``Invoke`` or ``InvokeClosure``, captured by a closure, or met where the walk cannot
follow it. Values stored in a tuple or constructor value are tracked through it, so they
escape only if that value does.

Offsets
-------
Buffers are packed by *greedy by size with best fit* (the offline strategy of TFLite's
arena planner; Pisarchyk and Lee, "Efficient Memory Management for Deep Neural Net
Inference", 2020): blocks are taken largest first (ties by position) and each goes into
the smallest gap, between the blocks already placed that it conflicts with, that fits it;
if none fits it goes above the highest of them. Sizes are rounded up to
:data:`ALIGNMENT` (64) bytes, so every offset is 64-byte aligned. Two blocks conflict when
their intervals overlap (inclusive, so a kernel never writes its output over one of its
own inputs) unless they are defined in different branches of the same ``if`` / ``match``,
which never both run. Escaping buffers get intervals that never end.

One exception to that inclusive rule: a kernel call whose output may be written over an
argument (:func:`compiler.backend.in_place.in_place_argument`: a pointwise convolution
and its residual) gets that argument's bytes when the argument is a buffer of the same
size that dies at the call and neither escapes (``MemoryObject.over``); the two are then
one block from the argument's call to the output's last use.

Storage layout
--------------
Non-escaping buffers form the *pool*; escaping ones the *result* arena. A function whose
buffers, packed together, take at most :data:`SHARED_STORAGE_BYTES` keeps them in
one ``AllocStorage`` (one instruction pair per call matters for small recursive
functions). Larger functions get two: the pool, then the results, so that a returned
tensor, which keeps its whole storage alive as long as the caller holds it, does not keep
the pool alive. Storages are allocated when the function is entered; each invocation gets
fresh ones, so nothing a later call writes can alias a returned tensor.

Kills (TVM's ManifestLifetimes, filtered by what they free)
-----------------------------------------------------------
Each ``KillRegister`` costs a dispatch (about 50-100 ns), so one is emitted only where it
can return memory:

- no kill for a pool buffer: its bytes are already reused by the static plan, and the
  pool stays allocated as long as any register views it;
- the pool itself (the storage register and every register that may view it) is killed
  after its last buffer dies, when it is separate from the results, holds at least
  :data:`KILL_MIN_BYTES`, and some kernel call or function call comes after (before deep
  recursion, a dead pool is then not kept by every frame);
- a foreign value of at least :data:`KILL_MIN_BYTES` (statically known size) that does
  not escape is killed after its last use when work follows: every register that may hold
  it is cleared, so the callee's storage can be freed;
- no kill right before the function returns (the frame is dropped anyway), none for
  escaping values (something else holds them), and none for values of unknown size.

A kill goes after the let binding that contains the object's last use, lifted to the
innermost scope that also contains the object's definition, so it runs on every path
that allocated the object (a kill inside one branch would miss the other paths).

:func:`peak_intermediate_bytes` reports the bytes of storage one invocation of a function
allocates (what is live at once in its frame): the pool plus the result arena with
planning, the sum of every output without it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any as AnyT
from typing import NamedTuple

import numpy as np

from compiler.backend.in_place import in_place_argument
from compiler.backend.match_compiler import is_irrefutable
from compiler.backend.views import is_view_primitive
from compiler.ir.expr import (
    Call,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.types import FuncType, TensorType, TupleType, Type
from compiler.ir.visitor import free_vars, let_chain
from compiler.transform.pass_manager import PassContext
from compiler.transform.typed_rewrite import is_closure, is_primitive
from vm.isa import OPCODES, Opcode, OperandKind

#: Byte alignment of every kernel output inside a storage.
ALIGNMENT = 64

#: Dtype hint of a function's storage: it is a plain byte buffer shared by all outputs.
STORAGE_DTYPE = "uint8"

#: Pool and results of a function that together fit in this many bytes share one storage.
SHARED_STORAGE_BYTES = 1 << 16

#: Smallest object (in bytes) a ``KillRegister`` is emitted for.
KILL_MIN_BYTES = 1 << 16

#: The ``PassContext`` config key that turns planning off: ``{CONFIG_KEY: False}``.
CONFIG_KEY = "relay.vm.memory_plan"

#: The end of an interval that never ends (escaping buffers).
FOREVER = 1 << 62

BUFFER = "buffer"
FOREIGN = "foreign"

# An alias value: the objects a value may reference, and for a tuple or constructor value
# the alias value of each field (one level; deeper structure is flattened into the sets).
_Alias = tuple[frozenset[int], tuple | None]
_EMPTY: _Alias = (frozenset(), None)


def align(size: int, alignment: int = ALIGNMENT) -> int:
    """``size`` rounded up to a multiple of ``alignment``."""
    return -(-size // alignment) * alignment


# --- offset assignment -------------------------------------------------------------------------


class Block(NamedTuple):
    """A request for bytes: ``size`` bytes needed from position ``start`` to ``end`` inclusive.

    ``arms`` is the path of branches the block is defined in, outermost first, as
    ``(branch point, arm index)`` pairs; blocks in different arms of one branch point
    never exist in the same run.
    """

    size: int
    start: int
    end: int
    arms: tuple[tuple[int, int], ...] = ()

    def conflicts(self, other: Block) -> bool:
        """Whether the two blocks may be live at the same time in some run."""
        if self.start > other.end or other.start > self.end:
            return False
        return not exclusive(self.arms, other.arms)


def exclusive(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> bool:
    """Whether branch paths ``a`` and ``b`` lie in different arms of one branch point."""
    for (point_a, arm_a), (point_b, arm_b) in zip(a, b):
        if point_a != point_b:
            return False  # sequential branch points: both may run
        if arm_a != arm_b:
            return True
    return False


def assign_offsets(blocks: Sequence[Block], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Pack ``blocks`` into one arena: greedy by size, best fit (see the module docstring).

    Parameters
    ----------
    blocks : sequence of Block
        The requests; sizes in bytes (any value, rounded up to ``alignment`` here).
    alignment : int
        Every offset is a multiple of it.

    Returns
    -------
    (list of int, int)
        The byte offset of each block, in input order, and the arena size: the largest
        ``offset + size`` (with the block's own, unrounded, size). Conflicting blocks
        never overlap; the result depends only on the input (ties go to the earlier
        position, then the earlier block).
    """
    count = len(blocks)
    offsets = [0] * count
    sizes = [align(b.size, alignment) for b in blocks]
    order = sorted(range(count), key=lambda i: (-sizes[i], blocks[i].start, i))
    # The blocks placed so far, as arrays for a vectorized overlap test.
    p_start = np.empty(count, dtype=np.int64)
    p_end = np.empty(count, dtype=np.int64)
    p_low = np.empty(count, dtype=np.int64)
    p_high = np.empty(count, dtype=np.int64)
    p_block: list[int] = []
    placed = 0
    for i in order:
        block, size = blocks[i], sizes[i]
        if size == 0:
            continue  # an empty tensor needs no bytes: offset 0 of any storage
        offset = 0
        if placed:
            hits = np.flatnonzero((p_start[:placed] <= block.end) & (p_end[:placed] >= block.start))
            if block.arms and len(hits):
                hits = np.array(
                    [j for j in hits if not exclusive(block.arms, blocks[p_block[j]].arms)],
                    dtype=np.int64,
                )
            if len(hits):
                offset = _best_fit(p_low[hits].tolist(), p_high[hits].tolist(), size)
        offsets[i] = offset
        p_start[placed], p_end[placed] = block.start, block.end
        p_low[placed], p_high[placed] = offset, offset + size
        p_block.append(i)
        placed += 1
    arena = max((offsets[i] + blocks[i].size for i in range(count) if sizes[i]), default=0)
    return offsets, arena


def _best_fit(lows: list[int], highs: list[int], size: int) -> int:
    """The lowest offset of the smallest gap of at least ``size`` bytes between the byte
    ranges ``[lows[i], highs[i])`` (taken from offset 0 up), else the end of the highest."""
    best_gap = -1
    best = -1
    reach = 0  # every byte below it is taken by some range met so far
    for low, high in sorted(zip(lows, highs)):
        gap = low - reach
        if gap >= size and (best < 0 or gap < best_gap):
            best_gap, best = gap, reach
        if high > reach:
            reach = high
    return best if best >= 0 else reach


def sequential_offsets(sizes: Iterable[int], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Each size after the previous one at the next aligned offset (no reuse).

    Returns the offsets and the arena size (the end of the last block).
    """
    offsets = []
    total = 0
    for size in sizes:
        total = align(total, alignment)
        offsets.append(total)
        total += size
    return offsets, total


# --- the plan ----------------------------------------------------------------------------------


@dataclass
class MemoryObject:
    """A kernel output (``kind == "buffer"``) or a callee's result (``"foreign"``).

    ``nbytes`` is ``None`` when the size is not static. ``start`` is the position of the
    call that makes it, ``last_use`` the last position where a value referring to it is
    used, ``escapes`` whether it outlives the frame's control. ``storage`` and ``offset``
    place a buffer (``None`` for foreign objects and dynamic shapes). ``over`` is the
    buffer whose bytes this one is written over, at the kernel call where that one dies
    (:mod:`compiler.backend.in_place`), or None.
    """

    index: int
    kind: str
    nbytes: int | None
    start: int
    last_use: int
    escapes: bool = False
    arms: tuple[tuple[int, int], ...] = ()
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    storage: int | None = None
    offset: int | None = None
    over: int | None = None
    # Where the object was made and last used (scope tree nodes), for kill placement.
    _home: AnyT = field(default=None, repr=False, compare=False)
    _last_at: AnyT = field(default=None, repr=False, compare=False)

    @property
    def end(self) -> int:
        """The last position its bytes are needed at (:data:`FOREVER` if it escapes)."""
        return FOREVER if self.escapes else self.last_use


@dataclass(frozen=True)
class KernelCall:
    """One kernel call (in evaluation order) and the buffers of its outputs, in leaf order."""

    call: Call
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Kill:
    """What to clear after one let binding: holders of ``objects``, and whole ``storages``
    (the storage register and every register that may view a buffer in it)."""

    objects: tuple[int, ...] = ()
    storages: tuple[int, ...] = ()


@dataclass
class FunctionPlan:
    """The memory plan of one function.

    Attributes
    ----------
    planned : bool
        False for the layout without reuse (every output at its own offset, no kills).
    storages : tuple of int
        Byte size of each storage, allocated in this order when the function is entered.
    objects : tuple of MemoryObject
        Every buffer and foreign value, indexed by ``MemoryObject.index``.
    calls : tuple of KernelCall
        Every kernel call in evaluation order; :meth:`kernel_outputs` finds one by identity.
    bindings : tuple of Var
        The let-bound variables in the order their bindings complete.
    kills : dict of int to Kill
        Binding index (into ``bindings``) -> what to clear right after that binding;
        :meth:`kill_after` finds it by the bound variable.
    unplanned_bytes : int
        The storage the function would take without planning.
    """

    planned: bool
    storages: tuple[int, ...]
    objects: tuple[MemoryObject, ...]
    calls: tuple[KernelCall, ...]
    bindings: tuple[Var, ...]
    kills: dict[int, Kill]
    unplanned_bytes: int
    _var_alias: dict[Var, frozenset[int]] = field(default_factory=dict, repr=False)
    _node_alias: dict[int, frozenset[int]] = field(default_factory=dict, repr=False)
    _by_call: dict[Call, KernelCall] = field(init=False, repr=False, compare=False)
    _binding_index: dict[Var, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Expressions hash and compare by identity, so these find the plan's entry for the
        # very node the code generator holds, whatever order it meets them in.
        self._by_call = {entry.call: entry for entry in self.calls}
        self._binding_index = {var: index for index, var in enumerate(self.bindings)}

    def kernel_outputs(self, call: Call) -> tuple[int, ...]:
        """The objects of a kernel call's outputs, in leaf order (none for a view).

        Raises
        ------
        KeyError
            If ``call`` is not a kernel call of the planned body.
        """
        return self._by_call[call].outputs

    def kill_after(self, var: Var) -> Kill | None:
        """What to clear right after the let binding of ``var`` (None: nothing).

        Raises
        ------
        KeyError
            If ``var`` is not let-bound in the planned body.
        """
        return self.kills.get(self._binding_index[var])

    @property
    def peak_bytes(self) -> int:
        """Bytes of storage one invocation allocates (all of it is live at once)."""
        return sum(self.storages)

    @property
    def buffers(self) -> list[MemoryObject]:
        """The kernel outputs, in evaluation order."""
        return [o for o in self.objects if o.kind == BUFFER]

    @property
    def tracked(self) -> frozenset[int]:
        """Objects whose holder registers the code generator must record for kills."""
        out: set[int] = set()
        for kill in self.kills.values():
            out.update(kill.objects)
            for storage in kill.storages:
                out.update(o.index for o in self.objects if o.storage == storage)
        return frozenset(out)

    def alias(self, expr: Expr) -> frozenset[int]:
        """The objects the value of ``expr`` (a node of the planned body) may reference."""
        if isinstance(expr, Var):
            return self._var_alias.get(expr, frozenset())
        return self._node_alias.get(id(expr), frozenset())

    def describe(self) -> str:
        """A text table of the plan: one line per buffer, then the storages and kills."""
        lines = [f"storages: {list(self.storages)} bytes (unplanned {self.unplanned_bytes})"]
        for o in self.buffers:
            end = "escapes" if o.escapes else str(o.last_use)
            where = "dynamic" if o.storage is None else f"storage {o.storage} @ {o.offset}"
            if o.over is not None:
                where += f" over buffer {o.over}"
            lines.append(
                f"  buffer {o.index}: {o.dtype}{list(o.shape or ())} {o.nbytes} B "
                f"[{o.start}, {end}] {where}"
            )
        for index in sorted(self.kills):
            kill = self.kills[index]
            lines.append(
                f"  kill after %{self.bindings[index].name_hint}: objects "
                f"{list(kill.objects)} storages {list(kill.storages)}"
            )
        return "\n".join(lines)


def plan_function(func: Function, planned: bool = True) -> FunctionPlan:
    """Plan the kernel outputs of a lowered function.

    Parameters
    ----------
    func : Function
        A global of a module lowered by :func:`compiler.relay.vm.optimize`. A
        ``Closure=1`` global is planned as the function it is flattened into.
    planned : bool
        False gives the layout without reuse (what ``{CONFIG_KEY: False}`` compiles).

    Returns
    -------
    FunctionPlan
    """
    body = func.body
    if is_closure(func) and isinstance(body, Function):
        body = body.body
    return plan_body(body, planned)


def plan_body(body: Expr, planned: bool = True) -> FunctionPlan:
    """Plan the kernel outputs of a function body (see :func:`plan_function`)."""
    walk = _Liveness()
    walk.run(body)
    return _finish(walk, planned)


def plan_module(mod: IRModule, planned: bool = True) -> dict[str, FunctionPlan]:
    """The plan of every global function of a lowered module, by name."""
    return {
        gvar.name_hint: plan_function(func, planned)
        for gvar, func in mod.functions.items()
        if not is_primitive(func)
    }


def memory_plan_enabled() -> bool:
    """Whether the current ``PassContext`` asks for planning (``CONFIG_KEY``, default True).

    Raises
    ------
    TypeError
        If the config value is not a bool.
    """

    value = PassContext.current().config.get(CONFIG_KEY, True)
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"PassContext config {CONFIG_KEY!r} must be True or False, got {value!r}")
    return bool(value)


# --- reports -----------------------------------------------------------------------------------


def storage_bytes(exe: AnyT) -> dict[str, int]:
    """Bytes of storage each function of an executable allocates per invocation.

    Counts every ``AllocStorage`` whose size register is written only by ``LoadConsti``
    (the only kind the code generator emits). Callees' frames are not included.
    """

    out: dict[str, int] = {}
    for function in exe.functions:
        consts: dict[int, set[int]] = {}
        writes: dict[int, int] = {}
        sizes: list[int] = []
        for ins in function.instructions:
            info = OPCODES[Opcode(ins.opcode)]
            ops = dict(zip(info.operand_names, ins.operands))
            if info.opcode is Opcode.LoadConsti:
                consts.setdefault(ops["dst"], set()).add(ops["value"])
            for (_, kind), value in zip(info.operands, ins.operands):
                if kind is OperandKind.DST:
                    writes[value] = writes.get(value, 0) + 1
            if info.opcode is Opcode.AllocStorage:
                sizes.append(ops["size"])
        total = 0
        for reg in sizes:
            values = consts.get(reg, set())
            if len(values) != 1 or writes.get(reg) != 1:
                raise ValueError(
                    f"function {function.name}: a storage size comes from register ${reg}, "
                    "which is not a single load_consti; its size is not known statically"
                )
            total += next(iter(values))
        out[function.name] = total
    return out


def peak_intermediate_bytes(
    target: AnyT, func_name: str = "main", planned: bool | None = None
) -> int:
    """Peak bytes of kernel outputs one invocation of ``func_name`` keeps at once.

    Parameters
    ----------
    target : vm.Executable, IRModule or Function
        A compiled executable (its storages are read from the bytecode), or a lowered
        module or function (planned here; see :func:`compiler.relay.vm.optimize`).
    func_name : str
        The function, for an executable or a module.
    planned : bool, optional
        For a module or function: with planning (default) or without. An executable was
        compiled one way or the other, so this must be left out.

    Returns
    -------
    int
        With planning: the pool plus the result arena; without: the sum of every output
        (each at its own aligned offset). Callees' frames are not included.
    """
    if hasattr(target, "functions") and hasattr(target, "primitives"):
        if planned is not None:
            raise ValueError(
                "peak_intermediate_bytes: an executable was compiled with or without "
                "planning already; leave out planned= (it applies to modules)"
            )
        sizes = storage_bytes(target)
        if func_name not in sizes:
            raise KeyError(f"the executable has no function named {func_name!r}")
        return sizes[func_name]
    if isinstance(target, IRModule):
        if func_name not in target:
            raise KeyError(f"the module has no function named {func_name!r}")
        target = target[func_name]
    if not isinstance(target, Function):
        raise TypeError(
            "peak_intermediate_bytes expects a vm.Executable, a lowered IRModule or a "
            f"Function, got {type(target).__name__}"
        )
    plan = plan_function(target, planned=True if planned is None else planned)
    return plan.peak_bytes


# --- liveness ----------------------------------------------------------------------------------


class _Scope:
    """A let chain: the function body, a branch arm, or a ``let`` nested in an expression.

    ``parent`` is where the chain sits in the enclosing one: ``(scope, binding)``, with
    ``binding`` None when it is the enclosing chain's final expression.
    """

    __slots__ = ("arms", "depth", "parent")

    def __init__(self, parent: tuple[_Scope, _Binding | None] | None, arms: tuple) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent[0].depth + 1
        self.arms = arms


class _Binding:
    """One let binding; ``index`` is its completion order, ``end`` its last position."""

    __slots__ = ("end", "index")

    def __init__(self) -> None:
        self.index = -1
        self.end = -1


class _Liveness:
    """The walk of the module docstring: positions, objects, uses, escapes."""

    def __init__(self) -> None:
        self.pos = 0
        self.env: dict[Var, _Alias] = {}
        self.values: list[_Alias] = []
        self.tasks: list[tuple[AnyT, AnyT]] = []
        self.objects: list[MemoryObject] = []
        self.calls: list[KernelCall] = []
        # (output, argument's object, position) of each kernel call that may write its
        # output over an argument (compiler.backend.in_place).
        self.over: list[tuple[int, int, int]] = []
        self.bindings: list[Var] = []
        self.binding_objects: list[_Binding] = []
        self.var_alias: dict[Var, frozenset[int]] = {}
        self.node_alias: dict[int, frozenset[int]] = {}
        self.last_work = -1
        self.branch_points = 0
        # A node or variable met twice means the body is not a tree of single bindings;
        # the plan stays correct (it follows occurrences) but kills are left out.
        self.shared = False
        self._seen: set[int] = set()
        self.root = _Scope(None, ())
        self.at: tuple[_Scope, _Binding | None] = (self.root, None)

    # --- driver ---

    def run(self, body: Expr) -> None:
        self._push((self._chain, (body, self.root)), (self._return, None))
        tasks = self.tasks
        while tasks:
            handler, arg = tasks.pop()
            handler(arg)

    def _push(self, *tasks: tuple[AnyT, AnyT]) -> None:
        self.tasks.extend(reversed(tasks))

    def _tick(self) -> int:
        self.pos += 1
        return self.pos

    def _pop(self, count: int) -> list[_Alias]:
        if not count:
            return []
        out = self.values[-count:]
        del self.values[-count:]
        return out

    def _use(self, alias: _Alias) -> None:
        for index in alias[0]:
            obj = self.objects[index]
            obj.last_use = self.pos
            obj._last_at = self.at

    def _escape(self, alias: _Alias) -> None:
        for index in alias[0]:
            self.objects[index].escapes = True

    def _result(self, node: Expr, alias: _Alias) -> None:
        self.values.append(alias)
        if alias[0]:
            self.node_alias[id(node)] = alias[0]

    def _new(self, kind: str, nbytes: int | None, **extra: AnyT) -> int:
        index = len(self.objects)
        self.objects.append(
            MemoryObject(
                index,
                kind,
                nbytes,
                self.pos,
                self.pos,
                arms=self.at[0].arms,
                _home=self.at[0],
                _last_at=self.at,
                **extra,
            )
        )
        return index

    # --- scopes ---

    def _chain(self, arg: tuple[Expr, _Scope]) -> None:
        expr, scope = arg
        bindings, tail = let_chain(expr)
        steps: list[tuple[AnyT, AnyT]] = []
        for let in bindings:
            binding = _Binding()
            steps.append((self._bind_start, (scope, binding)))
            steps.append((self._expr, let.value))
            steps.append((self._bind_end, (let.var, binding)))
        steps.append((self._tail_start, scope))
        steps.append((self._expr, tail))
        self._push(*steps)

    def _bind_start(self, arg: tuple[_Scope, _Binding]) -> None:
        self.at = arg

    def _bind_end(self, arg: tuple[Var, _Binding]) -> None:
        var, binding = arg
        alias = self.values.pop()
        if var in self.env:
            self.shared = True
        self.env[var] = alias
        if alias[0]:
            self.var_alias[var] = alias[0]
        binding.index = len(self.bindings)
        binding.end = self.pos
        self.bindings.append(var)
        self.binding_objects.append(binding)

    def _tail_start(self, scope: _Scope) -> None:
        self.at = (scope, None)

    def _leave(self, scope: _Scope) -> None:
        assert scope.parent is not None
        self.at = scope.parent

    def _return(self, _: None) -> None:
        alias = self.values.pop()
        self._tick()
        self._use(alias)
        self._escape(alias)

    # --- expressions ---

    def _expr(self, expr: Expr) -> None:
        if isinstance(expr, Var):
            self.values.append(self.env.get(expr, _EMPTY))
            return
        if isinstance(expr, (Call, Tuple, TupleGetItem, If, Match, Let)):
            if id(expr) in self._seen:
                self.shared = True
            self._seen.add(id(expr))
        if isinstance(expr, Let):
            scope = _Scope(self.at, self.at[0].arms)
            self._push((self._chain, (expr, scope)), (self._leave, scope))
        elif isinstance(expr, Tuple):
            self._push(*((self._expr, f) for f in expr.fields), (self._aggregate, expr))
        elif isinstance(expr, TupleGetItem):
            self._push((self._expr, expr.tuple_value), (self._get_item, expr))
        elif isinstance(expr, Call):
            self._call(expr)
        elif isinstance(expr, If):
            self._push((self._expr, expr.cond), (self._if, expr))
        elif isinstance(expr, Match):
            self._push((self._expr, expr.data), (self._match, expr))
        elif isinstance(expr, Function) and not is_primitive(expr):
            # A local function left unlifted (the code generator refuses it): whatever it
            # captures is out of reach.
            for var in free_vars(expr):
                self._escape(self.env.get(var, _EMPTY))
            self.values.append(_EMPTY)
        else:  # constants, globals, operators, constructors, primitive functions
            self.values.append(_EMPTY)

    def _call(self, call: Call) -> None:
        callee = call.op
        args = tuple((self._expr, a) for a in call.args)
        if isinstance(callee, GlobalVar):
            self._push(*args, (self._invoke, (call, len(call.args))))
        elif isinstance(callee, Constructor):
            self._push(*args, (self._aggregate, call))
        elif is_primitive(callee):
            self._push(*args, (self._kernel, call))
        elif isinstance(callee, (Op, Function)):
            self._push(*args, (self._opaque, call))
        else:
            self._push((self._expr, callee), *args, (self._invoke, (call, len(call.args) + 1)))

    def _aggregate(self, node: Tuple | Call) -> None:
        fields = self._pop(len(node.fields if isinstance(node, Tuple) else node.args))
        self._tick()
        for f in fields:
            self._use(f)
        flat = frozenset().union(*(f[0] for f in fields)) if fields else frozenset()
        self._result(node, (flat, tuple(fields)))

    def _get_item(self, node: TupleGetItem) -> None:
        value = self.values.pop()
        self._tick()
        self._use(value)
        fields = value[1]
        if fields is not None and 0 <= node.index < len(fields):
            self._result(node, fields[node.index])
        else:
            self._result(node, (value[0], None))

    def _kernel(self, call: Call) -> None:
        args = self._pop(len(call.args))
        self.last_work = self._tick()
        for a in args:
            self._use(a)
        if is_view_primitive(call.op):
            # A zero-copy reshape (compiler.backend.dynamic): it refers to its input's buffers.
            self.calls.append(KernelCall(call, ()))
            self._result(call, (args[0][0], None))
            return
        ty = call._checked_type
        outputs: list[int] = []
        leaves = _tensor_leaves(ty)
        for leaf in leaves or ():
            static = leaf.is_static
            shape = tuple(leaf.shape) if static else None
            nbytes = _nbytes(shape, leaf.dtype) if static else None
            outputs.append(self._new(BUFFER, nbytes, dtype=leaf.dtype, shape=shape))
        self.calls.append(KernelCall(call, tuple(outputs)))
        if len(outputs) == 1:
            at = in_place_argument(call)
            if at is not None and len(args[at][0]) == 1:
                (source,) = args[at][0]
                # Bound to another parameter too, it is read as that while it is written.
                others = (a[0] for i, a in enumerate(args) if i != at)
                if not any(source in objects for objects in others):
                    self.over.append((outputs[0], source, self.last_work))
        if leaves is None:
            self._result(call, _EMPTY)  # the code generator reports the missing type
        else:
            self._result(call, _structure(ty, iter(outputs)))

    def _invoke(self, arg: tuple[Call, int]) -> None:
        call, count = arg
        args = self._pop(count)
        self.last_work = self._tick()
        for a in args:
            self._use(a)
            self._escape(a)
        index = self._new(FOREIGN, _static_bytes(call._checked_type))
        self._result(call, (frozenset((index,)), None))

    def _opaque(self, call: Call) -> None:
        for a in self._pop(len(call.args)):
            self._escape(a)
        self._tick()
        self._result(call, _EMPTY)

    def _if(self, expr: If) -> None:
        cond = self.values.pop()
        self._tick()
        self._use(cond)
        point = self.branch_points
        self.branch_points += 1
        arms = self.at[0].arms
        steps: list[tuple[AnyT, AnyT]] = []
        for index, branch in enumerate((expr.true_branch, expr.false_branch)):
            scope = _Scope(self.at, (*arms, (point, index)))
            steps += [
                (self._chain, (branch, scope)),
                (self._arm_end, None),
                (self._leave, scope),
            ]
        self._push(*steps, (self._merge, (expr, 2)))

    def _match(self, expr: Match) -> None:
        data = self.values.pop()
        self._tick()
        self._use(data)
        clauses = []
        for clause in expr.clauses:
            clauses.append(clause)
            if is_irrefutable(clause.lhs):
                break  # the code generator drops the clauses that can never run
        point = self.branch_points
        self.branch_points += 1
        arms = self.at[0].arms
        steps: list[tuple[AnyT, AnyT]] = []
        for index, clause in enumerate(clauses):
            scope = _Scope(self.at, (*arms, (point, index)))
            steps += [
                (self._clause_start, (clause.lhs, scope, data)),
                (self._chain, (clause.rhs, scope)),
                (self._arm_end, None),
                (self._leave, scope),
            ]
        self._push(*steps, (self._merge, (expr, len(clauses))))

    def _clause_start(self, arg: tuple[AnyT, _Scope, _Alias]) -> None:
        pattern, scope, data = arg
        self.at = (scope, None)
        stack = [(pattern, data)]
        while stack:
            p, value = stack.pop()
            if isinstance(p, PatternVar):
                if p.var in self.env:
                    self.shared = True
                self.env[p.var] = value
                if value[0]:
                    self.var_alias[p.var] = value[0]
            elif isinstance(p, (PatternConstructor, PatternTuple)):
                fields = value[1]
                subs = p.patterns
                for i, sub in enumerate(subs):
                    known = fields is not None and len(fields) == len(subs)
                    stack.append((sub, fields[i] if known else (value[0], None)))  # type: ignore[index]

    def _arm_end(self, _: None) -> None:
        self._tick()  # the move of the arm's value into the merge register
        self._use(self.values[-1])

    def _merge(self, arg: tuple[Expr, int]) -> None:
        node, count = arg
        arms = self._pop(count)
        flat = frozenset().union(*(a[0] for a in arms)) if arms else frozenset()
        fields = None
        widths = {len(a[1]) if a[1] is not None else -1 for a in arms}
        if len(widths) == 1 and -1 not in widths:
            # Field i of the merge refers to what field i of any arm refers to (flattened).
            width = widths.pop()
            fields = tuple(
                (frozenset().union(*(a[1][i][0] for a in arms)), None)  # type: ignore[index]
                for i in range(width)
            )
        self._result(node, (flat, fields))


def _tensor_leaves(ty: Type | None) -> list[TensorType] | None:
    """The tensor leaves of a kernel's output type, or None if it is not one."""
    if ty is None:
        return None
    out: list[TensorType] = []
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, TupleType):
            stack.extend(reversed(t.fields))
        elif isinstance(t, TensorType):
            out.append(t)
        else:
            return None
    return out


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def _static_bytes(ty: Type | None) -> int | None:
    """Bytes of a value of type ``ty`` if it is tensors of static shape, else None."""
    if isinstance(ty, FuncType):
        return None
    leaves = _tensor_leaves(ty)
    if leaves is None or not all(leaf.is_static for leaf in leaves):
        return None
    return sum(_nbytes(tuple(leaf.shape), leaf.dtype) for leaf in leaves)  # type: ignore[arg-type]


def _structure(ty: Type, outputs: Iterable[int]) -> _Alias:
    """The alias value of a kernel result of type ``ty`` built from its output buffers."""
    leaves = iter(outputs)
    if isinstance(ty, TensorType):
        return (frozenset((next(leaves),)), None)
    done: dict[int, _Alias] = {}
    stack: list[tuple[Type, bool]] = [(ty, False)]
    while stack:
        t, expanded = stack.pop()
        if isinstance(t, TensorType):
            done[id(t)] = (frozenset((next(leaves),)), None)
        elif not expanded:
            assert isinstance(t, TupleType)
            stack.append((t, True))
            stack.extend((f, False) for f in reversed(t.fields))
        else:
            assert isinstance(t, TupleType)
            fields = tuple(done[id(f)] for f in t.fields)
            # Deeper tuples are kept one level deep: nested fields are flattened.
            flat_fields = tuple((f[0], None) for f in fields)
            done[id(t)] = (frozenset().union(*(f[0] for f in fields)), flat_fields)
    return done[id(ty)]


# --- from liveness to a plan ---------------------------------------------------------------------


def _finish(walk: _Liveness, planned: bool) -> FunctionPlan:
    objects = walk.objects
    static = [o for o in objects if o.kind == BUFFER and o.nbytes is not None]
    offsets, unplanned = sequential_offsets(o.nbytes for o in static)  # type: ignore[misc]
    kills: dict[int, Kill] = {}
    if not planned:
        for o, offset in zip(static, offsets):
            o.storage, o.offset = 0, offset
        storages: tuple[int, ...] = (unplanned,) if static else ()
    else:
        _write_over(walk)
        storages = _layout(static)
        if not walk.shared:
            kills = _kills(walk, storages)
    return FunctionPlan(
        planned=planned,
        storages=storages,
        objects=tuple(objects),
        calls=tuple(walk.calls),
        bindings=tuple(walk.bindings),
        kills=kills,
        unplanned_bytes=unplanned,
        _var_alias=walk.var_alias,
        _node_alias=walk.node_alias,
    )


def _write_over(walk: _Liveness) -> None:
    """Set ``over`` on each output that may be written over an argument dying at its call:
    a static buffer of the same size, neither of them escaping (both stay in the pool)."""
    objects = walk.objects
    for output, source, position in walk.over:
        out, arg = objects[output], objects[source]
        if (
            arg.kind == BUFFER
            and arg.nbytes is not None
            and arg.nbytes == out.nbytes
            and arg.last_use == position
            and not arg.escapes
            and not out.escapes
        ):
            out.over = source


def _place(objs: Sequence[MemoryObject], storage: int) -> int:
    """Place ``objs`` in one storage; returns its size. An object written over another's
    bytes (``MemoryObject.over``) takes the offset of the first of its chain, whose block
    then spans the whole chain."""
    head: dict[int, int] = {}
    end: dict[int, int] = {}
    for o in objs:  # in evaluation order: ``over`` names an earlier object
        first = head.get(o.over, o.index) if o.over is not None else o.index
        head[o.index] = first
        end[first] = max(end.get(first, o.end), o.end)
    heads = [o for o in objs if head[o.index] == o.index]
    offsets, size = assign_offsets(
        [Block(o.nbytes or 0, o.start, end[o.index], o.arms) for o in heads]
    )
    placed = dict(zip((o.index for o in heads), offsets))
    for o in objs:
        o.storage, o.offset = storage, placed[head[o.index]]
    return size


def _layout(static: Sequence[MemoryObject]) -> tuple[int, ...]:
    """Place every static buffer; returns the storage sizes (see "Storage layout")."""
    if not static:
        return ()
    pool = [o for o in static if not o.escapes]
    results = [o for o in static if o.escapes]
    size = _place(static, 0)
    if not pool or not results or size <= SHARED_STORAGE_BYTES:
        return (size,)
    return (_place(pool, 0), _place(results, 1))


def _kill_anchor(walk: _Liveness, home: _Scope, last_at: tuple) -> _Binding | None:
    """The binding to kill after: the one holding the last use, in the innermost scope that
    also holds the definition (None if that is the function's final expression)."""
    scope_a, scope_b = home, last_at[0]
    while scope_a.depth > scope_b.depth:
        scope_a = scope_a.parent[0]  # type: ignore[index]
    while scope_b.depth > scope_a.depth:
        scope_b = scope_b.parent[0]  # type: ignore[index]
    while scope_a is not scope_b:
        scope_a = scope_a.parent[0]  # type: ignore[index]
        scope_b = scope_b.parent[0]  # type: ignore[index]
    at = last_at
    while at[0].depth > scope_a.depth:
        at = at[0].parent
    while at[1] is None:
        if at[0].parent is None:
            return None
        at = at[0].parent
    return at[1]


def _kills(walk: _Liveness, storages: tuple[int, ...]) -> dict[int, Kill]:
    objects: dict[int, list[int]] = {}
    dead_storages: dict[int, list[int]] = {}

    def worth_it(binding: _Binding | None) -> bool:
        # Only if some kernel or function call comes later: a kill just before the
        # return frees nothing the frame's own end would not.
        return binding is not None and binding.end < walk.last_work

    for o in walk.objects:
        if o.kind != FOREIGN or o.escapes or o.nbytes is None or o.nbytes < KILL_MIN_BYTES:
            continue
        anchor = _kill_anchor(walk, o._home, o._last_at)
        if worth_it(anchor):
            objects.setdefault(anchor.index, []).append(o.index)  # type: ignore[union-attr]
    if len(storages) == 2 and storages[0] >= KILL_MIN_BYTES:
        pool = [o for o in walk.objects if o.kind == BUFFER and o.storage == 0]
        last = max(pool, key=lambda o: o.last_use)
        anchor = _kill_anchor(walk, walk.root, last._last_at)
        if worth_it(anchor):
            dead_storages.setdefault(anchor.index, []).append(0)  # type: ignore[union-attr]
    return {
        index: Kill(tuple(objects.get(index, ())), tuple(dead_storages.get(index, ())))
        for index in sorted(set(objects) | set(dead_storages))
    }
