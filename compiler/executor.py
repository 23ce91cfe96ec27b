"""``relay.create_executor``: run a module's ``main`` on the reference interpreter, the VM or
the graph executor.

Compiler layer. Kinds:

- ``"debug"``: type-checks the module, then evaluates it with
  :class:`compiler.interpreter.Interpreter` (the oracle the other backends are tested against);
- ``"vm"``: compiles with ``compiler.relay.vm.compile`` and runs on
  ``vm.interpreter.VirtualMachine``;
- ``"graph"``: for programs without control flow; programs using ``if``, ``match``, ADTs,
  closures or recursion are rejected with an error naming the construct, the others are
  built with ``relay.build`` and run on ``vm.graph_executor``;
- ``"aot"``: compiles with ``compiler.relay.vm.compile`` and runs ``main`` as one generated
  function (:class:`vm.aot.AotModule`); programs with control flow, closures, ADTs or
  dynamic shapes are rejected with an error naming the construct and suggesting ``"vm"``.

Every kind converts and checks the arguments of ``main`` the same way (the rules are in
:func:`convert_arguments`), so errors read alike whichever backend runs the program.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from compiler.build import build, check_graph_program
from compiler.interpreter import ConstructorValue, Interpreter, InterpreterClosure
from compiler.ir.bind import bind_params_by_name
from compiler.ir.expr import (
    Constant,
    Expr,
    Function,
    GlobalVar,
    Var,
    const,
)
from compiler.ir.module import IRModule
from compiler.ir.types import (
    FuncType,
    GlobalTypeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
)
from compiler.ir.visitor import free_vars, substitute
from compiler.relay import vm as relay_vm
from compiler.relay.target import as_target
from compiler.typing import infer_types
from compiler.typing.display import value_type_text
from vm.aot import AotModule
from vm.args import scalar_to_array
from vm.graph_executor import GraphModule
from vm.interpreter import VirtualMachine, export
from vm.objects import ADT
from vm.objects import Closure as VMClosure

__all__ = [
    "AOTExecutor",
    "DebugExecutor",
    "Executor",
    "GraphExecutor",
    "VMExecutor",
    "convert_arguments",
    "create_executor",
]


# --- type names and value descriptions for messages -------------------------------------------


def _received(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"a numpy {value.dtype} scalar"
    if isinstance(value, (bool, int, float)):
        return f"Python {type(value).__name__} {value!r}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    if isinstance(value, ADT):
        return f"an ADT value built by {value.constructor or f'tag {value.tag}'}"
    if isinstance(value, (InterpreterClosure, ConstructorValue, VMClosure)):
        return "a function value"
    return f"a {type(value).__name__}"


# --- argument conversion ------------------------------------------------------------------------


def _tensor(value: object, ty: TensorType, where: str) -> np.ndarray:
    expected = value_type_text(ty)
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (bool, int, float, np.generic)):
        if ty.shape:
            raise ValueError(f"{where} expects {expected} but received {_received(value)}")
        # The VM's own rule, so that every executor accepts and rejects the same scalars.
        return scalar_to_array(value, np.dtype(ty.dtype), where)
    else:
        raise TypeError(f"{where} expects {expected} but received {_received(value)}")
    if array.dtype.name != ty.dtype or array.dtype.kind == "V":
        raise TypeError(f"{where} expects {expected} but received {_received(value)}")
    if array.ndim != len(ty.shape) or any(
        isinstance(d, int) and d != n for d, n in zip(ty.shape, array.shape)
    ):
        raise ValueError(f"{where} expects {expected} but received {_received(value)}")
    return _contiguous(array)


def _contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` in native byte order and C order (``np.ascontiguousarray`` would make a 0-d
    array 1-d)."""
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    return array


def _untyped(value: object, where: str) -> object:
    """A value for a parameter of unknown or polymorphic type: Python scalars are typed as
    the VM types them (``bool``; ``int`` as int32, or int64 when it does not fit; ``float``
    as float32)."""
    if isinstance(value, bool):
        return np.array(value, dtype="bool")
    if isinstance(value, int):
        for dtype in ("int32", "int64"):
            info = np.iinfo(dtype)
            if info.min <= value <= info.max:
                return np.array(value, dtype=dtype)
        raise ValueError(f"{where}: the Python int {value} does not fit in int64")
    if isinstance(value, float):
        return np.array(value, dtype="float32")
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, np.ndarray):
        return _contiguous(value)
    return value


