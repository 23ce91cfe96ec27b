"""``relay.build``: compile a program without control flow for the graph executor.

Compiler layer. Like TVM's ``tvm.relay.build``: the result is a graph executor factory,
instantiated with ``factory["default"](vm.cpu())`` and driven by
``vm.graph_executor.GraphModule``. The program is compiled exactly as
``relay.vm.compile`` compiles it (same passes, same kernels); the graph is then read off
``@main``'s straight-line bytecode (:mod:`compiler.backend.graph_codegen`), so both
executors run the same kernels on the same program. :func:`check_graph_program` says what
the graph executor cannot run (``relay.create_executor("graph")`` asks it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.backend.graph_codegen import graph_from_executable
from compiler.ir.expr import Call, Constructor, Function, GlobalVar, If, Let, Match, Var
from compiler.ir.module import IRModule
from compiler.ir.types import FuncType, GlobalTypeVar, TupleType, Type, TypeCall
from compiler.ir.visitor import post_order
from compiler.relay import vm as relay_vm
from compiler.relay.target import as_target
from compiler.typing.display import value_type_text
from vm.aot import AotExecutorFactoryModule
from vm.graph_executor import GraphExecutorFactoryModule

#: Executors ``relay.build`` makes, and the runtimes it accepts (both TVM runtimes mean
#: relayvm's Python runtime).
_EXECUTORS = ("graph", "aot")
_RUNTIMES = ("cpp", "crt")


def _option_name(value: Any, what: str, accepted: tuple[str, ...]) -> str:
    """The name of an ``executor`` or ``runtime`` argument: a str, or TVM's
    ``relay.backend.Executor``/``Runtime`` object (anything with a str ``name``)."""
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str such as {accepted[0]!r}, got {type(value).__name__}")
    return name


def build(
    ir_mod: IRModule | Function,
    target: Any = None,
    target_host: Any = None,
    executor: Any = None,
    runtime: Any = None,
    params: Mapping[str, Any] | None = None,
    mod_name: str = "default",
) -> Any:
    """Compile ``ir_mod`` into a graph executor factory (TVM's signature and order).

    Parameters
    ----------
    ir_mod : IRModule or Function
        The program; ``@main`` and what it calls must have no control flow, no ADTs, no
        closures and no recursion, and ``@main``'s parameters static tensor shapes.
    target, target_host : str, dict, Target or None
        This CPU, however TVM names it (``"llvm"`` with options, ``"c"``, ``"cpu"``, a
        ``Target``); None means ``"cpu"``. ``str`` of it is recorded as the factory's target.
    executor : str or None
        ``"graph"`` (the default) or ``"aot"``; TVM's ``relay.backend.Executor("aot", {...})``
        objects also work (their options are accepted and have no effect).
    runtime : str or None
        ``"cpp"`` or ``"crt"`` (TVM's ``Runtime`` objects also work): both mean relayvm's
        runtime.
    params : mapping of str to array-like, optional
        Values bound to ``@main``'s parameters of those names before optimizing.
    mod_name : str
        The name the factory answers to: ``factory[mod_name]``.

    Returns
    -------
    vm.graph_executor.GraphExecutorFactoryModule or vm.aot.AotExecutorFactoryModule
        The latter for ``executor="aot"``: ``vm.aot.AotModule(factory["default"](dev))``.

    Raises
    ------
    ValueError
        If the program uses control flow or dynamic shapes (naming the construct), the
        target is not this CPU, or the executor or runtime is one relayvm lacks.

    Examples
    --------
    >>> lib = relay.build(mod, "llvm", params={"w": w})          # doctest: +SKIP
    >>> module = vm.graph_executor.GraphModule(lib["default"](vm.cpu()))  # doctest: +SKIP
    >>> module.run(x=x); y = module.get_output(0)               # doctest: +SKIP
    """
    mod = ir_mod
    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"relay.build expects an IRModule or a Function, got {type(mod).__name__}")
    if not isinstance(mod_name, str) or not mod_name:
        raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
    kind = "graph"
    if executor is not None:
        kind = _option_name(executor, "executor", _EXECUTORS)
        if kind not in _EXECUTORS:
            raise ValueError(
                f"relay.build makes graph and AOT executor factories, not executor {kind!r}; "
                "use executor='graph' or 'aot', or relay.vm.compile for the virtual machine"
            )
    if runtime is not None:
        name = _option_name(runtime, "runtime", _RUNTIMES)
        if name not in _RUNTIMES:
            raise ValueError(
                f"unknown runtime {name!r}; relay.build accepts {', '.join(map(repr, _RUNTIMES))}"
                ", which both mean relayvm's runtime"
            )
    checked = as_target(target, target_host)
    if kind == "aot":
        # vm.aot checks the compiled main itself and names what it cannot run.
        exe = relay_vm.compile(mod, target=checked, params=params)
        return AotExecutorFactoryModule(exe, mod_name=mod_name, target=str(checked), ir_mod=mod)
    check_graph_program(mod)
    exe = relay_vm.compile(mod, target=checked, params=params)
    graph_json, graph_params = graph_from_executable(exe)
    return GraphExecutorFactoryModule(
        graph_json,
        exe,
        graph_params,
        mod_name=mod_name,
        target=str(checked),
        ir_mod=mod,
    )


# --- what the graph executor can run (relay.build and create_executor('graph') check it) ------


def check_graph_program(mod: IRModule) -> None:
    """Raise ``ValueError`` if the functions reachable from ``main`` use control flow.

    The graph executor runs a fixed dataflow graph: ``if``, ``match``, constructors, ADT
    types, local functions (closures) other than ``Primitive`` ones, function values and
    recursion (a cycle among globals) are rejected, each with a message naming it.
    """
    reachable: list[str] = []
    calls: dict[str, set[str]] = {}
    pending = ["main"]
    while pending:
        name = pending.pop()
        if name in calls:
            continue
        calls[name] = set()
        reachable.append(name)
        func = mod[name]
        where = f"@{name}"
        for ty in [*(p.type_annotation for p in func.params), func.ret_type]:
            _reject_type(ty, where)
        for node in post_order(func.body, descend=_not_primitive):
            construct = _graph_violation(node)
            if construct is not None:
                span = f" at {node.span!r}" if node.span is not None else ""
                raise ValueError(
                    f"the graph executor cannot run {where}: it uses {construct}{span}; "
                    "use create_executor('vm') for programs with control flow"
                )
            if isinstance(node, Call) and isinstance(node.op, GlobalVar):
                calls[name].add(node.op.name_hint)
                if node.op.name_hint not in calls:
                    pending.append(node.op.name_hint)
        # A GlobalVar anywhere other than in call position is a function value.
        callees = {id(n.op) for n in post_order(func.body) if isinstance(n, Call)}
        for node in post_order(func.body, descend=_not_primitive):
            if isinstance(node, GlobalVar) and id(node) not in callees:
                raise ValueError(
                    f"the graph executor cannot run {where}: it uses @{node.name_hint} as a "
                    "function value; use create_executor('vm')"
                )
    cycle = _find_cycle(calls)
    if cycle:
        raise ValueError(
            "the graph executor cannot run recursive functions: "
            + " -> ".join("@" + c for c in cycle)
            + "; use create_executor('vm')"
        )


def _not_primitive(node: object) -> bool:
    return not (isinstance(node, Function) and node.attrs.get("Primitive"))


def _graph_violation(node: object) -> str | None:
    if isinstance(node, If):
        return "an if expression"
    if isinstance(node, Match):
        return "a match expression"
    if isinstance(node, Constructor):
        return f"constructor {node.name_hint} (an algebraic data type)"
    if isinstance(node, Function) and _not_primitive(node):
        return "a local function (a closure)"
    if isinstance(node, Call) and isinstance(node.op, (Var, Call, Let)):
        return "a call of a function value"
    if isinstance(node, Var):
        _reject_type(node.type_annotation, f"variable %{node.name_hint}")
    return None


def _reject_type(ty: Type | None, where: str) -> None:
    stack = [ty]
    while stack:
        t = stack.pop()
        if isinstance(t, (TypeCall, GlobalTypeVar)):
            raise ValueError(
                f"the graph executor cannot run {where}: its type uses the algebraic data "
                f"type {value_type_text(t)}; use create_executor('vm')"
            )
        if isinstance(t, FuncType):
            raise ValueError(
                f"the graph executor cannot run {where}: its type is the function type "
                f"{value_type_text(t)}; use create_executor('vm')"
            )
        if isinstance(t, TupleType):
            stack.extend(t.fields)


def _find_cycle(calls: dict[str, set[str]]) -> list[str]:
    """A cycle in the call graph as a list of names (first name repeated at the end), or []."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    for start in calls:
        if start in state:
            continue
        path: list[str] = []
        stack: list[tuple[str, list[str]]] = [(start, sorted(calls.get(start, ())))]
        state[start] = 1
        path.append(start)
        while stack:
            node, todo = stack[-1]
            if not todo:
                stack.pop()
                path.pop()
                state[node] = 2
                continue
            nxt = todo.pop()
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(calls.get(nxt, ()))))
    return []
