"""Loader robustness: truncations, byte flips and random bytes raise only ExecutableLoadError,
or load a program that still verifies; never another exception, a hang or a crash.

The oracle of Lua's calls.lua and of coverage-guided fuzzers, run deterministically and fast.
Every rejection must name what was wrong: the verifier's catch-all "could not be checked"
must never fire. The random corpora hold about 12,000 cases by default; set
``RELAYVM_FUZZ_SCALE=N`` to run N times as many (different ones), e.g.
``RELAYVM_FUZZ_SCALE=20 python -m pytest -q tests/vm/test_load_fuzz.py``.
"""

import os
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serialization.formats import EXECUTABLE_FORMAT
from serialization.framing import PREFIX_SIZE
from tests.vm.executable_samples import (
    ADD_DESCRIPTION,
    control_flow_executable,
    kernel_executable,
    raw_body,
    tiny_executable,
)
from vm.builder import ExecutableBuilder
from vm.errors import ExecutableLoadError, MalformedExecutableError
from vm.executable import Executable
from vm.executable_codec import encode
from vm.isa import Opcode
from vm.shape_funcs import shape_func_description
from vm.verify import verify

#: How many times the default number of random cases to run (an env var, for long runs).
SCALE = int(os.environ.get("RELAYVM_FUZZ_SCALE", "1"))


def dynamic_executable() -> Executable:
    """``main(x, y)`` = x + y on vectors of any length: a shape function computes the
    output's shape and size, then the kernel fills a tensor of that shape."""
    b = ExecutableBuilder()
    add = b.add_primitive("vm_mod_add", ADD_DESCRIPTION)
    shape = b.add_primitive("vm_mod_add_shape_func", shape_func_description(ADD_DESCRIPTION))
    vector = ("tensor", (-1,), "float32")
    f = b.function("main", ["x", "y"], [vector, vector], vector)
    sx, sy, size, st, out_shape, out_bytes, data, out = (f.reg() for _ in range(8))
    f.emit(Opcode.ShapeOf, 0, sx)
    f.emit(Opcode.ShapeOf, 1, sy)
    f.emit(Opcode.LoadConsti, 16, size)
    f.emit(Opcode.AllocStorage, size, 64, "int64", st)
    f.emit(Opcode.AllocTensor, st, 0, (1,), "int64", out_shape)
    f.emit(Opcode.AllocTensor, st, 8, (), "int64", out_bytes)
    f.emit(Opcode.InvokePacked, shape, (sx, sy, out_shape, out_bytes), 2)
    f.emit(Opcode.AllocStorage, out_bytes, 64, "float32", data)
    f.emit(Opcode.AllocTensorReg, data, 0, out_shape, "float32", out)
    f.emit(Opcode.InvokePacked, add, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)
    b.add_function(f)
    return b.build()


# Saved with the codec directly, so the corpora do not depend on save()'s return type.
TINY = encode(tiny_executable())
_MAJOR, _MINOR = EXECUTABLE_FORMAT.version
OLDER_VERSIONS = {struct.pack("<HH", _MAJOR, minor) for minor in range(_MINOR)}
CONTROL = encode(control_flow_executable())
KERNEL = encode(kernel_executable())
DYNAMIC = encode(dynamic_executable())


def load_or_error(data: bytes):
    """The oracle: load_exec raises only ExecutableLoadError, or gives a usable executable."""
    try:
        exe = Executable.load_exec(data)
    except ExecutableLoadError as err:
        text = str(err)
        assert text and "could not be checked" not in text, text
        return None
    # A mutation the loader accepted must give a program that verifies, prints and
    # saves back to a file that loads to the same thing.
    verify(exe)
    assert exe.bytecode.startswith("VM Function[0]") or not exe.functions
    resaved = encode(exe)
    assert encode(Executable.load_exec(resaved)) == resaved
    return exe


def header_length(data: bytes) -> int:
    """Bytes of the magic, the version and the whole header section."""
    return PREFIX_SIZE + 4 + len(raw_body(data)[0][1]) + 8


@pytest.mark.parametrize("data", [TINY, KERNEL, CONTROL], ids=["tiny", "kernel", "control"])
def test_every_truncation_prefix_is_malformed_and_says_truncated(data):
    for cut in range(len(data)):
        with pytest.raises(MalformedExecutableError, match="truncated"):
            Executable.load_exec(data[:cut])


def test_every_single_byte_change_of_magic_and_version_is_rejected():
    for position in range(PREFIX_SIZE):
        for value in range(256):
            if value == TINY[position]:
                continue
            mutated = bytearray(TINY)
            mutated[position] = value
            if bytes(mutated[8:12]) in OLDER_VERSIONS:
                # An older minor version of the same major one is still read.
                load_or_error(bytes(mutated))
                continue
            with pytest.raises(MalformedExecutableError):
                Executable.load_exec(bytes(mutated))


def test_every_single_byte_change_of_the_header_section_is_handled():
    end = header_length(TINY)
    assert TINY[PREFIX_SIZE:end].count(b"producer_version") == 1
    for position in range(PREFIX_SIZE, end):
        for value in range(256):
            if value == TINY[position]:
                continue
            mutated = bytearray(TINY)
            mutated[position] = value
            load_or_error(bytes(mutated))


