"""The pass infrastructure: pass objects, ``Sequential``, ``PassContext`` and instruments.

Compiler layer (``compiler.transform``). Shaped like TVM's ``tvm.transform``:

- a :class:`Pass` is an object with a :class:`PassInfo` (name, opt level, required passes)
  that is called on an IRModule and returns a new one;
- :class:`Sequential` runs a list of passes, skipping those the current
  :class:`PassContext` does not enable (an ``opt_level`` above the context's, or a name in
  ``disabled_pass``; a name in ``required_pass`` always runs) and running each pass's
  ``required`` passes first;
- :class:`PassContext` is a context manager (``with PassContext(opt_level=3): ...``);
  :meth:`PassContext.current` is the innermost one entered on this thread, or a default
  context at ``opt_level=2``;
- instruments (:class:`PassInstrument`, e.g. :class:`PassTimingInstrument`) see every pass
  run under a context, including passes called directly and passes nested in others.

As in TVM, calling a pass directly always runs it (only instruments' ``should_run`` can
skip it); ``opt_level`` and ``disabled_pass`` filter the passes a ``Sequential`` runs.
"""

from __future__ import annotations

import abc
import functools
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from compiler.ir.expr import Function
from compiler.ir.module import IRModule

__all__ = [
    "FunctionPass",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassInfo",
    "PassInstrument",
    "PassTimingInstrument",
    "Sequential",
    "function_pass",
    "get_pass",
    "module_pass",
    "pass_instrument",
    "register_pass",
]


