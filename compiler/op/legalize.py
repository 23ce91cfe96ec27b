"""TVM's ``relay.op.register_legalize``: per-operator functions that rewrite a call into
other operators, which ``relay.transform.Legalize`` applies.

Compiler layer (``compiler.op``). A legalization replaces a call that a backend would run
badly, or not at all, by an equivalent program of other calls: TVM's x86 rules pad a
convolution's channels to a multiple its int8 instructions take, a user's may split a
convolution too big for an accelerator. The function receives the call's attributes, its
arguments and the types of the arguments followed by the result's, and returns the
replacement expression, or None to keep the call. relayvm's kernels need no rule of their
own, so the registry starts empty and holds what programs register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiler.op.registry import get_def

__all__ = ["LegalizeFunction", "any_legalize", "get_legalize", "register_legalize"]

#: ``fn(attrs, inputs, types) -> Expr | None``: see the module docstring.
LegalizeFunction = Callable[[Any, list[Any], list[Any]], Any]

#: TVM's default priority level of a registration.
DEFAULT_LEVEL = 10

_REGISTERED: dict[str, tuple[int, LegalizeFunction]] = {}


def register_legalize(
    op_name: str, legal_op: LegalizeFunction | None = None, level: int = DEFAULT_LEVEL
) -> Any:
    """Register ``legal_op`` as the legalization of ``op_name`` (TVM's signature); used as
    ``@register_legalize("nn.conv2d")`` when ``legal_op`` is None.

    Parameters
    ----------
    op_name : str
        A registered operator.
    legal_op : callable, optional
        ``legal_op(attrs, inputs, types)``: the call's attributes, its argument expressions
        and the types of the arguments then of the result; returns the expression that
        replaces the call (of the call's type) or None to keep it.
    level : int
        A registration of a higher level replaces one of a lower level; one of a lower
        level than the present one is ignored, as in TVM.

    Returns
    -------
    callable
        ``legal_op``, or the decorator that registers the function it is given.

    Raises
    ------
    ValueError
        If ``op_name`` is not an operator, or it has a legalization of the same level.
    TypeError
        If ``legal_op`` is not callable or ``level`` not an int.
    """
    get_def(op_name)  # names the unknown operator
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"register_legalize({op_name!r}): level must be an int, got {level!r}")

    def register(function: LegalizeFunction) -> LegalizeFunction:
        if not callable(function):
            raise TypeError(
                f"register_legalize({op_name!r}): the legalization must be callable, got "
                f"{type(function).__name__}"
            )
        present = _REGISTERED.get(op_name)
        if present is not None and present[0] == level:
            raise ValueError(
                f"{op_name} already has a legalization of level {level}; register at a "
                "higher level to replace it"
            )
        if present is None or present[0] < level:
            _REGISTERED[op_name] = (level, function)
        return function

    return register if legal_op is None else register(legal_op)


def any_legalize() -> bool:
    """Whether any operator has a legalization (the VM compiler skips the pass if not)."""
    return bool(_REGISTERED)


def get_legalize(op_name: str) -> LegalizeFunction | None:
    """The legalization registered for ``op_name``, or None."""
    entry = _REGISTERED.get(op_name)
    return None if entry is None else entry[1]
