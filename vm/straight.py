"""The virtual machine's straight-line tier: a function without control flow, called again,
runs as one generated function instead of instruction by instruction.

Runtime layer (``vm``); imports :mod:`vm.aot` (whose tracer and code generator it shares),
never ``compiler``.

Most models' ``main`` is straight-line code of static shapes: nothing in it is decided at
run time, yet the interpreter decodes and dispatches every instruction on every call, and
allocates every storage. For such a function :func:`build` makes what the ahead-of-time
executor makes (:mod:`vm.aot`: the symbolic run, one generated function calling the
kernels' entry points in order on views of one arena) in the machine's form: ``invoke``
takes the arguments as given, checks them by the machine's rules and records them as the
machine's inputs (TVM's rule for ``invoke`` with arguments); ``call`` takes arguments
already checked (keyword calls, ``invoke()`` on the inputs set, ``invoke_stateful``,
``time_evaluator``, saved functions). Results are allocated on every call, as the
interpreter's are, so they belong to the caller; the arena stays while the machine lives
(the compiler's planned intermediate bytes, 7.2 MB for ResNet-50).

The machine keeps the interpreter as the reference and the fallback:

- it builds a function's tier when the function is called in the thread that owns the
  machine's state, which the machine's first call claims: from the second call on (a
  machine called once is not worth generating code for). The arena is that thread's, so
  other threads calling ``invoke`` keep the interpreter;
- with an instrument set it runs every call in the interpreter, so hooks see every call;
- when the generated function raises (an argument of the wrong type, a kernel failing),
  the machine runs the call again in the interpreter, whose error names the argument or
  the instruction. Kernels write only memory the call allocated, so running again is
  safe and gives the same answer; only a kernel interrupted by Ctrl-C is not run again
  (its ``KeyboardInterrupt`` is raised);
- what the tracer refuses (control flow, closures, ADTs, dynamic shapes, recursion) stays
  in the interpreter, at no cost after the one refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vm.aot import AotUnsupportedError, bound_objects, compile_function

__all__ = ["build"]


def build(
    exe: Any, index: int, kernels: Sequence[Any], inputs: dict[int, list[Any]]
) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """``(invoke, call)`` for function ``index`` of ``exe``, or None if it is not
    straight-line code of static shapes.

    Parameters
    ----------
    exe : vm.Executable
        A verified executable.
    index : int
        The function's index in ``exe.functions``.
    kernels : sequence
        The machine's loaded kernels, by primitive index.
    inputs : dict
        The machine's inputs by function index; ``invoke`` records its arguments there.
    """
    name = exe.functions[index].name
    if exe.get_function(name) is not exe.functions[index]:
        return None  # a name two functions share: the tracer finds functions by name
    try:
        shared = compile_function(exe, name, kernels, machine_index=index)
    except AotUnsupportedError:
        return None
    return shared.make([*bound_objects(shared), inputs])
