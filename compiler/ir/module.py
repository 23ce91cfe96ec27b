"""IRModule: the unit of compilation, holding global functions and type definitions.

Compiler layer (``compiler.ir``).

Constructor tags are assigned when a type definition joins a module: tags are
unique across the module, start at 1 (tag 0 is reserved for tuples in the VM)
and follow definition order, so the same module text always gets the same tags.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from compiler.ir import hooks
from compiler.ir.expr import Constructor, Expr, Function, GlobalVar, check_no_annotate
from compiler.ir.types import GlobalTypeVar, TypeData
from compiler.ir.visitor import free_vars


class IRModule:
    """Global functions (by :class:`GlobalVar`) and ADT definitions (by :class:`GlobalTypeVar`).

    Parameters
    ----------
    functions : mapping of str or GlobalVar to Function, optional
        The module's global functions, in order.
    type_definitions : mapping of str or GlobalTypeVar to TypeData, optional
        The module's algebraic data types, in order.
    """

    def __init__(
        self,
        functions: Mapping[str | GlobalVar, Function] | None = None,
        type_definitions: Mapping[str | GlobalTypeVar, TypeData] | None = None,
    ) -> None:
        self._functions: dict[GlobalVar, Function] = {}
        self._global_vars: dict[str, GlobalVar] = {}
        self._type_defs: dict[GlobalTypeVar, TypeData] = {}
        self._type_vars: dict[str, GlobalTypeVar] = {}
        self._constructors: dict[int, Constructor] = {}
        for key, data in (type_definitions or {}).items():
            self.add_type_def(key, data)
        for key, func in (functions or {}).items():
            self[key] = func

    # --- functions ------------------------------------------------------------------------

    def _resolve(self, key: str | GlobalVar, create: bool) -> GlobalVar:
        if isinstance(key, GlobalVar):
            existing = self._global_vars.get(key.name_hint)
            if existing is None and create:
                self._global_vars[key.name_hint] = key
                return key
            if existing is None:
                raise KeyError(f"module has no global function @{key.name_hint}")
            return existing
        if not isinstance(key, str):
            raise TypeError(f"module keys are str or GlobalVar, got {type(key).__name__}")
        existing = self._global_vars.get(key)
        if existing is None:
            if not create:
                names = ", ".join("@" + n for n in self._global_vars) or "none"
                raise KeyError(f"module has no global function @{key} (it has {names})")
            existing = GlobalVar(key)
            self._global_vars[key] = existing
        return existing

    def __getitem__(self, key: str | GlobalVar) -> Function:
        return self._functions[self._resolve(key, create=False)]

    def __setitem__(self, key: str | GlobalVar, func: Expr) -> None:
        if not isinstance(func, Function):
            raise TypeError(f"module entries must be relay.Function, got {type(func).__name__}")
        gvar = self._resolve(key, create=True)
        self._functions[gvar] = func

    def __delitem__(self, key: str | GlobalVar) -> None:
        gvar = self._resolve(key, create=False)
        del self._functions[gvar]
        del self._global_vars[gvar.name_hint]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, GlobalVar):
            return key.name_hint in self._global_vars
        return key in self._global_vars

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(list(self._functions))

    def __len__(self) -> int:
        return len(self._functions)

    @property
    def functions(self) -> dict[GlobalVar, Function]:
        """A copy of the GlobalVar -> Function map, in definition order."""
        return dict(self._functions)

    def get_global_var(self, name: str) -> GlobalVar:
        """The :class:`GlobalVar` named ``name``; ``KeyError`` if absent."""
        return self._resolve(name, create=False)

    def get_global_vars(self) -> list[GlobalVar]:
        """All global function names, in definition order."""
        return list(self._functions)

    def update_func(self, gvar: str | GlobalVar, func: Function) -> None:
        """Replace (or add) one function."""
        self[gvar] = func

    # --- types ----------------------------------------------------------------------------

    def add_type_def(self, key: str | GlobalTypeVar, data: TypeData) -> None:
        """Add an ADT definition and assign tags to its constructors."""
        if not isinstance(data, TypeData):
            raise TypeError(f"type definitions must be relay.TypeData, got {type(data).__name__}")
        gtv = GlobalTypeVar(key) if isinstance(key, str) else key
        if gtv.name_hint in self._type_vars:
            raise ValueError(f"type {gtv.name_hint} is already defined in this module")
        self._type_vars[gtv.name_hint] = data.header
        self._type_defs[data.header] = data
        for ctor in data.constructors:
            assert isinstance(ctor, Constructor)
            ctor.tag = len(self._constructors) + 1
            self._constructors[ctor.tag] = ctor

    @property
    def type_definitions(self) -> dict[GlobalTypeVar, TypeData]:
        """A copy of the GlobalTypeVar -> TypeData map, in definition order."""
        return dict(self._type_defs)

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        """The :class:`GlobalTypeVar` named ``name``; ``KeyError`` if absent."""
        try:
            return self._type_vars[name]
        except KeyError:
            raise KeyError(f"module has no type {name}") from None

    def get_type_data(self, key: str | GlobalTypeVar) -> TypeData:
        """The definition of the ADT ``key``."""
        gtv = self.get_global_type_var(key) if isinstance(key, str) else key
        return self._type_defs[gtv]

    def get_type(self, name: str) -> tuple:
        """``(global_type_var, *constructors)`` for the ADT ``name``, as TVM returns it."""
        data = self.get_type_data(name)
        return (data.header, *data.constructors)

    def get_constructor(self, tag: int) -> Constructor:
        """The constructor with ``tag``; ``KeyError`` if absent."""
        return self._constructors[tag]

    @property
    def constructors(self) -> list[Constructor]:
        """Every constructor, in tag order."""
        return [self._constructors[t] for t in sorted(self._constructors)]

    # --- construction and printing ----------------------------------------------------------

    @staticmethod
    def from_expr(
        expr: Expr,
        functions: Mapping[str | GlobalVar, Function] | None = None,
        type_defs: Mapping[str | GlobalTypeVar, TypeData] | None = None,
    ) -> IRModule:
        """A module whose ``main`` is ``expr`` (wrapped in a function over its free variables)."""
        mod = IRModule(functions, type_defs)
        if not isinstance(expr, Function):
            expr = Function(free_vars(expr), expr)
        mod["main"] = expr
        return mod

    def copy(self) -> IRModule:
        """A shallow copy sharing functions and type definitions (tags are preserved)."""
        new = IRModule()
        new._functions = dict(self._functions)
        new._global_vars = dict(self._global_vars)
        new._type_defs = dict(self._type_defs)
        new._type_vars = dict(self._type_vars)
        new._constructors = dict(self._constructors)
        return new

    def astext(self, show_meta_data: bool = True, annotate: None = None) -> str:
        """The module in the Relay text format (TVM's ``astext``); the parameters are
        those of :meth:`compiler.ir.expr.Node.astext`."""
        check_no_annotate(annotate)
        return hooks.module_to_text(self, show_meta_data)

    def __str__(self) -> str:
        return self.astext()

    def __repr__(self) -> str:
        names = ", ".join("@" + g.name_hint for g in self._functions)
        return f"IRModule({names})"
