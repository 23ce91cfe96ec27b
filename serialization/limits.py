"""Resource caps for files read from disk, as named constants.

Lowest layer (``serialization``); standard library only.

A small file must not be able to make a reader (or the VM that runs what was read)
allocate a huge amount of memory or loop for a long time. Each cap below bounds
one thing a file declares; readers reject a file that exceeds one with an error
naming the cap. The values are generous for real models and far below what would
exhaust a machine.
"""

from __future__ import annotations

#: Functions in one executable.
MAX_FUNCTIONS = 1 << 16

#: Instructions in one function.
MAX_INSTRUCTIONS = 1 << 22

#: Registers in one function's frame (``register_file_size``); the VM allocates this
#: many slots per call.
MAX_REGISTERS = 1 << 20

#: Primitives (kernels) in one executable.
MAX_PRIMITIVES = 1 << 16

#: Constructors (ADT tags) in one executable.
MAX_CONSTRUCTORS = 1 << 16

#: Bytes of all constant arrays of one executable together, and of one array. Each
#: section of a file is one msgpack bin, which holds less than 4 GiB; this leaves room
#: for the section's own framing.
MAX_CONSTANT_BYTES = (1 << 32) - (1 << 20)

#: Elements of one array; also bounds the product of its non-zero dimensions, so
#: a shape can never overflow a machine integer even when another dimension is 0.
MAX_ARRAY_ELEMENTS = 1 << 33

#: Dimensions of one array (numpy itself allows 64).
MAX_RANK = 32

#: Depth of nested lists and maps inside one section (type specs, kernel attributes).
MAX_NESTING = 64

#: Largest count or index a file may state (tags, field indices, list lengths).
MAX_INDEX = (1 << 31) - 1
