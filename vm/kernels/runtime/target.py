"""The instruction set the kernels are compiled for, as numba will target it.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports llvmlite and numba's
configuration only.

Register tiles are sized for the vector registers the compiled code will have. That is the
host CPU unless numba is told to target another one (``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES``, as when building code for a fleet of older machines, or in the test
that runs every kernel as an AVX2-only CPU would): asking llvmlite about the host would then
size AVX-512 tiles for AVX2 code, which is still correct but spills registers.
"""

from __future__ import annotations

import os
from functools import cache

from llvmlite import binding
from numba.core import config

#: CPU names (LLVM's) with AVX-512F, for a ``NUMBA_CPU_NAME`` given without features.
_AVX512_CPUS = frozenset(
    {
        "knl", "knm", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake",
        "icelake-client", "icelake-server", "tigerlake", "sapphirerapids", "graniterapids",
        "graniterapids-d", "emeraldrapids", "rocketlake", "znver4", "znver5",
    }
)  # fmt: skip


@cache
def target_features() -> frozenset[str]:
    """The CPU features (``"avx2"``, ``"avx512f"``, ...) the compiled kernels may use.

    LLVM starts from the features of the CPU it compiles for (the host's, unless
    ``NUMBA_CPU_NAME`` names another) and applies ``NUMBA_CPU_FEATURES`` to them: a
    ``+feature`` adds, a ``-feature`` removes, and what the list leaves out stays as the
    CPU has it. So ``NUMBA_CPU_FEATURES=+avx2,+fma`` alone on an AVX-512 host still
    compiles AVX-512 code (LLVM uses 512-bit registers there on AMD's Zen 4); an
    AVX2-only target also names an AVX2 CPU (``NUMBA_CPU_NAME=haswell``)."""
    name = config.CPU_NAME
    if name in (None, "host"):
        implied = _enabled(binding.get_host_cpu_features().flatten())
    else:
        # LLVM derives a named CPU's features from its name.
        implied = {"avx2", "fma"} | ({"avx512f"} if name in _AVX512_CPUS else set())
    features = config.CPU_FEATURES
    if features is None:
        return frozenset(implied)
    removed = {f[1:] for f in features.split(",") if f.startswith("-")}
    return frozenset((implied | _enabled(features)) - removed)


def _enabled(text: str) -> set[str]:
    """The features a comma-separated LLVM feature list turns on (``+name``)."""
    return {f[1:] for f in text.split(",") if f.startswith("+")}


def has_avx512() -> bool:
    """Whether the kernels are compiled with 32 512-bit vector registers (AVX-512F)."""
    return "avx512f" in target_features()


#: The first-level data cache assumed where the host does not report its own: the
#: smallest of the x86 cores these kernels run on (AVX2 parts and AMD's up to Zen 4).
_DEFAULT_L1_DATA_BYTES = 32 * 1024


@cache
def l1_data_bytes() -> int:
    """The size in bytes of a core's first-level data cache, as Linux reports it for CPU 0
    (32 KB where it does not)."""
    return _l1_data_bytes("/sys/devices/system/cpu/cpu0/cache")


def _l1_data_bytes(root: str) -> int:
    """:func:`l1_data_bytes` from the cache descriptions (``index*``) under ``root``."""
    try:
        entries = os.listdir(root)
    except OSError:
        return _DEFAULT_L1_DATA_BYTES
    for entry in sorted(entries):
        try:
            with open(f"{root}/{entry}/level") as level, open(f"{root}/{entry}/type") as kind:
                if level.read().strip() != "1" or kind.read().strip() not in ("Data", "Unified"):
                    continue
            with open(f"{root}/{entry}/size") as size:
                text = size.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if digits.isdigit() and int(digits) > 0:
            return int(digits) * scale
    return _DEFAULT_L1_DATA_BYTES