def convert_arguments(
    func_name: str,
    params: Sequence[str],
    param_types: Sequence[Type | None],
    args: Sequence[object],
    kwargs: Mapping[str, object],
    function_types: tuple[type, ...],
    adt_tags: Mapping[str, frozenset[int]] | None = None,
) -> list[object]:
    """Map positional and keyword arguments onto ``params`` and convert each to its type.

    Positional arguments fill the first parameters in order; keyword arguments name the
    others. Tensors: numpy arrays must have the parameter's dtype and a matching shape
    (``?`` matches any size); numpy scalars and Python ``bool``/``int``/``float`` are
    converted to a scalar parameter's dtype when the value is representable there, by the
    VM's rule (``vm.args.scalar_to_array``: in range, integral for integer dtypes, 0 or 1
    for bool, finite for floats). Tuples: a Python tuple or list of the right
    length, converted field by field. ADTs: ``vm.ADT`` values of the parameter's type.
    Functions: values of ``function_types``.

    Raises
    ------
    TypeError
        Wrong number of arguments, unknown or duplicate keywords, or a value of the wrong kind
        or dtype; the message names the function, the parameter, and what was expected and
        received.
    ValueError
        A value of the right kind but the wrong shape or length, or a scalar the dtype cannot
        represent.
    """
    n = len(params)
    if len(args) > n:
        raise TypeError(
            f"{func_name} takes {n} argument(s) {_param_list(params)} but received "
            f"{len(args)} positional argument(s)"
        )
    slots: list[object] = list(args) + [_UNSET] * (n - len(args))
    for key, value in kwargs.items():
        positions = [i for i, p in enumerate(params) if p == key]
        if not positions:
            raise TypeError(
                f"{func_name} has no parameter named {key!r}; its parameters are "
                f"{_param_list(params)}"
            )
        if len(positions) > 1:
            raise TypeError(
                f"{func_name} has {len(positions)} parameters named {key!r}; pass them by "
                "position instead"
            )
        index = positions[0]
        if slots[index] is not _UNSET:
            raise TypeError(
                f"{func_name} received parameter %{key} twice (by position and by keyword)"
            )
        slots[index] = value
    missing = [params[i] for i, v in enumerate(slots) if v is _UNSET]
    if missing:
        raise TypeError(
            f"{func_name} is missing argument(s) for {', '.join('%' + m for m in missing)}; "
            f"it takes {_param_list(params)}"
        )
    return [
        _convert(value, ty, f"{func_name}: parameter %{name}", function_types, adt_tags or {})
        for value, ty, name in zip(slots, param_types, params)
    ]


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


def _param_list(params: Sequence[str]) -> str:
    return "(" + ", ".join("%" + p for p in params) + ")" if params else "no arguments"


def _convert(
    value: object,
    ty: Type | None,
    where: str,
    function_types: tuple[type, ...],
    adt_tags: Mapping[str, frozenset[int]],
) -> object:
    """Convert one argument; iterative over nested tuple types."""
    root: list[object] = [None]
    built: list[tuple[list[object], list[object], int]] = []
    work: list[tuple[object, Type | None, str, list[object], int]] = [(value, ty, where, root, 0)]
    while work:
        v, t, here, parent, index = work.pop()
        if isinstance(t, TensorType):
            parent[index] = _tensor(v, t, here)
        elif isinstance(t, TupleType):
            if not isinstance(v, (tuple, list)) or isinstance(v, ADT):
                raise TypeError(f"{here} expects {value_type_text(t)} but received {_received(v)}")
            if len(v) != len(t.fields):
                raise ValueError(
                    f"{here} expects {value_type_text(t)} (a tuple of {len(t.fields)} field(s)) "
                    f"but received {_received(v)}"
                )
            fields: list[object] = [None] * len(v)
            built.append((fields, parent, index))
            for i, (fv, ft) in enumerate(zip(v, t.fields)):
                work.append((fv, ft, f"{here} field {i}", fields, i))
        elif isinstance(t, (TypeCall, GlobalTypeVar)):
            name = t.func.name_hint if isinstance(t, TypeCall) else t.name_hint
            if not isinstance(v, ADT):
                raise TypeError(f"{here} expects {value_type_text(t)} but received {_received(v)}")
            tags = adt_tags.get(name)
            if tags is not None and v.tag not in tags:
                raise TypeError(
                    f"{here} expects {value_type_text(t)} but received {_received(v)}, "
                    f"which is not a constructor of {name}"
                )
            parent[index] = v
        elif isinstance(t, FuncType):
            if not isinstance(v, function_types):
                raise TypeError(f"{here} expects {value_type_text(t)} but received {_received(v)}")
            parent[index] = v
        elif isinstance(v, (tuple, list)) and not isinstance(v, ADT):
            fields = [None] * len(v)
            built.append((fields, parent, index))
            for i, fv in enumerate(v):
                work.append((fv, None, f"{here} field {i}", fields, i))
        else:
            parent[index] = _untyped(v, here)
    # Children were created after their parents: finish tuples innermost first.
    for fields, parent, index in reversed(built):
        parent[index] = tuple(fields)
    return root[0]


