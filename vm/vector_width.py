"""numba's loops at the host's full vector width: 512 bits where the CPU has AVX-512.

Runtime layer; imports llvmlite's binding only (never numba: it must run before numba is
imported). :mod:`vm.kernels` calls :func:`prefer_full_width` before its own imports,
which import numba.

LLVM vectorizes loops at 256 bits on Intel's AVX-512 cores unless told otherwise (its
``prefer-256-bit`` tuning, chosen for the clock drop of older parts). The kernels'
elementwise chains are compute-bound where they take exponentials, ``erf`` or ``tanh``,
and run half as many vector operations at 512 bits (Intel Xeon, Emerald Rapids, one
thread: ``erf`` 1.40 -> 0.94 ns an element, ``exp`` 0.50 -> 0.32; ConvNeXt's 96 to 384
product with its erf GELU at 56x56, 2 threads: 3.1-3.3 -> 2.5 ms). The register tiles
(:mod:`vm.kernels.runtime.packed`) choose their own vectors and do not depend on it.

numba reads its target once, when it is imported, from ``NUMBA_CPU_NAME`` and
``NUMBA_CPU_FEATURES``. So this sets ``NUMBA_CPU_FEATURES`` to the host's features with
the tuning off, before numba is imported, unless either variable is already set (a
user's own target, or the test that compiles for an AVX2-only CPU, wins) or numba is
already imported (it then keeps LLVM's default, and the variable is set to what numba
uses). Processes started from this one inherit the variable, and so compile the same
code: numba's cache keys code by target, and the kernel builders' processes
(:mod:`vm.prebuild`) leave code this process loads.
"""

from __future__ import annotations

import os
import sys

#: The variable numba takes its target CPU's features from.
FEATURES_ENV = "NUMBA_CPU_FEATURES"
_NAME_ENV = "NUMBA_CPU_NAME"
#: The tuning feature that keeps LLVM's loop vectorizer at 256 bits.
PREFER_256 = "prefer-256-bit"


def prefer_full_width() -> bool:
    """Turn LLVM's ``prefer-256-bit`` tuning off for numba on an AVX-512 host, if numba is
    not imported yet and no target was chosen; whether it did. With numba imported, set
    ``NUMBA_CPU_FEATURES`` to the target it has, for the processes this one starts.

    Returns
    -------
    bool
        True if ``NUMBA_CPU_FEATURES`` was set here.
    """
    if os.environ.get(FEATURES_ENV) or os.environ.get(_NAME_ENV):
        return False
    if "numba" in sys.modules:
        # Too late for this process; processes it starts are told to compile as it does,
        # so that what they leave in the cache is found here (it is keyed by target).
        os.environ.update(_numba_target_env())
        return False
    from llvmlite import binding

    features = binding.get_host_cpu_features().flatten()
    if "+avx512f" not in features.split(","):
        return False
    os.environ[FEATURES_ENV] = f"{features},-{PREFER_256}"
    return True


def _numba_target_env() -> dict[str, str]:
    """The environment that makes numba in a child process compile for the target numba
    has in this one, whatever set it: builders whose code this process then loads from
    numba's cache must compile what this process would (the cache keys code by target).

    Returns
    -------
    dict
        ``NUMBA_CPU_FEATURES``, and ``NUMBA_CPU_NAME`` where one was chosen.
    """
    from llvmlite import binding
    from numba.core import config

    env = {FEATURES_ENV: config.CPU_FEATURES or binding.get_host_cpu_features().flatten()}
    if config.CPU_NAME:
        env[_NAME_ENV] = config.CPU_NAME
    return env
