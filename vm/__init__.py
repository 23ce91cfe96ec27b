"""relayvm's runtime: executables, the verifier, the interpreter and its numba kernels.

Runtime layer; imports ``serialization``, numpy and numba, never ``compiler``.
"""