def _own_result(value: object) -> object:
    """A copy of ``value`` whose arrays belong to the caller (iterative over tuples and ADTs)."""
    root: list[object] = [None]
    built: list[tuple[list[object], list[object], int, object]] = []
    work: list[tuple[object, list[object], int]] = [(value, root, 0)]
    while work:
        v, parent, index = work.pop()
        if isinstance(v, np.ndarray):
            parent[index] = np.array(v, copy=True)
        elif isinstance(v, (tuple, ADT)):
            items = list(v)
            built.append((items, parent, index, v))
            work.extend((item, items, i) for i, item in enumerate(items))
        else:
            parent[index] = v
    for items, parent, index, original in reversed(built):
        if isinstance(original, ADT):
            parent[index] = ADT(original.tag, items, original.constructor)
        else:
            parent[index] = tuple(items)
    return root[0]


# --- module helpers -----------------------------------------------------------------------------


def _infer(mod: IRModule) -> IRModule:
    return infer_types(mod)


def _param_types(func: Function) -> list[Type | None]:
    """Parameter types of an inferred function (annotations as a fallback)."""
    try:
        ty = func.checked_type
    except ValueError:
        ty = None
    if isinstance(ty, FuncType) and len(ty.arg_types) == len(func.params):
        return list(ty.arg_types)
    types: list[Type | None] = []
    for p in func.params:
        try:
            types.append(p.checked_type)
        except ValueError:
            types.append(p.type_annotation)
    return types


def _adt_tags(mod: IRModule) -> dict[str, frozenset[int]]:
    return {
        gtv.name_hint: frozenset(c.tag for c in data.constructors)  # type: ignore[attr-defined]
        for gtv, data in mod.type_definitions.items()
    }


def _bind_expr(expr: Expr, binds: Mapping[Var | str, object]) -> Expr:
    """Replace free variables of ``expr`` by the given values (constants or expressions)."""
    free = free_vars(expr)
    by_name: dict[str, list[Var]] = {}
    for v in free:
        by_name.setdefault(v.name_hint, []).append(v)
    mapping: dict[Var, Expr] = {}
    for key, value in binds.items():
        if isinstance(key, Var):
            if key not in free:
                raise ValueError(
                    f"binds gives a value for %{key.name_hint}, which is not a free variable "
                    "of the expression"
                )
            targets = [key]
        elif isinstance(key, str):
            targets = by_name.get(key, [])
            if not targets:
                names = ", ".join("%" + v.name_hint for v in free) or "none"
                raise ValueError(
                    f"binds gives a value for %{key}, which is not a free variable of the "
                    f"expression (its free variables: {names})"
                )
        else:
            raise TypeError(f"binds keys must be relay.Var or str, got {type(key).__name__}")
        bound = value if isinstance(value, Expr) else _constant(value, key)
        for target in targets:
            mapping[target] = bound
    return substitute(expr, mapping)


def _constant(value: object, key: object) -> Constant:
    name = key.name_hint if isinstance(key, Var) else key
    try:
        return const(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"binds value for %{name} is not a tensor: {exc}") from None


# --- executors -----------------------------------------------------------------------------------


