"""vm.device: the CPU device, and TVM's ``device(name, index)`` by any CPU name.

Returns: every CPU spelling gives vm.cpu(index). Invalid: other devices name themselves.
"""

from __future__ import annotations

import pytest

import vm
from vm.device import device


@pytest.mark.parametrize("name", ["cpu", "llvm", "c", "llvm -mcpu=skylake", 1])
def test_every_cpu_name_is_the_cpu(name):
    assert device(name) == vm.cpu()
    assert device(name, 2) == vm.cpu(2)


@pytest.mark.parametrize("name", ["cuda", "gpu", "vulkan", ""])
def test_other_devices_are_refused_naming_them(name):
    with pytest.raises(ValueError, match=f"device {name!r} is not one of 'cpu'"):
        device(name)


def test_other_device_codes_and_negative_indices_are_refused():
    with pytest.raises(ValueError, match="CPU only"):
        device(2)
    with pytest.raises(ValueError, match="non-negative"):
        device("cpu", -1)
