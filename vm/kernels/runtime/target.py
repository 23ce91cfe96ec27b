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
    """The CPU features (``"avx2"``, ``"avx512f"``, ...) the compiled kernels may use."""
    features = config.CPU_FEATURES
    name = config.CPU_NAME
    if features is None and name not in (None, "host"):
        # A named CPU without a feature list: LLVM derives the features from the name.
        return frozenset({"avx2", "fma"} | ({"avx512f"} if name in _AVX512_CPUS else set()))
    text = features if features is not None else binding.get_host_cpu_features().flatten()
    return frozenset(f[1:] for f in text.split(",") if f.startswith("+"))


def has_avx512() -> bool:
    """Whether the kernels are compiled with 32 512-bit vector registers (AVX-512F)."""
    return "avx512f" in target_features()