class Executor(abc.ABC):
    """Base of the executors returned by :func:`create_executor`.

    Attributes
    ----------
    mod : IRModule
        The module (``main`` already has ``params`` bound when they were given).
    device : object
        The device the VM runs on (``None`` means the CPU).
    target : str, dict or Target
        The compilation target (any spelling of this CPU, see :mod:`compiler.relay.target`).
    """

    kind = ""

    def __init__(self, mod: IRModule, device: object = None, target: Any = "cpu") -> None:
        self.mod = mod
        self.device = device
        self.target = target

    def evaluate(
        self, expr: Expr | None = None, binds: Mapping[Var | str, object] | None = None
    ) -> Any:
        """Evaluate ``expr`` or return a Python callable for a function.

        Parameters
        ----------
        expr : Expr, optional
            ``None``: a callable for the module's ``main``. A :class:`Function` or
            :class:`GlobalVar`: it becomes ``main`` (of a copy of the module) and a callable
            is returned. Any other expression is evaluated now and its value returned.
        binds : dict of Var (or parameter name) to value, optional
            Values for free variables of ``expr`` (numpy arrays, scalars or expressions).

        Returns
        -------
        callable or value
            The callable takes ``main``'s arguments positionally or by parameter name and
            returns numpy arrays, tuples, ``vm.ADT`` values or function values.
        """
        if binds:
            if expr is None:
                raise ValueError("binds needs an expression to bind into; pass expr as well")
            expr = _bind_expr(expr, binds)
        if expr is None:
            if "main" not in self.mod:
                raise ValueError(
                    "the module has no @main function; pass an expression or function to "
                    "evaluate, or define @main"
                )
            return self._make_executor(self.mod)
        if isinstance(expr, GlobalVar):
            mod = self.mod.copy()
            try:
                mod["main"] = self.mod[expr]
            except KeyError:
                raise ValueError(
                    f"the module has no global function @{expr.name_hint} to evaluate"
                ) from None
            return self._make_executor(mod, expr.name_hint)
        if not isinstance(expr, Expr):
            raise TypeError(f"evaluate expects a Relay expression, got {type(expr).__name__}")
        free = free_vars(expr)
        if free:
            names = ", ".join("%" + v.name_hint for v in free)
            raise ValueError(
                f"cannot evaluate an expression with free variables ({names}); give them "
                "values with binds or make them parameters of a function"
            )
        mod = self.mod.copy()
        if isinstance(expr, Function):
            mod["main"] = expr
            return self._make_executor(mod)
        mod["main"] = Function([], expr)
        return self._make_executor(mod)()

    @abc.abstractmethod
    def _make_executor(self, mod: IRModule, name: str = "main") -> Callable[..., Any]:
        """A callable running ``mod``'s ``main``; ``name`` is what its messages call it."""


class _MainCallable:
    """The Python callable for ``main``: converts arguments, runs, and returns the result."""

    def __init__(
        self,
        params: Sequence[str],
        types: Sequence[Type | None],
        run: Callable[[list[object]], Any],
        function_types: tuple[type, ...],
        adt_tags: Mapping[str, frozenset[int]],
        name: str = "main",
    ) -> None:
        self.params = list(params)
        self.param_types = list(types)
        self._run = run
        self._function_types = function_types
        self._adt_tags = adt_tags
        self.__name__ = name
        #: The compiled executable and its machine (VM kinds only), for inspection.
        self.executable: Any = None
        self.machine: Any = None

    def __call__(self, *args: object, **kwargs: object) -> Any:
        values = convert_arguments(
            self.__name__,
            self.params,
            self.param_types,
            args,
            kwargs,
            self._function_types,
            self._adt_tags,
        )
        # Tensors come back as vm.NDArray (numpy arrays with TVM's .numpy()/.asnumpy()),
        # whichever executor produced them.
        return export(self._run(values))

    def __repr__(self) -> str:
        sig = ", ".join(
            f"%{p}: {value_type_text(t)}" for p, t in zip(self.params, self.param_types)
        )
        return f"<relay function {self.__name__}({sig})>"


class DebugExecutor(Executor):
    """Runs programs on the reference interpreter after type-checking the module."""

    kind = "debug"

    def _make_executor(self, mod: IRModule, name: str = "main") -> Callable[..., Any]:
        typed = _infer(mod)
        main = typed["main"]
        types = _param_types(main)
        interpreter = Interpreter(typed)

        def run(values: list[object]) -> Any:
            return _own_result(interpreter.call("main", *values))

        return _MainCallable(
            [p.name_hint for p in main.params],
            types,
            run,
            (InterpreterClosure, ConstructorValue),
            _adt_tags(typed),
            name,
        )


class VMExecutor(Executor):
    """Compiles the module to bytecode and runs it on the virtual machine."""

    kind = "vm"

    def _make_executor(self, mod: IRModule, name: str = "main") -> Callable[..., Any]:
        typed = _infer(mod)
        main = typed["main"]
        types = _param_types(main)
        exe = relay_vm.compile(mod, target=self.target)
        machine = VirtualMachine(exe, self.device)

        def run(values: list[object]) -> Any:
            return machine.invoke("main", *values)

        call = _MainCallable(
            [p.name_hint for p in main.params], types, run, (VMClosure,), _adt_tags(typed), name
        )
        call.executable = exe
        call.machine = machine
        return call


