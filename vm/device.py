"""Devices: where tensors live. relayvm runs on the host CPU only.

Runtime layer (``vm``); standard library only.

TVM passes a device to ``VirtualMachine``, ``time_evaluator`` and ``benchmark``;
ported code keeps doing so with ``vm.cpu()``. A :class:`Device` is a small immutable
value shaped like TVM's (``device_type`` 1 is the CPU, ``device_id`` its index).
"""

from __future__ import annotations

from typing import Any

#: TVM's (DLPack's) device type code of the host CPU.
CPU_DEVICE_TYPE = 1


class Device:
    """A device: ``vm.cpu(0)``.

    Parameters
    ----------
    device_type : int
        The DLPack device type; only 1 (the CPU) is supported.
    device_id : int
        The device index (any non-negative integer; all name the same host CPU).

    Raises
    ------
    ValueError
        If the device type is not the CPU or the index is negative.
    """

    __slots__ = ("device_id", "device_type")
    device_type: int
    device_id: int

    def __init__(self, device_type: int = CPU_DEVICE_TYPE, device_id: int = 0) -> None:
        if isinstance(device_type, bool) or device_type != CPU_DEVICE_TYPE:
            raise ValueError(
                f"relayvm runs on the CPU only (device type {CPU_DEVICE_TYPE}); "
                f"got device type {device_type!r}"
            )
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"a device index must be a non-negative int, got {device_id!r}")
        object.__setattr__(self, "device_type", CPU_DEVICE_TYPE)
        object.__setattr__(self, "device_id", device_id)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Device is immutable")

    @property
    def exist(self) -> bool:
        """Whether the device exists (the CPU always does)."""
        return True

    def sync(self) -> None:
        """Wait for the device's pending work; the CPU runs synchronously, so this returns."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Device)
            and other.device_type == self.device_type
            and other.device_id == self.device_id
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"cpu({self.device_id})"

    __str__ = __repr__


def cpu(dev_id: int = 0) -> Device:
    """The host CPU, as TVM's ``tvm.cpu(dev_id)``."""
    return Device(CPU_DEVICE_TYPE, dev_id)


def check_devices(device: Any, where: str) -> None:
    """Check that ``device`` is None, a :class:`Device` or a list of them.

    Raises
    ------
    TypeError
        If it is anything else (naming ``where``, e.g. ``"VirtualMachine"``).
    """
    items = device if isinstance(device, (list, tuple)) else [device]
    for item in items:
        if item is not None and not isinstance(item, Device):
            raise TypeError(
                f"{where}: a device must be vm.cpu() (or None), got {type(item).__name__}"
            )


#: Device names that mean the host CPU, as TVM spells them (``tvm.device("llvm")``).
CPU_NAMES = ("cpu", "llvm", "c", "stackvm")


def device(dev_type: str | int, dev_id: int = 0) -> Device:
    """The device named ``dev_type`` (TVM's ``tvm.device``): any name of the CPU.

    Parameters
    ----------
    dev_type : str or int
        ``"cpu"``, ``"llvm"``, ``"c"`` (a target string's first word counts), or the
        CPU's device type code 1.
    dev_id : int
        The device index.

    Raises
    ------
    ValueError
        For any other device (naming it), or a negative index.
    """
    if isinstance(dev_type, str):
        words = dev_type.split()
        if words and words[0] in CPU_NAMES:
            return cpu(dev_id)
        raise ValueError(
            f"relayvm runs on the CPU only; device {dev_type!r} is not one of "
            f"{', '.join(map(repr, CPU_NAMES))}"
        )
    return Device(dev_type, dev_id)
