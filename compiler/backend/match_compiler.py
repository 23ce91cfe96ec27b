"""Pattern tests of ``match`` clauses as bytecode: one decision tree per clause, tried in order.

Compiler layer (``compiler.backend``).

A constructor pattern reads the tag (``GetTag``), loads the constructor's tag
(``LoadConsti``) and jumps to the clause's failure label unless they are equal (``If``),
then checks its sub-patterns on the fields (``GetField``). A tuple pattern only projects
its fields; a variable pattern binds the register it is given; a wildcard binds nothing.
Fields that only meet wildcards are never fetched. The caller (the code generator)
places the failure label before the next clause and ends the chain with ``Fatal``
(no clause matched) unless the last clause cannot fail.
"""

from __future__ import annotations

from compiler.ir.expr import (
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Var,
)
from vm.builder import FunctionBuilder, Label
from vm.isa import Opcode


def is_irrefutable(pattern: Pattern) -> bool:
    """Whether ``pattern`` matches every value of its type (no constructor test inside)."""
    stack = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternConstructor):
            return False
        if isinstance(p, PatternTuple):
            stack.extend(p.patterns)
    return True


def emit_pattern(
    fb: FunctionBuilder,
    pattern: Pattern,
    value: int,
    fail: Label,
    env: dict[Var, int],
) -> None:
    """Emit the tests of ``pattern`` against register ``value`` and bind its variables.

    Control reaches the instruction after the emitted code if the value matches, and
    ``fail`` otherwise; ``env`` receives the register of every variable the pattern binds.
    """
    stack: list[tuple[Pattern, int]] = [(pattern, value)]
    while stack:
        p, reg = stack.pop()
        if isinstance(p, PatternWildcard):
            continue
        if isinstance(p, PatternVar):
            env[p.var] = reg
            continue
        if isinstance(p, PatternConstructor):
            tag = fb.reg()
            fb.emit(Opcode.GetTag, reg, tag)
            expected = fb.reg()
            fb.emit(Opcode.LoadConsti, p.constructor.tag, expected)
            fb.emit(Opcode.If, tag, expected, 1, fail)
            subs = p.patterns
        elif isinstance(p, PatternTuple):
            subs = p.patterns
        else:
            raise TypeError(f"unknown pattern kind {type(p).__name__}")
        fields: list[tuple[Pattern, int]] = []
        for index, sub in enumerate(subs):
            if isinstance(sub, PatternWildcard):
                continue
            field = fb.reg()
            fb.emit(Opcode.GetField, reg, index, field)
            fields.append((sub, field))
        # Reversed so sub-patterns are tested left to right.
        stack.extend(reversed(fields))
