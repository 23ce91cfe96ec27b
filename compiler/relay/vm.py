"""``relay.vm``: compile a Relay module to a VM executable, like TVM's ``tvm.relay.vm``.

Compiler layer (``compiler.relay``).

``relay.vm.compile(mod, target="cpu", params=None)`` runs the lowering pipeline and
the code generator:

1. bind ``params`` to ``@main``'s parameters of those names, as constants;
2. eta-expand constructors used as values (:func:`compiler.passes.eta_expand`);
3. infer types;
4. turn every operator call into a call of a primitive function (one kernel each);
5. convert to A-normal form, infer types;
6. lambda-lift local functions into globals with closure conversion (types preserved);
7. generate bytecode (:func:`compiler.backend.codegen.compile_module`).

:func:`optimize` returns the module after step 6, for inspection and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiler.ir.expr import Function
from compiler.ir.module import IRModule

#: Target names accepted by :func:`compile`; ``"llvm"`` is TVM's name for the CPU.
TARGETS = ("cpu", "llvm")


def _check_target(target: object) -> None:
    if target is None or target in TARGETS:
        return
    accepted = ", ".join(repr(t) for t in TARGETS)
    raise ValueError(f"unknown target {target!r}; relay.vm.compile accepts {accepted}")


def _as_module(mod: object) -> IRModule:
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, Function):
        return IRModule.from_expr(mod)
    raise TypeError(f"relay.vm.compile expects an IRModule, got {type(mod).__name__}")


def _bind_params(mod: IRModule, params: Mapping[str, Any] | None) -> IRModule:
    if not params:
        return mod
    from compiler.ir.bind import bind_params_by_name

    if "main" not in mod:
        raise ValueError("params were given but the module has no @main to bind them to")
    bound = mod.copy()
    bound["main"] = bind_params_by_name(mod["main"], dict(params))
    return bound


def optimize(
    mod: IRModule | Function,
    target: str | None = "cpu",
    params: Mapping[str, Any] | None = None,
) -> tuple[IRModule, dict[str, Any]]:
    """Lower ``mod`` to the form the code generator takes (TVM's ``VMCompiler.optimize``).

    Parameters
    ----------
    mod : IRModule or Function
        The program (a function becomes the ``main`` of a new module); not modified.
    target : str
        ``"cpu"`` (or its alias ``"llvm"``).
    params : dict of str to array, optional
        Values for ``@main``'s parameters of those names, bound as constants.

    Returns
    -------
    (IRModule, dict)
        The lowered, type-checked module and the parameters that were bound.
    """
    from compiler.passes import eta_expand, lambda_lift, to_anf, wrap_primitives
    from compiler.typing import infer_types

    _check_target(target)
    lowered = _bind_params(_as_module(mod), params)
    lowered = infer_types(eta_expand(lowered))
    lowered = infer_types(to_anf(wrap_primitives(lowered)))
    # Lambda lifting keeps every type it was given, so no further inference is needed.
    lowered = lambda_lift(lowered)
    return lowered, dict(params or {})


def compile(
    mod: IRModule | Function,
    target: str | None = "cpu",
    params: Mapping[str, Any] | None = None,
) -> Any:
    """Compile a Relay module to a VM executable.

    Parameters
    ----------
    mod : IRModule or Function
        The program; every global function is compiled, used or not.
    target : str
        ``"cpu"``; ``"llvm"`` is accepted as an alias. Anything else raises ``ValueError``.
    params : dict of str to array, optional
        Values bound to ``@main``'s parameters of the same names as constants before
        optimizing; those parameters disappear from ``main``'s signature.

    Returns
    -------
    vm.Executable
        Run it with ``vm.VirtualMachine(exe).invoke("main", *args)``; the same module always
        gives the same executable (and the same saved bytes).

    Raises
    ------
    ValueError
        For an unknown target.
    TypeError
        If the program is ill-typed (the message names the expression and the types).
    compiler.backend.codegen.CodegenError
        If the program uses something the VM cannot run yet.
    """
    from compiler.backend.codegen import compile_module

    lowered, _ = optimize(mod, target, params)
    return compile_module(lowered)


class VMCompiler:
    """TVM's two-step compiler object: ``set_params``, ``lower``, ``get_exec``.

    Each instance compiles one module.
    """

    def __init__(self) -> None:
        self._params: dict[str, Any] = {}
        self._exec: Any = None

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Values to bind to ``@main``'s parameters of those names."""
        self._params = dict(params)

    def get_params(self) -> dict[str, Any]:
        """The parameters set with :meth:`set_params`."""
        return dict(self._params)

    def optimize(
        self,
        mod: IRModule | Function,
        target: str | None = "cpu",
        params: Mapping[str, Any] | None = None,
    ) -> tuple[IRModule, dict[str, Any]]:
        """See :func:`optimize`; ``params`` defaults to those set with :meth:`set_params`."""
        return optimize(mod, target, self._params if params is None else params)

    def lower(self, mod: IRModule | Function, target: str | None = "cpu") -> None:
        """Compile ``mod``; fetch the result with :meth:`get_exec`."""
        if self._exec is not None:
            raise RuntimeError("a VMCompiler compiles one module; make a new one for another")
        self._exec = compile(mod, target, self._params)

    def codegen(self) -> None:
        """Kept for TVM compatibility: :meth:`lower` already generated the code."""
        if self._exec is None:
            raise RuntimeError("call lower(mod) before codegen()")

    def get_exec(self) -> Any:
        """The executable made by :meth:`lower`."""
        if self._exec is None:
            raise RuntimeError("call lower(mod) before get_exec()")
        return self._exec
