"""Bytecode generation: a lowered IRModule becomes a ``vm.Executable`` through ``vm.builder``.

Compiler layer (``compiler.backend``).

Input: a type-checked module after primitive extraction, A-normal form and lambda
lifting (see :mod:`compiler.relay.vm`). Every global function becomes one VM function
(a ``Closure=1`` global is flattened: captured values first, then the parameters), with
function indices declared up front in module order so calls can precede their callees.
Parameters live in registers ``0 .. n-1``; every other value gets a fresh register
(no reuse yet). The rules follow TVM's Relay VM compiler:

- constant -> ``LoadConst`` (the builder interns constants); variable -> its register;
- tuple -> ``AllocADT`` tag 0; projection -> ``GetField``; ``let`` -> the value's register;
- ``if`` -> ``LoadConsti 1; If cond one 1 else; <then>; Move; Goto end; else: <else>; Move``;
- ``match`` -> one decision tree per clause in order (:mod:`.match_compiler`), each body
  moved into one merge register, ``Fatal`` when nothing matches;
- call of a global -> ``Invoke`` (``AllocClosure`` with the captured values for a
  ``Closure=1`` global); of a constructor -> ``AllocADT``; of a primitive function ->
  ``AllocTensor`` per output then ``InvokePacked``; of anything else -> ``InvokeClosure``;
- a global used as a value -> ``AllocClosure`` with nothing captured.

Kernel outputs of static shape are carved out of the storages the memory plan
(:mod:`compiler.backend.memory_plan`) gives the function, allocated first: one pool whose
bytes are reused by outputs that are never live at once, and, in large functions, a
separate storage for the outputs that escape. ``KillRegister`` follows the bindings after
which the plan frees a large value or the whole pool. Planning is on unless the current
``PassContext`` sets ``{"relay.vm.memory_plan": False}`` (or ``compile_module`` is called
with ``memory_plan=False``); then every output gets its own 64-byte aligned offset in
one storage and nothing is killed. Compilation walks the program with an explicit task
stack, so deep programs need no Python recursion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any as AnyT

from compiler.backend import dynamic
from compiler.backend.kernel_desc import (
    KernelDescriptionError,
    PrimitiveNames,
    describe_primitive,
    drop_unused_inputs,
)
from compiler.backend.match_compiler import emit_pattern, is_irrefutable
from compiler.backend.memory_plan import (
    ALIGNMENT,
    STORAGE_DTYPE,
    FunctionPlan,
    memory_plan_enabled,
    plan_body,
)
from compiler.backend.prune import prune
from compiler.backend.type_specs import tensor_leaves, type_spec
from compiler.ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.types import Any, FuncType, TensorType, TupleType, Type
from compiler.ir.visitor import let_chain, post_order
from compiler.transform.typed_rewrite import is_closure, is_primitive, known_type
from vm.builder import ExecutableBuilder, FunctionBuilder, Label
from vm.isa import Opcode
from vm.kernels import KernelDescriptionError as RuntimeKernelError
from vm.kernels import check_description

__all__ = ["ALIGNMENT", "STORAGE_DTYPE", "CodegenError", "compile_module"]


class CodegenError(ValueError):
    """The module cannot be turned into bytecode; the message names the construct and where."""


def compile_module(mod: IRModule, memory_plan: bool | None = None) -> AnyT:
    """Generate the executable of a lowered module.

    Parameters
    ----------
    mod : IRModule
        Type-checked, with operators only inside primitive functions, in A-normal form
        and lambda-lifted (:func:`compiler.relay.vm.optimize` produces this).
    memory_plan : bool, optional
        Reuse storage across kernel outputs and kill dead values (True), or give every
        output its own bytes (False). By default the current ``PassContext`` decides
        (config key ``"relay.vm.memory_plan"``, True unless set).

    Returns
    -------
    vm.Executable
        The verified executable: one VM function per global, in module order.

    Raises
    ------
    CodegenError
        If the module holds something the VM cannot run yet (such as a kernel output of
        dynamic shape) or was not lowered first.
    """
    planned = memory_plan_enabled() if memory_plan is None else bool(memory_plan)
    builder = ExecutableBuilder()
    for ctor in mod.constructors:
        # Field types name the type's parameters as ("var", i), i its position in the header,
        # so the VM can check a caller-made value's fields against the type's arguments.
        type_params = mod.get_type_data(ctor.belong_to).type_vars
        numbering = {var: i for i, var in enumerate(type_params)}
        builder.add_constructor(
            ctor.tag,
            ctor.name_hint,
            len(ctor.inputs),
            ctor.belong_to.name_hint,
            type_arity=len(type_params),
            field_types=[type_spec(field, numbering) for field in ctor.inputs],
        )
    context = _ModuleContext(mod, builder)
    for gvar, func in mod.functions.items():
        if is_primitive(func):
            raise CodegenError(
                f"global @{gvar.name_hint} is a primitive function; primitive functions are "
                "compiled as kernels where they are called, not as globals"
            )
        builder.declare(gvar.name_hint)
    for gvar, func in mod.functions.items():
        compiled = _FunctionCompiler(context, gvar.name_hint, func, planned).compile()
        builder.add_function(prune(compiled.finish()))
    return builder.build()


class _ModuleContext:
    """What every function's compilation shares: the builder, the globals, the kernels."""

    def __init__(self, mod: IRModule, builder: ExecutableBuilder) -> None:
        self.mod = mod
        self.builder = builder
        self.names = PrimitiveNames()
        self._kernels: dict[int, tuple[int, Function]] = {}
        self._checked: set[str] = set()
        # Shape functions of dynamic kernels, described once per module (see dynamic).
        self.shape_functions: dict[int, tuple[int, list[int], list[int], Function]] = {}

    def global_info(self, gvar: GlobalVar) -> tuple[int, Function]:
        try:
            func = self.mod[gvar]
        except KeyError:
            raise CodegenError(
                f"call of @{gvar.name_hint}, which the module does not define"
            ) from None
        return self.builder.function_index(gvar.name_hint), func

    def kernel_index(self, func: Function, where: str) -> tuple[int, list[int]]:
        """The primitive index of a primitive function (described, checked and named once),
        and the positions of the flattened inputs its kernel reads.

        Kernels the runtime cannot build are refused here, naming the function they are
        called from, rather than later when the executable is verified.
        """
        cached = self._kernels.get(id(func))
        if cached is None:
            ops = _op_names(func)
            try:
                base, description = describe_primitive(func)
                description, kept = drop_unused_inputs(description)
                name = self.names.name(base, description)
                if name not in self._checked:
                    check_description(description)
                    self._checked.add(name)
            except (KernelDescriptionError, RuntimeKernelError) as err:
                raise CodegenError(
                    f"in @{where}: the primitive function calling {ops} cannot become a "
                    f"kernel: {err}"
                ) from None
            cached = (self.builder.add_primitive(name, description), kept, func)
            self._kernels[id(func)] = cached  # the function is kept alive with its id
        return cached[0], cached[1]


