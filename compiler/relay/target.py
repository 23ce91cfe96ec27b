"""Compilation targets: TVM's target strings and ``Target`` objects, all meaning this CPU.

Compiler layer (``compiler.relay``). relayvm generates one kind of code, numba kernels
for the host CPU, sized by the CPU the process runs on (see ``vm.kernels``). TVM
programs name that CPU in several ways, and all of them are accepted here:
``"cpu"`` (relayvm's own name), ``"llvm"`` with or without options
(``"llvm -mcpu=skylake-avx512 -mattr=+avx512f"``), ``"c"``, a dict such as
``{"kind": "llvm", "mcpu": "skylake"}``, or a :class:`Target`. The options are kept
(``str(target)`` gives them back, and Model Library Format metadata records them) but do
not change the code: kernels take their vector widths from the running CPU.

A GPU or accelerator target (``"cuda"``, ``"vulkan"``...) is a clear ``ValueError``:
relayvm has no code generator for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Target kinds that mean the host CPU.
CPU_KINDS = ("cpu", "llvm", "c")

#: TVM's target kinds for devices relayvm cannot run on.
DEVICE_KINDS = (
    "cuda", "nvptx", "rocm", "opencl", "vulkan", "metal", "webgpu", "hexagon",
    "sdaccel", "aocl", "aocl_sw_emu", "vta", "ext_dev", "hybrid", "gpu",
)  # fmt: skip


@dataclass(frozen=True)
class TargetKind:
    """The kind of a target (TVM's ``target.kind``): its ``name``."""

    name: str


class Target:
    """A compilation target, as TVM's ``tvm.target.Target``; every accepted one is this CPU.

    Parameters
    ----------
    target : str, dict or Target
        ``"llvm"``, ``"llvm -mcpu=... -mattr=+a,+b"``, ``"c"``, ``"cpu"``; a dict with a
        ``"kind"`` key and option keys; or a Target (copied).
    host : str, dict, Target or None
        The host target (TVM's ``target_host``); it must be a CPU target too.

    Attributes
    ----------
    kind : TargetKind
        ``kind.name`` is ``"llvm"``, ``"c"`` or ``"cpu"``.
    attrs : dict
        The options, e.g. ``{"mcpu": "skylake", "mattr": ["+avx2"]}``.
    host : Target or None

    Raises
    ------
    ValueError
        For a GPU or accelerator target (naming it), an unknown kind or a malformed option.
    TypeError
        If ``target`` is none of the accepted types.
    """

    __slots__ = ("attrs", "host", "kind")

    def __init__(self, target: str | Mapping[str, Any] | Target, host: Any = None) -> None:
        if isinstance(target, Target):
            kind, attrs = target.kind.name, dict(target.attrs)
            host = target.host if host is None else host
        elif isinstance(target, str):
            kind, attrs = _parse(target)
        elif isinstance(target, Mapping):
            if "kind" not in target:
                raise ValueError(f"a target dict needs a 'kind' key, got {dict(target)!r}")
            attrs = {str(k): v for k, v in target.items() if k not in ("kind", "host")}
            kind = target["kind"]
            host = target.get("host", host)
        else:
            raise TypeError(f"a target is a str, a dict or a Target, got {type(target).__name__}")
        _check_kind(kind, target)
        object.__setattr__(self, "kind", TargetKind(kind))
        object.__setattr__(self, "attrs", attrs)
        object.__setattr__(self, "host", None if host is None else Target(host))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Target is immutable")

    @property
    def mcpu(self) -> str:
        """The ``-mcpu`` option, or ``""``."""
        return str(self.attrs.get("mcpu", ""))

    @property
    def mattr(self) -> list[str]:
        """The ``-mattr`` option as a list, or ``[]``."""
        value = self.attrs.get("mattr", [])
        return list(value) if isinstance(value, (list, tuple)) else [str(value)]

    @property
    def keys(self) -> list[str]:
        """TVM's target keys: ``["cpu"]``."""
        return ["cpu"]

    def __str__(self) -> str:
        parts = [self.kind.name]
        for key, value in self.attrs.items():
            if value is True:
                parts.append(f"-{key}")
            elif isinstance(value, (list, tuple)):
                parts.append(f"-{key}={','.join(map(str, value))}")
            else:
                parts.append(f"-{key}={value}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and str(other) == str(self) and other.host == self.host

    def __hash__(self) -> int:
        return hash(str(self))


def _parse(text: str) -> tuple[str, dict[str, Any]]:
    tokens = text.split()
    if not tokens:
        raise ValueError("an empty target string; use 'llvm' (or 'cpu') for this CPU")
    kind, options = tokens[0], tokens[1:]
    attrs: dict[str, Any] = {}
    for option in options:
        if not option.startswith("-") or option in ("-", "--"):
            raise ValueError(f"target {text!r}: option {option!r} does not start with '-'")
        key, sep, value = option.lstrip("-").partition("=")
        if not key:
            raise ValueError(f"target {text!r}: option {option!r} has no name")
        if not sep:
            attrs[key] = True
        elif key in ("mattr", "keys", "libs"):
            attrs[key] = [v for v in value.split(",") if v]
        else:
            attrs[key] = value
    return kind, attrs


def _check_kind(kind: Any, given: Any) -> None:
    if kind in CPU_KINDS:
        return
    if kind in DEVICE_KINDS:
        raise ValueError(
            f"target {str(given)!r} is a {kind} device: relayvm generates code for the host "
            "CPU only; use 'llvm' (or 'cpu'), and run on vm.cpu()"
        )
    accepted = ", ".join(repr(k) for k in CPU_KINDS)
    raise ValueError(
        f"unknown target kind {kind!r} in {str(given)!r}; relayvm accepts {accepted} "
        "(all meaning this CPU), with TVM's options such as -mcpu and -mattr"
    )


def as_target(target: Any, target_host: Any = None) -> Target:
    """``target`` (None meaning ``"cpu"``) and ``target_host`` as one checked :class:`Target`.

    Raises
    ------
    ValueError, TypeError
        As :class:`Target` does, for either argument.
    """
    return Target("cpu" if target is None else target, host=target_host)


def enabled(target: Any) -> bool:
    """Whether relayvm can run code for ``target`` (TVM's ``tvm.runtime.enabled``):
    True for the CPU kinds, False for anything else."""
    if isinstance(target, Target):
        return True
    if isinstance(target, str):
        return bool(target.split()) and target.split()[0] in CPU_KINDS
    return False