@pytest.mark.parametrize(
    ("data", "seed"), [(CONTROL, 1), (KERNEL, 2), (TINY, 3)], ids=["control", "kernel", "tiny"]
)
def test_random_byte_changes_are_handled(data, seed):
    rng = random.Random(seed)
    outcomes = {"error": 0, "loaded": 0}
    for _ in range(1500 * SCALE):
        mutated = bytearray(data)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
            position = rng.randrange(PREFIX_SIZE, len(mutated))
            mutated[position] = rng.randrange(256)
        exe = load_or_error(bytes(mutated))
        outcomes["loaded" if exe is not None else "error"] += 1
    # Both outcomes occur, so the oracle is exercised on both sides.
    assert outcomes["error"] > 100 and outcomes["loaded"] > 0, outcomes


def test_random_insertions_and_deletions_are_handled():
    rng = random.Random(4)
    for _ in range(800 * SCALE):
        mutated = bytearray(CONTROL)
        position = rng.randrange(PREFIX_SIZE, len(mutated))
        if rng.random() < 0.5:
            del mutated[position : position + rng.randrange(1, 4)]
        else:
            mutated[position:position] = bytes(
                rng.randrange(256) for _ in range(rng.randrange(1, 4))
            )
        load_or_error(bytes(mutated))


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_after_a_valid_prefix_are_handled(tail):
    load_or_error(CONTROL[:PREFIX_SIZE] + tail)


@settings(max_examples=200 * SCALE, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_are_handled(data):
    load_or_error(data)


def _random_value(rng: random.Random):
    return rng.choice(
        [
            rng.randrange(-3, 12),
            rng.randrange(-(2**63), 2**64),
            True,
            1.0,
            "float32",
            "x",
            None,
            [],
            [rng.randrange(4)],
            {},
            {b"key": 1},
            {"op": "add", "args": [0, 1], "attrs": {}, "outputs": [["float32", 1]]},
            ["float32", rng.randrange(-1, 3)],
            b"",
        ]
    )


def _mutate_structure(
    sections: dict,
    rng: random.Random,
    names: tuple[str, ...] = ("global", "primitive", "kernel", "code"),
    descend: float = 0.7,
) -> None:
    """Replace one random leaf or list item anywhere in the decoded sections ``names``
    (deeper the larger ``descend``, the chance to go down into a container)."""
    target = rng.choice([sections[name] for name in names])
    # Walk down a random path, then replace what is there.
    for _ in range(10):
        if isinstance(target, dict) and target:
            key = rng.choice(sorted(target))
            child = target[key]
            if isinstance(child, (dict, list)) and child and rng.random() < descend:
                target = child
                continue
            target[key] = _random_value(rng)
            return
        if isinstance(target, list) and target:
            index = rng.randrange(len(target))
            child = target[index]
            if isinstance(child, (dict, list)) and child and rng.random() < descend:
                target = child
                continue
            if rng.random() < 0.15:
                del target[index]
            else:
                target[index] = _random_value(rng)
            return
        return


@pytest.mark.parametrize(
    ("data", "seed"),
    [(CONTROL, 5), (KERNEL, 6), (DYNAMIC, 7)],
    ids=["control", "kernel", "dynamic"],
)
def test_random_structural_changes_are_handled(data, seed):
    from tests.vm.executable_samples import document_from, sections_of

    rng = random.Random(seed)
    outcomes = {"error": 0, "loaded": 0}
    for _ in range(1500 * SCALE):
        sections = sections_of(data)
        for _ in range(rng.choice((1, 1, 2))):
            _mutate_structure(sections, rng)
        try:
            mutated = document_from(sections)
        except (TypeError, ValueError):
            continue  # not writable (e.g. an int beyond 64 bits); nothing to load
        exe = load_or_error(mutated)
        outcomes["loaded" if exe is not None else "error"] += 1
    assert outcomes["error"] > 300 and outcomes["loaded"] > 10, outcomes


@pytest.mark.parametrize(("data", "seed"), [(KERNEL, 8), (DYNAMIC, 9)], ids=["kernel", "dynamic"])
def test_random_changes_deep_inside_kernel_descriptions_are_handled(data, seed):
    # Descriptions are nested several levels deep (nodes, attributes, a shape function's
    # kernel); the general walk rarely reaches their leaves.
    from tests.vm.executable_samples import document_from, sections_of

    rng = random.Random(seed)
    outcomes = {"error": 0, "loaded": 0}
    for _ in range(1000 * SCALE):
        sections = sections_of(data)
        for _ in range(rng.choice((1, 1, 2))):
            _mutate_structure(sections, rng, ("kernel",), descend=0.8)
        try:
            mutated = document_from(sections)
        except (TypeError, ValueError):
            continue
        exe = load_or_error(mutated)
        outcomes["loaded" if exe is not None else "error"] += 1
    assert outcomes["error"] > 300 and outcomes["loaded"] > 5, outcomes