def _name_list(value: object, what: str) -> tuple[str, ...]:
    """A tuple of pass names from ``None`` or a list/tuple/set of strings."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(
            f"{what} must be a list, tuple or set of pass names, got {type(value).__name__} "
            f"{value!r}"
        )
    names = tuple(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{what} must hold pass names (str), found {name!r}")
    return names


class PassInfo:
    """What the pass manager knows about a pass: its name, opt level and required passes.

    Parameters
    ----------
    opt_level : int
        The lowest ``PassContext.opt_level`` at which a :class:`Sequential` runs the pass.
    name : str
        The pass name, matched against ``disabled_pass`` and ``required_pass``.
    required : list of str, optional
        Names of passes a :class:`Sequential` runs before this one.
    """

    __slots__ = ("name", "opt_level", "required")

    def __init__(self, opt_level: int, name: str, required: Iterable[str] | None = None) -> None:
        if isinstance(opt_level, bool) or not isinstance(opt_level, int):
            raise TypeError(f"opt_level of pass {name!r} must be an int, got {opt_level!r}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"a pass name must be a non-empty string, got {name!r}")
        self.opt_level = opt_level
        self.name = name
        self.required = _name_list(required, f"required passes of pass {name}")

    def __repr__(self) -> str:
        req = f", required={list(self.required)}" if self.required else ""
        return f"PassInfo(name={self.name!r}, opt_level={self.opt_level}{req})"


class PassInstrument:
    """Hooks called around every pass run under a :class:`PassContext` (TVM's instrument).

    Subclass and override any of the hooks; the defaults do nothing (and ``should_run``
    lets every pass run). Objects of other classes work too as long as they define the
    hooks they need: the context calls only the ones present.
    """

    def enter_pass_ctx(self) -> None:
        """Called when a context holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when that context is exited."""

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        """Return False to skip the pass (it then returns its input unchanged)."""
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called just before a pass runs, with its input."""

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Called just after a pass ran, with its output."""

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        """Called instead of :meth:`run_after_pass` when the pass raised ``error``
        (an extension over TVM, so that instruments keeping a stack stay balanced)."""


def pass_instrument(cls: type) -> type:
    """Class decorator making ``cls`` a :class:`PassInstrument` (TVM's ``@pass_instrument``):
    hooks it does not define get the default behaviour."""
    if not isinstance(cls, type):
        raise TypeError(f"@pass_instrument decorates a class, got {type(cls).__name__}")
    if issubclass(cls, PassInstrument):
        return cls
    wrapped = type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__})
    wrapped.__module__ = cls.__module__
    wrapped.__qualname__ = cls.__qualname__
    return wrapped


_HOOKS = (
    "enter_pass_ctx",
    "exit_pass_ctx",
    "should_run",
    "run_before_pass",
    "run_after_pass",
    "on_pass_error",
)


class _ContextStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[PassContext] = []
        self.default: PassContext | None = None


_CONTEXTS = _ContextStack()


class PassContext:
    """The settings passes run under; use it as a context manager.

    Parameters
    ----------
    opt_level : int
        :class:`Sequential` skips passes whose ``opt_level`` is higher (default 2, as TVM).
    required_pass : list of str, optional
        Passes that run whatever their opt level.
    disabled_pass : list of str, optional
        Passes that never run in a :class:`Sequential` (this wins over ``required_pass``).
    instruments : list of PassInstrument, optional
        Instruments called around every pass run while the context is current.
    config : dict of str to value, optional
        Pass-specific options (read them with ``PassContext.current().config.get(name)``).

    Examples
    --------
    >>> with PassContext(opt_level=3, disabled_pass=["FoldConstant"]):
    ...     mod = Sequential([FoldConstant(), EliminateCommonSubexpr()])(mod)
    """

    def __init__(
        self,
        opt_level: int = 2,
        required_pass: Iterable[str] | None = None,
        disabled_pass: Iterable[str] | None = None,
        instruments: Sequence[object] | None = None,
        config: Mapping[str, object] | None = None,
    ) -> None:
        if isinstance(opt_level, bool) or not isinstance(opt_level, int):
            raise TypeError(f"PassContext opt_level must be an int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = frozenset(_name_list(required_pass, "PassContext required_pass"))
        self.disabled_pass = frozenset(_name_list(disabled_pass, "PassContext disabled_pass"))
        if instruments is None:
            instruments = ()
        if not isinstance(instruments, (list, tuple)):
            raise TypeError(
                "PassContext instruments must be a list or tuple of pass instruments, got "
                f"{type(instruments).__name__}"
            )
        for inst in instruments:
            if not any(callable(getattr(inst, hook, None)) for hook in _HOOKS):
                raise TypeError(
                    f"PassContext instrument {inst!r} defines none of the instrument hooks "
                    f"({', '.join(_HOOKS)})"
                )
        self.instruments = tuple(instruments)
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise TypeError(f"PassContext config must be a dict, got {type(config).__name__}")
        for key in config:
            if not isinstance(key, str):
                raise TypeError(f"PassContext config keys must be strings, found {key!r}")
        self.config: Mapping[str, object] = MappingProxyType(dict(config))

    # --- the current context ------------------------------------------------------------------

    @staticmethod
    def current() -> PassContext:
        """The innermost context entered on this thread, else a default ``opt_level=2`` one."""
        if _CONTEXTS.stack:
            return _CONTEXTS.stack[-1]
        if _CONTEXTS.default is None:
            _CONTEXTS.default = PassContext()
        return _CONTEXTS.default

    def __enter__(self) -> PassContext:
        entered: list[object] = []
        try:
            for inst in self.instruments:
                _hook(inst, "enter_pass_ctx")()
                entered.append(inst)
        except BaseException:
            # Leave the instruments that did enter as they were before.
            for inst in reversed(entered):
                _hook(inst, "exit_pass_ctx")()
            raise
        _CONTEXTS.stack.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _CONTEXTS.stack
        if self not in stack:
            raise RuntimeError("PassContext exited without being entered on this thread")
        # Exiting out of order (an inner context left open) also closes the inner ones.
        del stack[len(stack) - 1 - stack[::-1].index(self) :]
        for inst in self.instruments:
            _hook(inst, "exit_pass_ctx")()

    # --- decisions and instrument calls ---------------------------------------------------------

    def pass_enabled(self, info: PassInfo) -> bool:
        """Whether a :class:`Sequential` runs a pass with ``info`` under this context."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    def instrument_before_pass(self, mod: IRModule, info: PassInfo) -> bool:
        """Ask every instrument whether the pass should run; if so, call ``run_before_pass``."""
        if not self.instruments:
            return True
        if info.name not in self.required_pass:
            verdicts = [bool(_hook(inst, "should_run")(mod, info)) for inst in self.instruments]
            if not all(verdicts):
                return False
        for inst in self.instruments:
            _hook(inst, "run_before_pass")(mod, info)
        return True

    def instrument_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        """Call every instrument's ``run_after_pass`` (in reverse order, like a stack)."""
        for inst in reversed(self.instruments):
            _hook(inst, "run_after_pass")(mod, info)

    def instrument_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        """Tell every instrument the pass failed."""
        for inst in reversed(self.instruments):
            _hook(inst, "on_pass_error")(mod, info, error)

    def __repr__(self) -> str:
        parts = [f"opt_level={self.opt_level}"]
        if self.required_pass:
            parts.append(f"required_pass={sorted(self.required_pass)}")
        if self.disabled_pass:
            parts.append(f"disabled_pass={sorted(self.disabled_pass)}")
        if self.instruments:
            parts.append(f"instruments={list(self.instruments)}")
        if self.config:
            parts.append(f"config={dict(self.config)}")
        return f"PassContext({', '.join(parts)})"


_DEFAULTS = PassInstrument()


def _hook(inst: object, name: str) -> Callable[..., Any]:
    """``inst``'s hook ``name``, or the default (do nothing / run) if it has none."""
    fn = getattr(inst, name, None)
    return fn if callable(fn) else getattr(_DEFAULTS, name)


class Pass(abc.ABC):
    """Base class of passes: call the object on an IRModule to get a new IRModule.

    Subclasses implement :meth:`transform_module`; the input module is never modified.
    Calling a pass runs it under :meth:`PassContext.current`, with that context's
    instruments around it.
    """

    def __init__(self, name: str, opt_level: int = 0, required: Iterable[str] | None = None):
        self.info = PassInfo(opt_level, name, required)

    @property
    def name(self) -> str:
        """The pass name (``info.name``)."""
        return self.info.name

    @abc.abstractmethod
    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Return the transformed copy of ``mod``."""

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(
                f"pass {self.info.name} expects a relay.IRModule, got {type(mod).__name__}"
            )
        ctx = PassContext.current()
        if not ctx.instrument_before_pass(mod, self.info):
            return mod
        try:
            out = self.transform_module(mod, ctx)
        except BaseException as error:
            ctx.instrument_pass_error(mod, self.info, error)
            raise
        if not isinstance(out, IRModule):
            error = TypeError(
                f"pass {self.info.name} returned {type(out).__name__}; a pass must return a "
                "relay.IRModule"
            )
            ctx.instrument_pass_error(mod, self.info, error)
            raise error
        ctx.instrument_after_pass(out, self.info)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass made from a function ``pass_func(mod, ctx) -> IRModule``."""

    def __init__(
        self,
        pass_func: Callable[[IRModule, PassContext], IRModule],
        opt_level: int,
        name: str,
        required: Iterable[str] | None = None,
    ) -> None:
        if not callable(pass_func):
            raise TypeError(f"pass_func of module pass {name} must be callable")
        super().__init__(name, opt_level, required)
        self.pass_func = pass_func

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.pass_func(mod, ctx)


class FunctionPass(Pass):
    """A pass applying ``pass_func(func, mod, ctx) -> Function`` to every global function."""

    def __init__(
        self,
        pass_func: Callable[[Function, IRModule, PassContext], Function],
        opt_level: int,
        name: str,
        required: Iterable[str] | None = None,
    ) -> None:
        if not callable(pass_func):
            raise TypeError(f"pass_func of function pass {name} must be callable")
        super().__init__(name, opt_level, required)
        self.pass_func = pass_func

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for gvar, func in mod.functions.items():
            new = self.pass_func(func, mod, ctx)
            if not isinstance(new, Function):
                raise TypeError(
                    f"function pass {self.info.name} returned {type(new).__name__} for "
                    f"@{gvar.name_hint}; expected a relay.Function"
                )
            out[gvar] = new
        return out


def _decorator(
    kind: type[Pass],
    method: str,
    pass_func: object,
    opt_level: int | None,
    name: str | None,
    required: Iterable[str] | None,
) -> Any:
    """The body of :func:`module_pass` and :func:`function_pass`."""
    what = "module_pass" if kind is ModulePass else "function_pass"
    if opt_level is None:
        raise ValueError(f"@{what} needs an opt_level")

    def create(target: object) -> Any:
        if isinstance(target, type):
            cls = target
            pass_name = name or cls.__name__

            class PyPass(kind):  # type: ignore[valid-type, misc]
                """A pass built from an instance of the decorated class."""

                def __init__(self, *args: object, **kwargs: object) -> None:
                    self.instance = cls(*args, **kwargs)
                    func = getattr(self.instance, method, None)
                    if not callable(func):
                        raise TypeError(f"class {cls.__name__} must define {method}() for @{what}")
                    super().__init__(func, opt_level, pass_name, required)

                def __getattr__(self, item: str) -> object:
                    # Attributes of the decorated class's instance read through the pass.
                    instance = self.__dict__.get("instance")
                    if instance is None:
                        raise AttributeError(item)
                    return getattr(instance, item)

            PyPass.__name__ = cls.__name__
            PyPass.__qualname__ = cls.__qualname__
            PyPass.__doc__ = cls.__doc__
            PyPass.__module__ = cls.__module__
            return PyPass
        if not callable(target):
            raise TypeError(f"@{what} decorates a function or a class, got {target!r}")
        made = kind(target, opt_level, name or target.__name__, required)  # type: ignore[arg-type, attr-defined]
        functools.update_wrapper(made, target, updated=())  # type: ignore[arg-type]
        return made

    return create(pass_func) if pass_func is not None else create


def module_pass(
    pass_func: object = None,
    opt_level: int | None = None,
    name: str | None = None,
    required: Iterable[str] | None = None,
) -> Any:
    """Make a :class:`ModulePass` from ``pass_func(mod, ctx)`` or from a class defining
    ``transform_module(self, mod, ctx)`` (TVM's ``@tvm.transform.module_pass``)."""
    return _decorator(ModulePass, "transform_module", pass_func, opt_level, name, required)


def function_pass(
    pass_func: object = None,
    opt_level: int | None = None,
    name: str | None = None,
    required: Iterable[str] | None = None,
) -> Any:
    """Make a :class:`FunctionPass` from ``pass_func(func, mod, ctx)`` or from a class
    defining ``transform_function(self, func, mod, ctx)`` (TVM's ``function_pass``)."""
    return _decorator(FunctionPass, "transform_function", pass_func, opt_level, name, required)


# --- pass registry (for ``required``) ---------------------------------------------------------

_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> None:
    """Make ``name`` resolvable in ``required`` lists: ``factory()`` builds the pass."""
    _REGISTRY[name] = factory


def get_pass(name: str) -> Pass:
    """A new instance of the registered pass ``name``; ``ValueError`` if none is registered."""
    factory = _REGISTRY.get(name)
    if factory is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise ValueError(f"no pass named {name!r} is registered (registered passes: {known})")
    return factory()


class Sequential(Pass):
    """Run ``passes`` in order, skipping those the current :class:`PassContext` disables.

    Parameters
    ----------
    passes : list of Pass
        The passes (a nested ``Sequential`` is filtered by its own ``opt_level``).
    opt_level : int
        This sequence's opt level, used when it is nested in another ``Sequential``.
    name : str
        Its name (what instruments and ``disabled_pass`` see).
    required : list of str, optional
        Passes to run before this sequence when it is nested.
    """

    def __init__(
        self,
        passes: Sequence[Pass] | None = None,
        opt_level: int = 0,
        name: str = "sequential",
        required: Iterable[str] | None = None,
    ) -> None:
        super().__init__(name, opt_level, required)
        passes = list(passes or [])
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise TypeError(
                    f"Sequential {name!r}: item {i} must be a pass, got {type(p).__name__} {p!r}"
                )
        self.passes = tuple(passes)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for required in p.info.required:
                mod = get_pass(required)(mod)
            mod = p(mod)
        return mod

    def __repr__(self) -> str:
        inner = ", ".join(p.info.name for p in self.passes)
        return f"Sequential({self.info.name}: [{inner}], opt_level={self.info.opt_level})"


# --- timing -------------------------------------------------------------------------------------


class _Timing:
    __slots__ = ("children", "failed", "name", "seconds", "start")

    def __init__(self, name: str) -> None:
        self.name = name
        self.start = time.perf_counter()
        self.seconds = 0.0
        self.children: list[_Timing] = []
        self.failed = False


class PassTimingInstrument(PassInstrument):
    """Times every pass run under the context holding it; :meth:`render` shows the tree.

    Entering the context clears earlier timings. Unlike TVM, the timings stay readable after
    the context exits (until it, or another holding this instrument, is entered again).

    Examples
    --------
    >>> timing = PassTimingInstrument()
    >>> with PassContext(instruments=[timing]):
    ...     mod = FoldConstant()(mod)
    >>> print(timing.render())
    """

    def __init__(self) -> None:
        self._roots: list[_Timing] = []
        self._stack: list[_Timing] = []

    def enter_pass_ctx(self) -> None:
        self._roots = []
        self._stack = []

    def exit_pass_ctx(self) -> None:
        self._stack = []

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._stack.append(_Timing(info.name))

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._finish(failed=False)

    def on_pass_error(self, mod: IRModule, info: PassInfo, error: BaseException) -> None:
        self._finish(failed=True)

    def _finish(self, failed: bool) -> None:
        if not self._stack:
            return
        entry = self._stack.pop()
        entry.seconds = time.perf_counter() - entry.start
        entry.failed = failed
        (self._stack[-1].children if self._stack else self._roots).append(entry)

    def timings(self) -> list[tuple[int, str, float]]:
        """``(depth, pass name, seconds)`` for every finished pass run, in pre-order."""
        out: list[tuple[int, str, float]] = []
        stack = [(0, t) for t in reversed(self._roots)]
        while stack:
            depth, t = stack.pop()
            out.append((depth, t.name, t.seconds))
            stack.extend((depth + 1, c) for c in reversed(t.children))
        return out

    def render(self) -> str:
        """The timing tree as text, one pass run per line (nested runs indented by a tab):
        ``name: total us [self us] (percent of all; percent of parent)``."""
        lines = ["Printing results of timing profile..."]
        total = sum(t.seconds for t in self._roots)
        stack: list[tuple[int, _Timing, float]] = [(0, t, total) for t in reversed(self._roots)]
        while stack:
            depth, t, parent = stack.pop()
            own = t.seconds - sum(c.seconds for c in t.children)
            of_total = 100.0 * t.seconds / total if total > 0 else 0.0
            of_parent = 100.0 * t.seconds / parent if parent > 0 else 0.0
            mark = " (failed)" if t.failed else ""
            lines.append(
                f"{chr(9) * depth}{t.name}{mark}: {round(t.seconds * 1e6)}us "
                f"[{round(max(own, 0.0) * 1e6)}us] ({of_total:.2f}%; {of_parent:.2f}%)"
            )
            stack.extend((depth + 1, c, t.seconds) for c in reversed(t.children))
        return "\n".join(lines) + "\n"
