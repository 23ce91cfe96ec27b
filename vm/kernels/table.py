"""The kernel operator table: every operator's :class:`~vm.kernels.rules.OpRule`, by name.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Each ``emit_*`` module defines the rules of a family of operators, and their run-time
shape rules, in its ``RULES`` set; this module gathers them, so the record
(:mod:`vm.kernels.rules`) and the rules that use it import in one direction only. The
compiler's operator registry reads the attribute schemas from this table
(``compiler/op/defs_common.py``), so each is written once.
"""

from __future__ import annotations

from vm.kernels import (
    emit_activation,
    emit_conv,
    emit_elementwise,
    emit_image,
    emit_index,
    emit_layout,
    emit_nn,
    emit_norm,
    emit_pool,
    emit_reduce,
    emit_spatial,
    emit_vision,
)
from vm.kernels.rules import OpRule, ShapeRule, ValueRule

_MODULES = (
    emit_activation,
    emit_conv,
    emit_elementwise,
    emit_image,
    emit_index,
    emit_layout,
    emit_nn,
    emit_norm,
    emit_pool,
    emit_reduce,
    emit_spatial,
    emit_vision,
)


def _gather() -> dict[str, OpRule]:
    table: dict[str, OpRule] = {}
    for module in _MODULES:
        for rule in module.RULES.rules:
            if rule.name in table:
                raise ValueError(f"kernel rule {rule.name} is registered twice")
            table[rule.name] = rule
    return table


def _gather_shapes() -> dict[str, ShapeRule]:
    shapes: dict[str, ShapeRule] = {}
    for module in _MODULES:
        for name, fn in module.RULES.shapes.items():
            if name in shapes or name not in RULES:
                raise ValueError(f"shape rule {name} is registered twice or has no kernel rule")
            shapes[name] = fn
    return shapes


def _gather_value_shapes() -> dict[str, tuple[tuple[int, ...], ValueRule]]:
    shapes: dict[str, tuple[tuple[int, ...], ValueRule]] = {}
    for module in _MODULES:
        for name, entry in module.RULES.value_shapes.items():
            if name in shapes or name in SHAPE_RULES or name not in RULES:
                raise ValueError(f"shape rule {name} is registered twice or has no kernel rule")
            shapes[name] = entry
    return shapes


#: Operator name -> its rule.
RULES: dict[str, OpRule] = _gather()

#: Operator name -> its run-time shape rule (every operator whose output shapes follow from
#: its input shapes).
SHAPE_RULES: dict[str, ShapeRule] = _gather_shapes()

#: Operator name -> (the positions of the arguments read by value, its data-dependent
#: run-time shape rule): the ``dyn.*`` operators and ``arange``.
VALUE_SHAPES: dict[str, tuple[tuple[int, ...], ValueRule]] = _gather_value_shapes()


def get_rule(name: str) -> OpRule | None:
    """The rule for operator ``name``, or ``None``."""
    return RULES.get(name)


def supported_ops() -> list[str]:
    """Every operator a kernel description may use, sorted."""
    return sorted(RULES)