class GraphExecutor(Executor):
    """For programs without control flow: rejects ``if``, ``match``, ADTs, closures and
    recursion with an error naming the construct, then builds the program with
    ``relay.build`` and runs it on the graph executor (:mod:`vm.graph_executor`)."""

    kind = "graph"

    def _make_executor(self, mod: IRModule, name: str = "main") -> Callable[..., Any]:
        check_graph_program(mod)
        typed = _infer(mod)
        main = typed["main"]
        types = _param_types(main)
        factory = build(mod, target=self.target)
        module = GraphModule(factory[factory.libmod_name](self.device))
        names = [p.name_hint for p in main.params]
        ret_type = main.ret_type

        def run(values: list[object]) -> Any:
            for param, value in zip(names, values):
                module.set_input(param, value)
            module.run()
            outputs = [module.get_output(i) for i in range(module.get_num_outputs())]
            return _unflatten(ret_type, outputs)

        call = _MainCallable(names, types, run, (), _adt_tags(typed), name)
        call.executable = factory.lib
        call.machine = module
        return call


class AOTExecutor(Executor):
    """Compiles the module to bytecode, then ``main`` ahead of time into one generated
    function that calls its kernels in order on a planned arena (:mod:`vm.aot`)."""

    kind = "aot"

    def _make_executor(self, mod: IRModule, name: str = "main") -> Callable[..., Any]:
        typed = _infer(mod)
        main = typed["main"]
        types = _param_types(main)
        exe = relay_vm.compile(mod, target=self.target)
        module = AotModule(exe, self.device)
        run = module.run

        def call(values: list[object]) -> Any:
            return run(*values)

        result = _MainCallable(
            [p.name_hint for p in main.params], types, call, (), _adt_tags(typed), name
        )
        result.executable = exe
        result.machine = module
        return result


def _unflatten(ty: Type | None, leaves: list[Any]) -> Any:
    """Rebuild a result of type ``ty`` (nested tuples of tensors) from the graph's flat
    outputs, which list the tensors in order."""
    position = iter(leaves)
    if not isinstance(ty, TupleType):
        return next(position)
    stack: list[tuple[TupleType, list[Any]]] = [(ty, [])]
    while True:
        tuple_type, fields = stack[-1]
        if len(fields) == len(tuple_type.fields):
            stack.pop()
            if not stack:
                return tuple(fields)
            stack[-1][1].append(tuple(fields))
            continue
        field = tuple_type.fields[len(fields)]
        if isinstance(field, TupleType):
            stack.append((field, []))
        else:
            fields.append(next(position))


_KINDS: dict[str, type[Executor]] = {
    "debug": DebugExecutor,
    "vm": VMExecutor,
    "graph": GraphExecutor,
    "aot": AOTExecutor,
}


def create_executor(
    kind: str = "debug",
    mod: IRModule | None = None,
    device: object = None,
    target: Any = "cpu",
    params: Mapping[str, object] | None = None,
) -> Executor:
    """An executor that evaluates Relay programs.

    Parameters
    ----------
    kind : {"debug", "vm", "graph", "aot"}
        ``debug`` runs the reference interpreter, ``vm`` the bytecode VM, ``graph`` the graph
        executor (``relay.build``) and ``aot`` the ahead-of-time executor
        (:class:`vm.aot.AotModule`), the last two for programs without control flow.
    mod : IRModule, optional
        The module whose functions the programs may call (an empty module if omitted). It is
        not modified.
    device : optional
        The device to run on (``vm.cpu()``; ``None`` means the CPU).
    target : str, dict or Target
        This CPU, however TVM names it (``"cpu"``, ``"llvm"`` with options, ``"c"``, a
        ``Target``); see :mod:`compiler.relay.target`.
    params : dict of str to array, optional
        Values bound to ``main``'s parameters of those names (they become constants and are
        removed from ``main``'s parameters).

    Returns
    -------
    Executor
        Call ``.evaluate()`` for a callable of ``main`` or ``.evaluate(expr)`` for a value.
    """

    if kind not in _KINDS:
        raise ValueError(
            f"unknown executor kind {kind!r}; expected one of {', '.join(map(repr, _KINDS))}"
        )
    as_target(target)
    if mod is None:
        mod = IRModule()
    elif not isinstance(mod, IRModule):
        raise TypeError(f"mod must be a relay.IRModule, got {type(mod).__name__}")
    if params:
        if "main" not in mod:
            raise ValueError("params were given but the module has no @main to bind them into")

        mod = mod.copy()
        mod["main"] = bind_params_by_name(mod["main"], dict(params))
    return _KINDS[kind](mod, device, target)
