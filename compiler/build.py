"""``relay.build``: compile a program without control flow for the graph executor.

Compiler layer. Like TVM's ``tvm.relay.build``: the result is a graph executor factory,
instantiated with ``factory["default"](vm.cpu())`` and driven by
``vm.graph_executor.GraphModule``. The program is compiled exactly as
``relay.vm.compile`` compiles it (same passes, same kernels); the graph is then read off
``@main``'s straight-line bytecode (:mod:`compiler.backend.graph_codegen`), so both
executors run the same kernels on the same program.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.ir.expr import Function
from compiler.ir.module import IRModule


def build(
    mod: IRModule | Function,
    target: str | None = "cpu",
    params: Mapping[str, Any] | None = None,
    mod_name: str = "default",
) -> Any:
    """Compile ``mod`` into a graph executor factory.

    Parameters
    ----------
    mod : IRModule or Function
        The program; ``@main`` and what it calls must have no control flow, no ADTs, no
        closures and no recursion, and ``@main``'s parameters static tensor shapes.
    target : str
        ``"cpu"`` (or TVM's alias ``"llvm"``).
    params : mapping of str to array-like, optional
        Values bound to ``@main``'s parameters of those names before optimizing.
    mod_name : str
        The name the factory answers to: ``factory[mod_name]``.

    Returns
    -------
    vm.graph_executor.GraphExecutorFactoryModule

    Raises
    ------
    ValueError
        If the program uses control flow or dynamic shapes (naming the construct), or
        the target is unknown.

    Examples
    --------
    >>> factory = relay.build(mod, params={"w": w})              # doctest: +SKIP
    >>> module = vm.graph_executor.GraphModule(factory["default"](vm.cpu()))  # doctest: +SKIP
    >>> module.run(x=x); y = module.get_output(0)               # doctest: +SKIP
    """
    from compiler.backend.graph_codegen import graph_from_executable
    from compiler.executor import check_graph_program
    from compiler.relay import vm as relay_vm
    from vm.graph_executor import GraphExecutorFactoryModule

    if isinstance(mod, Function):
        mod = IRModule.from_expr(mod)
    if not isinstance(mod, IRModule):
        raise TypeError(f"relay.build expects an IRModule or a Function, got {type(mod).__name__}")
    if not isinstance(mod_name, str) or not mod_name:
        raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
    check_graph_program(mod)
    exe = relay_vm.compile(mod, target=target, params=params)
    graph_json, graph_params = graph_from_executable(exe)
    return GraphExecutorFactoryModule(
        graph_json,
        exe,
        graph_params,
        mod_name=mod_name,
        target="cpu" if target is None else str(target),
        ir_mod=mod,
    )