Task = tuple[Callable[[AnyT], None], AnyT]


class _FunctionCompiler:
    def __init__(
        self, context: _ModuleContext, name: str, func: Function, planned: bool = True
    ) -> None:
        self.context = context
        self.name = name
        self.func = func
        self.planned = planned
        self.env: dict[Var, int] = {}
        self.tasks: list[Task] = []
        self.regs: list[int] = []
        self.storages: list[int] = []  # the register of each storage of the plan
        # Register of a tensor -> register of its shape vector, for tensors shaped at run
        # time (see dynamic).
        self.known_shapes: dict[int, int] = {}
        # Registers that may hold each object some kill clears (see memory_plan).
        self._holders: dict[int, list[int]] = {}
        self._tracked: frozenset[int] = frozenset()
        # The field registers of each tuple this function built: projecting such a tuple
        # reads the field's register instead of emitting GetField. Registers are defined
        # once and a tuple's fields hold its objects, so they die with it.
        self._fields: dict[int, list[int]] = {}
        # Failure labels of the match clauses being compiled, innermost last.
        self._fail: list[Label] = []

    # --- entry ----------------------------------------------------------------------------

    def compile(self) -> FunctionBuilder:
        func = self.func
        params = list(func.params)
        body = func.body
        ret: Type | None = func.ret_type
        if ret is None and isinstance(func._checked_type, FuncType):
            ret = func._checked_type.ret_type
        if is_closure(func):
            # Captured values first, then the inner function's parameters (TVM's convention).
            inner = func.body
            if not isinstance(inner, Function):
                raise CodegenError(f"closure global @{self.name} does not return a function")
            params += inner.params
            body = inner.body
            ret = inner.ret_type
            if ret is None and isinstance(inner._checked_type, FuncType):
                ret = inner._checked_type.ret_type
        if ret is None:
            ret = known_type(body)
        # One numbering of type variables for the whole signature, so ("var", n) means the
        # same type in every parameter and the result.
        numbering: dict = {}
        param_types = [
            self._spec(known_type(p), f"parameter %{p.name_hint}", numbering) for p in params
        ]
        self.fb = self.context.builder.function(
            self.name,
            [p.name_hint for p in params],
            param_types,
            self._spec(ret, "result", numbering),
        )
        for index, param in enumerate(params):
            self.env[param] = index
        self.plan = plan_body(body, self.planned)
        self._tracked = self.plan.tracked
        self._allocate_storages()
        self._push((self._expr, body))
        self._run()
        result = self.regs.pop()
        assert not self.regs, "every value is consumed"
        self.fb.emit(Opcode.Ret, result)
        return self.fb

    def _spec(self, ty: Type | None, what: str, numbering: dict) -> AnyT:
        if ty is None:
            raise CodegenError(
                f"{what} of @{self.name} has no type; run type inference before code generation"
            )
        return type_spec(ty, numbering)

    def _push(self, *tasks: Task) -> None:
        """Schedule ``tasks`` to run next, in the order given."""
        self.tasks.extend(reversed(tasks))

    def _run(self) -> None:
        tasks = self.tasks
        while tasks:
            handler, arg = tasks.pop()
            handler(arg)

    def error(self, message: str) -> CodegenError:
        return CodegenError(f"in @{self.name}: {message}")

    # --- storage for kernel outputs ---------------------------------------------------------

    def _allocate_storages(self) -> None:
        """Allocate the plan's storages first; every kernel output is a view into one."""
        for nbytes in self.plan.storages:
            size = self.fb.reg()
            self.fb.emit(Opcode.LoadConsti, nbytes, size)
            storage = self.fb.reg()
            self.fb.emit(Opcode.AllocStorage, size, ALIGNMENT, STORAGE_DTYPE, storage)
            self.storages.append(storage)

    def hold(self, objects: frozenset[int], reg: int) -> None:
        """Record that ``reg`` may hold ``objects`` (only those some kill clears)."""
        for index in objects & self._tracked:
            self._holders.setdefault(index, []).append(reg)

    def _kill_after_binding(self, var: Var) -> None:
        """Emit the plan's kills for the binding of ``var`` that just completed."""
        plan: FunctionPlan = self.plan
        try:
            kill = plan.kill_after(var)
        except KeyError:
            raise self.error(
                f"internal error: the memory plan does not know the binding of %{var.name_hint}"
            ) from None
        if kill is None:
            return
        regs: set[int] = set()
        for obj in kill.objects:
            regs.update(self._holders.get(obj, ()))
        for storage in kill.storages:
            regs.add(self.storages[storage])
            for obj in plan.objects:
                if obj.storage == storage:
                    regs.update(self._holders.get(obj.index, ()))
        for reg in sorted(regs):
            self.fb.emit(Opcode.KillRegister, reg)

    def _output_leaves(self, call: Call) -> list[TensorType]:
        ty = call._checked_type
        if ty is None:
            ops = _op_names(call.op)
            raise self.error(f"the call of operator {ops} has no type; run type inference first")
        leaves = tensor_leaves(ty)
        for leaf in leaves:
            if any(isinstance(d, Any) for d in leaf.shape):
                ops = _op_names(call.op)
                raise self.error(
                    f"operator {ops} produces {ty}, whose shape is only known at run time; "
                    "outputs of dynamic shape are not supported by the VM compiler yet"
                )
        return leaves

    # --- expressions -------------------------------------------------------------------------

    def _expr(self, expr: Expr) -> None:
        """Compile ``expr``; its register ends up on top of ``self.regs``."""
        fb = self.fb
        if isinstance(expr, Var):
            reg = self.env.get(expr)
            if reg is None:
                raise self.error(f"variable %{expr.name_hint} is used outside its scope")
            self.regs.append(reg)
        elif isinstance(expr, Constant):
            dst = fb.reg()
            fb.emit(Opcode.LoadConst, self.context.builder.add_constant(expr.data), dst)
            self.regs.append(dst)
        elif isinstance(expr, GlobalVar):
            index, func = self.context.global_info(expr)
            if is_closure(func):
                raise self.error(
                    f"closure global @{expr.name_hint} is used as a value without its "
                    "captured values"
                )
            dst = fb.reg()
            fb.emit(Opcode.AllocClosure, index, (), dst)
            self.regs.append(dst)
        elif isinstance(expr, Constructor):
            raise self.error(
                f"constructor {expr.name_hint} is used as a value; eta-expand it "
                "(compiler.transform.eta_expand) before code generation"
            )
        elif isinstance(expr, Let):
            bindings, tail = let_chain(expr)
            steps: list[Task] = []
            for let in bindings:
                if isinstance(let.value, Function):
                    raise self.error(
                        f"%{let.var.name_hint} is bound to a local function; run lambda "
                        "lifting (compiler.transform.lambda_lift) before code generation"
                    )
                steps.append((self._expr, let.value))
                steps.append((self._bind, let.var))
            steps.append((self._expr, tail))
            self._push(*steps)
        elif isinstance(expr, Tuple):
            self._push(*((self._expr, f) for f in expr.fields), (self._alloc_tuple, expr))
        elif isinstance(expr, TupleGetItem):
            self._push((self._expr, expr.tuple_value), (self._get_field, expr))
        elif isinstance(expr, Call):
            self._call(expr)
        elif isinstance(expr, If):
            self._push((self._expr, expr.cond), (self._if, expr))
        elif isinstance(expr, Match):
            self._push((self._expr, expr.data), (self._match, expr))
        elif isinstance(expr, Op):
            raise self.error(
                f"operator {expr.name} is used as a value; wrap it in a function, "
                f"e.g. fn (%a, %b) {{ {expr.name}(%a, %b) }}"
            )
        elif isinstance(expr, Function):
            what = "primitive function" if is_primitive(expr) else "local function"
            raise self.error(
                f"a {what} is used as a value; run primitive extraction and lambda lifting "
                "before code generation"
            )
        else:
            raise self.error(f"cannot compile a {type(expr).__name__}")

    def _bind(self, var: Var) -> None:
        self.env[var] = self.regs.pop()
        self._kill_after_binding(var)

    def _pop(self, count: int) -> list[int]:
        if not count:
            return []
        regs = self.regs[-count:]
        del self.regs[-count:]
        return regs

    def _alloc_tuple(self, expr: Tuple) -> None:
        dst = self.fb.reg()
        fields = self._pop(len(expr.fields))
        self.fb.emit(Opcode.AllocADT, 0, fields, dst)
        self._fields[dst] = fields
        self.hold(self.plan.alias(expr), dst)
        self.regs.append(dst)

    def _get_field(self, expr: TupleGetItem) -> None:
        self.regs.append(self._field(self.regs.pop(), expr.index, self.plan.alias(expr)))

    def _field(self, tuple_reg: int, index: int, objects: frozenset[int]) -> int:
        """The register of field ``index`` of the tuple in ``tuple_reg``."""
        known = self._fields.get(tuple_reg)
        if known is not None:
            return known[index]
        dst = self.fb.reg()
        self.fb.emit(Opcode.GetField, tuple_reg, index, dst)
        self.hold(objects, dst)
        return dst

    def _alloc_adt(self, call: Call) -> None:
        ctor = call.op
        assert isinstance(ctor, Constructor)
        dst = self.fb.reg()
        self.fb.emit(Opcode.AllocADT, ctor.tag, self._pop(len(ctor.inputs)), dst)
        self.hold(self.plan.alias(call), dst)
        self.regs.append(dst)

    # --- calls -------------------------------------------------------------------------------

    def _call(self, call: Call) -> None:
        callee = call.op
        args = tuple((self._expr, a) for a in call.args)
        if isinstance(callee, GlobalVar):
            self._push(*args, (self._invoke, call))
        elif isinstance(callee, Constructor):
            if len(call.args) != len(callee.inputs):
                raise self.error(
                    f"constructor {callee.name_hint} takes {len(callee.inputs)} fields, "
                    f"given {len(call.args)}"
                )
            self._push(*args, (self._alloc_adt, call))
        elif is_primitive(callee):
            self._push(*args, (self._invoke_packed, call))
        elif isinstance(callee, Op):
            raise self.error(
                f"operator {callee.name} is called outside a primitive function; run "
                "primitive extraction (compiler.transform.wrap_primitives) before code generation"
            )
        elif isinstance(callee, Function):
            raise self.error(
                "a local function is called directly; run lambda lifting before code generation"
            )
        else:
            self._push((self._expr, callee), *args, (self._invoke_closure, call))

    def _invoke(self, call: Call) -> None:
        assert isinstance(call.op, GlobalVar)
        index, func = self.context.global_info(call.op)
        args = self._pop(len(call.args))
        dst = self.fb.reg()
        if is_closure(func):
            self.fb.emit(Opcode.AllocClosure, index, args, dst)
        else:
            self.fb.emit(Opcode.Invoke, index, args, dst)
        self.hold(self.plan.alias(call), dst)
        self.regs.append(dst)

    def _invoke_closure(self, call: Call) -> None:
        args = self._pop(len(call.args))
        closure = self.regs.pop()
        dst = self.fb.reg()
        self.fb.emit(Opcode.InvokeClosure, closure, args, dst)
        self.hold(self.plan.alias(call), dst)
        self.regs.append(dst)

    def _invoke_packed(self, call: Call) -> None:
        func = call.op
        assert isinstance(func, Function)
        fb = self.fb
        plan = self.plan
        args = self._pop(len(call.args))
        inputs: list[int] = []
        for param, reg, arg in zip(func.params, args, call.args):
            ty = known_type(param)
            if ty is None:
                raise self.error(
                    f"primitive parameter %{param.name_hint} has no type; run type inference first"
                )
            inputs.extend(self._tensor_registers(ty, reg, plan.alias(arg)))
        # Dynamic output shapes and zero-copy reshapes: compiler.backend.dynamic.
        if dynamic.lowers_here(func, call):
            self.regs.append(dynamic.emit_call(self, call, inputs))
            return
        leaves = self._output_leaves(call)
        try:
            planned_outputs = plan.kernel_outputs(call)
        except KeyError:
            raise self.error(
                "internal error: a kernel call the memory plan does not know"
            ) from None
        outputs = []
        for leaf, obj in zip(leaves, planned_outputs):
            placed = plan.objects[obj]
            assert placed.storage is not None and placed.offset is not None
            dst = fb.reg()
            fb.emit(
                Opcode.AllocTensor,
                self.storages[placed.storage],
                placed.offset,
                leaf.concrete_shape,
                leaf.dtype,
                dst,
            )
            self.hold(frozenset((obj,)), dst)
            outputs.append(dst)
        index, kept = self.context.kernel_index(func, self.name)
        inputs = [inputs[i] for i in kept]
        fb.emit(Opcode.InvokePacked, index, inputs + outputs, len(outputs))
        assert call._checked_type is not None
        self.regs.append(self.assemble(call._checked_type, outputs, plan.alias(call)))

    def _tensor_registers(self, ty: Type, reg: int, objects: frozenset[int]) -> list[int]:
        """Registers of the tensors inside a value of type ``ty`` (tuples are projected);
        ``objects`` are what the value may reference, for the kills."""
        out: list[int] = []
        stack: list[tuple[Type, int]] = [(ty, reg)]
        while stack:
            t, r = stack.pop()
            if not isinstance(t, TupleType):
                out.append(r)
                continue
            fields = [(f, self._field(r, i, objects)) for i, f in enumerate(t.fields)]
            stack.extend(reversed(fields))
        return out

    def assemble(self, ty: Type, outputs: list[int], objects: frozenset[int]) -> int:
        """The register holding a value of type ``ty`` built from kernel outputs in order
        (``objects``: the outputs' buffers, for the kills)."""
        if isinstance(ty, TensorType):
            return outputs[0]
        leaves = iter(outputs)
        done: dict[int, int] = {}
        stack: list[tuple[Type, bool]] = [(ty, False)]
        while stack:
            t, expanded = stack.pop()
            if isinstance(t, TensorType):
                done[id(t)] = next(leaves)
            elif not expanded:
                assert isinstance(t, TupleType)
                stack.append((t, True))
                stack.extend((f, False) for f in reversed(t.fields))
            else:
                dst = self.fb.reg()
                fields = [done[id(f)] for f in t.fields]
                self.fb.emit(Opcode.AllocADT, 0, fields, dst)
                self._fields[dst] = fields
                self.hold(objects, dst)
                done[id(t)] = dst
        return done[id(ty)]

    # --- control flow ------------------------------------------------------------------------

    def _if(self, expr: If) -> None:
        fb = self.fb
        cond = self.regs.pop()
        one = fb.reg()
        fb.emit(Opcode.LoadConsti, 1, one)
        otherwise, end = fb.label(), fb.label()
        fb.emit(Opcode.If, cond, one, 1, otherwise)
        merge = fb.reg()
        self.hold(self.plan.alias(expr), merge)
        self._push(
            (self._expr, expr.true_branch),
            (self._branch_done, (merge, end, otherwise)),
            (self._expr, expr.false_branch),
            (self._branch_done, (merge, None, end)),
            (self._result, merge),
        )

    def _branch_done(self, arg: tuple[int, Label | None, Label]) -> None:
        """Move the branch's value into the merge register, jump to ``end`` (if given) and
        place ``label`` where the code continues."""
        merge, end, label = arg
        self.fb.emit(Opcode.Move, self.regs.pop(), merge)
        if end is not None:
            self.fb.emit(Opcode.Goto, end)
        self.fb.place(label)

    def _result(self, reg: int) -> None:
        self.regs.append(reg)

    def _match(self, expr: Match) -> None:
        data = self.regs.pop()
        merge = self.fb.reg()
        self.hold(self.plan.alias(expr), merge)
        end = self.fb.label()
        clauses: list[Clause] = []
        for clause in expr.clauses:
            clauses.append(clause)
            if is_irrefutable(clause.lhs):
                break  # later clauses can never run
        if not clauses:
            raise self.error("match has no clauses")
        steps: list[Task] = []
        for i, clause in enumerate(clauses):
            last = i == len(clauses) - 1
            exhaustive_end = last and is_irrefutable(clause.lhs)
            steps.append((self._clause_start, (clause, data, expr.data)))
            steps.append((self._expr, clause.rhs))
            steps.append((self._clause_done, (merge, None if exhaustive_end else end)))
        if not is_irrefutable(clauses[-1].lhs):
            steps.append((self._fatal, None))
        steps.append((self._place_result, (end, merge)))
        self._push(*steps)

    def _clause_start(self, arg: tuple[Clause, int, Expr]) -> None:
        clause, data, data_expr = arg
        fail = self.fb.label()
        first = self.fb.num_registers
        emit_pattern(self.fb, clause.lhs, data, fail, self.env)
        # The pattern's registers (its variables and the fields on the way) hold parts of
        # the matched value.
        objects = self.plan.alias(data_expr)
        for reg in range(first, self.fb.num_registers):
            self.hold(objects, reg)
        self._fail.append(fail)

    def _clause_done(self, arg: tuple[int, Label | None]) -> None:
        merge, end = arg
        self.fb.emit(Opcode.Move, self.regs.pop(), merge)
        if end is not None:
            self.fb.emit(Opcode.Goto, end)
        # The next clause (or the Fatal) starts where this clause's tests jump on failure.
        self.fb.place(self._fail.pop())

    def _fatal(self, _: None) -> None:
        self.fb.emit(Opcode.Fatal)

    def _place_result(self, arg: tuple[Label, int]) -> None:
        end, merge = arg
        self.fb.place(end)
        self.regs.append(merge)


def _op_names(callee: Expr) -> str:
    """The operators called inside a primitive function, for error messages."""
    names = []
    for node in post_order(callee):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name not in names:
            names.append(node.op.name)
    return "+".join(names) or "call"
