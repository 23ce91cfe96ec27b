"""The Prelude: standard ADTs (List, Option, nat, Tree) and list/tree functions for a module.

Compiler layer. The definitions are written in the Relay text format in ``prelude.rly``
(shipped as package data); :class:`Prelude` parses that file and adds its types and
functions to a user's :class:`~compiler.ir.module.IRModule`, as TVM's ``relay.Prelude`` does.

What it defines:

- types ``List[A]`` (``Cons``, ``Nil``), ``Option[A]`` (``Some``, ``None``), ``nat``
  (``z``, ``s``) and ``Tree[A]`` (``Rose(A, List[Tree[A]])``);
- functions ``id``, ``compose``, ``hd``, ``tl``, ``nth``, ``update``, ``length``, ``map``,
  ``foldl``, ``foldr``, ``foldr1``, ``sum`` (of a ``List[Tensor[(), int32]]``), ``concat``,
  ``filter``, ``zip``, ``rev``, ``iterate``, ``map_accuml``, ``map_accumr``, ``unfoldr``,
  ``unfoldl``, ``size`` (number of tree nodes), ``tmap`` (tree map), ``nat_add``,
  ``nat_double``, ``nat_to_int`` and ``nat_iterate``.

``hd``, ``tl``, ``nth``, ``update`` and ``foldr1`` are partial (``match?``): applied to a list
that is too short they stop with a runtime error.
"""

from __future__ import annotations

import importlib.resources

from compiler.ir.expr import Constructor, GlobalVar
from compiler.ir.module import IRModule
from compiler.ir.structural import structural_equal
from compiler.text.parser import fromtext

__all__ = ["PRELUDE_SOURCE_NAME", "Prelude", "prelude_text"]

#: The name spans in Prelude functions carry (``prelude.rly:LINE:COLUMN``).
PRELUDE_SOURCE_NAME = "prelude.rly"


def prelude_text() -> str:
    """The Prelude's Relay source text."""
    return importlib.resources.files("compiler").joinpath(PRELUDE_SOURCE_NAME).read_text("utf-8")


def _parse(text: str) -> IRModule:
    return fromtext(text, PRELUDE_SOURCE_NAME)


class Prelude:
    """Adds the Prelude's types and functions to ``mod``.

    Parameters
    ----------
    mod : IRModule, optional
        The module to extend (a new one if omitted). It is modified in place. If it already
        holds the whole Prelude (from an earlier ``Prelude(mod)``, or because it was copied
        or parsed from a module that had it), those definitions are used as they are.
        Otherwise, if it defines a type, constructor or global function with a Prelude
        name, ``ValueError`` names the clashing definitions and ``mod`` is left unchanged.

    Attributes
    ----------
    mod : IRModule
        The extended module.
    type_names : tuple of str
        The ADTs the Prelude defines, in definition order.
    function_names : tuple of str
        The global functions the Prelude defines, in definition order.

    Examples
    --------
    >>> p = Prelude(mod)
    >>> list_type, cons, nil = p.get_type("List")
    >>> map_fn = p.get_global_var("map")
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod if mod is not None else IRModule()
        self._load()

    def _load(self) -> None:
        source = _parse(prelude_text())
        type_defs = source.type_definitions
        functions = source.functions
        self.type_names = tuple(gtv.name_hint for gtv in type_defs)
        self.function_names = tuple(gvar.name_hint for gvar in functions)

        existing_types = {gtv.name_hint for gtv in self.mod.type_definitions}
        existing_ctors = {c.name_hint: c.belong_to.name_hint for c in self.mod.constructors}
        clashes: list[str] = []
        for gtv, data in type_defs.items():
            if gtv.name_hint in existing_types:
                clashes.append(f"type {gtv.name_hint}")
            for ctor in data.constructors:
                assert isinstance(ctor, Constructor)
                owner = existing_ctors.get(ctor.name_hint)
                if owner is not None:
                    clashes.append(f"constructor {ctor.name_hint} (of type {owner})")
        clashes.extend(f"global function @{g.name_hint}" for g in functions if g in self.mod)
        if clashes:
            differing = self._differences(source)
            if differing == []:
                # A module that already has exactly these definitions (from an earlier
                # Prelude, a copy, or text parsed with ``init_module``): use them.
                return
            if differing:
                raise ValueError(
                    "cannot add the Prelude: the module already defines every Prelude name, "
                    "but these definitions differ from the Prelude's: " + ", ".join(differing)
                )
            raise ValueError(
                "cannot add the Prelude: the module already defines "
                + ", ".join(clashes)
                + "; rename those definitions or add the Prelude to a fresh module"
            )

        # Adding a type assigns its constructors' tags in this module; the parsed functions
        # refer to the same Constructor objects, so they see the new tags.
        for gtv, data in type_defs.items():
            self.mod.add_type_def(gtv, data)
        for gvar, func in functions.items():
            self.mod[gvar] = func

    def _differences(self, source: IRModule) -> list[str] | None:
        """``None`` if ``self.mod`` lacks some Prelude name; otherwise the Prelude types and
        functions whose definitions in ``self.mod`` are not structurally equal to the
        Prelude's (an empty list: the module already holds the Prelude)."""

        existing_types = {gtv.name_hint for gtv in self.mod.type_definitions}
        if any(gtv.name_hint not in existing_types for gtv in source.type_definitions):
            return None
        if any(gvar.name_hint not in self.mod for gvar in source.functions):
            return None
        differing = [
            f"type {gtv.name_hint}"
            for gtv, data in source.type_definitions.items()
            if not structural_equal(data, self.mod.get_type_data(gtv.name_hint))
        ]
        differing.extend(
            f"global function @{gvar.name_hint}"
            for gvar, func in source.functions.items()
            if not structural_equal(func, self.mod[gvar.name_hint])
        )
        return differing

    def get_type(self, name: str) -> tuple:
        """``(GlobalTypeVar, *constructors)`` of the Prelude ADT ``name`` (e.g. ``"List"``)."""
        if name not in self.type_names:
            raise KeyError(
                f"the Prelude defines no type {name!r}; it defines {', '.join(self.type_names)}"
            )
        return self.mod.get_type(name)

    def get_global_var(self, name: str) -> GlobalVar:
        """The :class:`GlobalVar` of the Prelude function ``name`` (e.g. ``"map"``)."""
        if name not in self.function_names:
            raise KeyError(
                f"the Prelude defines no function {name!r}; it defines "
                + ", ".join(self.function_names)
            )
        return self.mod.get_global_var(name)

    def get_ctor(self, type_name: str, ctor_name: str) -> Constructor:
        """The constructor ``ctor_name`` of the Prelude ADT ``type_name``."""
        _, *ctors = self.get_type(type_name)
        for ctor in ctors:
            if ctor.name_hint == ctor_name:
                return ctor
        names = ", ".join(c.name_hint for c in ctors)
        raise KeyError(f"type {type_name} has no constructor {ctor_name!r}; it has {names}")

    def get_name(self, name: str) -> GlobalVar:
        """Alias of :meth:`get_global_var` (TVM's spelling)."""
        return self.get_global_var(name)

    def __repr__(self) -> str:
        return f"Prelude({len(self.type_names)} types, {len(self.function_names)} functions)"
