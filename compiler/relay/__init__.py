"""The user-facing ``relay`` namespace, shaped like TVM's ``tvm.relay``.

Compiler layer. ``from compiler import relay`` and write ``relay.var``, ``relay.add``,
``relay.nn.dense``, ``relay.fromtext``, ``relay.vm.compile`` as with TVM. Names are
resolved on first use from the modules that define them, so importing ``relay`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any as _AnyT

_EXPORTS: dict[str, str] = {}


def _export(module: str, *names: str) -> None:
    for name in names:
        _EXPORTS[name] = module


_export(
    "compiler.ir.expr",
    "Var", "GlobalVar", "Constant", "Op", "Tuple", "TupleGetItem", "Call", "Let", "If",
    "Function", "Constructor", "Match", "Clause", "Pattern", "PatternWildcard", "PatternVar",
    "PatternConstructor", "PatternTuple", "Expr", "Span", "var", "const",
)  # fmt: skip
_export(
    "compiler.ir.types",
    "Type", "TensorType", "TupleType", "FuncType", "TypeVar", "GlobalTypeVar", "TypeCall",
    "TypeData", "IncompleteType", "Any", "scalar_type",
)  # fmt: skip
_export("compiler.ir.attrs", "Attrs")
_export("compiler.ir.module", "IRModule")
_export("compiler.ir.structural", "structural_equal", "structural_hash")
_export("compiler.ir.bind", "bind_params_by_name", "bind")
_export("compiler.ir.functor", "ExprFunctor", "ExprVisitor", "ExprMutator")
_export("compiler.ir.scope_builder", "ScopeBuilder")
_export("compiler.text.parser", "fromtext", "parse", "RelaySyntaxError")
_export("compiler.typing.infer", "RelayTypeError")
_export("compiler.prelude", "Prelude")
_export("compiler.executor", "create_executor")
_export("compiler.build", "build")
_export("compiler.relay.vm", "optimize")
_export("serialization", "save_param_dict", "load_param_dict")

#: TVM's other names for the same objects.
_ALIASES: dict[str, tuple[str, str]] = {"Module": ("compiler.ir.module", "IRModule")}

_SUBMODULES = {
    "nn": "compiler.op.nn",
    "vision": "compiler.op.vision",
    "image": "compiler.op.image",
    "analysis": "compiler.relay.analysis",
    "transform": "compiler.transform",
    "vm": "compiler.relay.vm",
    "op": "compiler.op",
    "frontend": "compiler.frontend",
    "build_module": "compiler.relay.build_module",
    "target": "compiler.relay.target",
    "backend": "compiler.relay.backend",
    "testing": "compiler.relay.testing",
}


def __getattr__(name: str) -> _AnyT:
    if name in _SUBMODULES:
        module = importlib.import_module(_SUBMODULES[name])
    elif name in _EXPORTS:
        module = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _ALIASES:
        where, real = _ALIASES[name]
        module = getattr(importlib.import_module(where), real)
    else:
        # Operator builder functions (relay.add, relay.sum, ...) live in compiler.op.api.
        api = importlib.import_module("compiler.op.api")
        try:
            module = getattr(api, name)
        except AttributeError:
            raise AttributeError(f"module 'relay' has no attribute {name!r}") from None
    globals()[name] = module
    return module


def __dir__() -> list[str]:
    api = importlib.import_module("compiler.op.api")
    names = set(_EXPORTS) | set(_ALIASES) | set(_SUBMODULES) | set(getattr(api, "__all__", ()))
    return sorted(names)
