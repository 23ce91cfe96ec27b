"""Operators: the registry (attributes, type relations, numpy references) and builder functions.

Compiler layer (``compiler.op``).
"""

from compiler.op import definitions  # registers every operator (the registry never imports it)
from compiler.op.legalize import register_legalize
from compiler.op.registry import OpDef, OpPattern, get_def, get_op, list_ops

#: TVM's ``relay.op.get(name)``.
get = get_op
