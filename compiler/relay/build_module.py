"""``relay.build_module``: TVM's module of the build entry points, by their TVM names.

Compiler layer (``compiler.relay``). Re-exports only: :func:`build`
(:mod:`compiler.build`), :func:`create_executor` (:mod:`compiler.executor`) and
:func:`bind_params_by_name` (:mod:`compiler.ir.bind`), so TVM code that writes
``relay.build_module.bind_params_by_name(mod["main"], params)`` runs unchanged.
"""

from __future__ import annotations

from compiler.build import build
from compiler.executor import create_executor
from compiler.ir.bind import bind_params_by_name

__all__ = ["bind_params_by_name", "build", "create_executor"]
