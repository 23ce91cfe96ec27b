"""save -> load_exec gives back equal sections, and saving is deterministic in any process."""

import hashlib
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from serialization.formats import EXECUTABLE_FORMAT
from serialization.framing import read_document
from tests.vm.executable_samples import (
    control_flow_executable,
    every_opcode_executable,
    kernel_executable,
    tiny_executable,
)
from vm.builder import ExecutableBuilder
from vm.executable import Executable
from vm.isa import Opcode

ROOT = pathlib.Path(__file__).resolve().parents[2]


def assert_same_sections(a: Executable, b: Executable) -> None:
    assert a.globals == b.globals
    assert a.functions == b.functions
    assert a.primitives == b.primitives
    assert a.constructors == b.constructors
    assert len(a.constant_values) == len(b.constant_values)
    for x, y in zip(a.constant_values, b.constant_values):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize(
    "make",
    [tiny_executable, control_flow_executable, kernel_executable, every_opcode_executable],
    ids=lambda f: f.__name__,
)
def test_save_then_load_gives_equal_sections(make):
    exe = make()
    data = exe.save()[0]
    loaded = Executable.load_exec(data)
    assert_same_sections(exe, loaded)
    assert loaded.save()[0] == data
    assert loaded.bytecode == exe.bytecode
    assert loaded.stats == exe.stats


def test_loaded_instructions_use_opcode_enums_and_tuples():
    loaded = Executable.load_exec(control_flow_executable().save()[0])
    for function in loaded.functions:
        for ins in function.instructions:
            assert isinstance(ins.opcode, Opcode)
            assert isinstance(ins.operands, tuple)


def test_constants_of_every_dtype_and_shape_round_trip():
    b = ExecutableBuilder()
    f = b.function("main", [], [], ("tensor", (), "float32"))
    last = None
    rng = np.random.default_rng(7)
    for dtype in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                  "uint64", "float16", "float32", "float64"):  # fmt: skip
        for shape in ((), (0,), (3,), (2, 0, 4), (2, 3, 1)):
            array = (rng.standard_normal(shape) * 9).astype(dtype)
            last = f.reg()
            f.emit(Opcode.LoadConst, b.add_constant(array), last)
    f.emit(Opcode.Ret, last)
    b.add_function(f)
    exe = b.build()
    loaded = Executable.load_exec(exe.save()[0])
    assert_same_sections(exe, loaded)
    assert all(not c.flags.writeable for c in loaded.constant_values)


def test_the_file_holds_the_documented_sections():
    document = read_document(EXECUTABLE_FORMAT, control_flow_executable().save()[0])
    assert list(document.sections) == ["global", "constant", "primitive", "kernel", "code"]
    assert document.sections["global"]["functions"] == [
        "identity", "pick", "first", "cons", "head", "main",
    ]  # fmt: skip
    assert document.sections["global"]["constructors"] == [
        [1, "Cons", 2, "List"],
        [2, "Nil", 0, "List"],
    ]
    identity = document.sections["code"][0]
    assert identity == {
        "name": "identity",
        "params": ["x"],
        "param_types": [["tensor", [2], "float32"]],
        "ret_type": ["tensor", [2], "float32"],
        "register_file_size": 1,
        "instruction_count": 1,
        "code": [int(Opcode.Ret), 0],
    }
    assert document.metadata["producer"] == "relayvm"


def test_register_lists_are_flattened_as_length_then_items():
    document = read_document(EXECUTABLE_FORMAT, kernel_executable().save()[0])
    code = document.sections["code"][0]["code"]
    invoke_packed = [int(Opcode.InvokePacked), 0, 3, 0, 1, 4, 1]
    assert any(code[i : i + 7] == invoke_packed for i in range(len(code)))


def test_saving_twice_gives_identical_bytes():
    assert control_flow_executable().save()[0] == control_flow_executable().save()[0]


_BUILD_AND_HASH = """
import hashlib, sys
sys.path.insert(0, {root!r})
from tests.vm.executable_samples import control_flow_builder, kernel_builder
from vm.executable import Executable
a = control_flow_builder().build(verify=False)
b = kernel_builder().build(verify=False)
both = Executable(a.functions, a.constant_values, b.primitives, a.constructors)
print(hashlib.sha256(a.save()[0] + b.save()[0] + both.save()[0]).hexdigest())
"""


def test_bytes_are_identical_across_processes_with_different_hash_seeds():
    # Built without verification so the check does not depend on the kernel library;
    # verification does not change what is saved.
    digests = set()
    for seed in ("1", "2", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", _BUILD_AND_HASH.format(root=str(ROOT))],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        digests.add(out.stdout.strip())
    a = control_flow_executable().save()[0]
    b = kernel_executable().save()[0]
    exe_a = control_flow_executable()
    both = Executable(exe_a.functions, exe_a.constant_values, kernel_executable().primitives,
                      exe_a.constructors)  # fmt: skip
    local = hashlib.sha256(a + b + both.save()[0]).hexdigest()
    assert digests == {local}


# ---- property: random valid programs round trip ---------------------------------------------


_DTYPES = ("bool", "int8", "int32", "int64", "uint16", "float16", "float32", "float64")


@st.composite
def programs(draw):
    b = ExecutableBuilder()
    constant_count = draw(st.integers(0, 4))
    constants = []
    for _ in range(constant_count):
        dtype = draw(st.sampled_from(_DTYPES))
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        seed = draw(st.integers(0, 2**16))
        values = np.random.default_rng(seed).standard_normal(shape) * 100
        constants.append(b.add_constant(values.astype(dtype)))
    names = [f"f{i}" for i in range(draw(st.integers(1, 4)))]
    for name in names:
        b.declare(name)
    for name in names:
        arity = draw(st.integers(0, 3))
        f = b.function(name, [f"p{i}" for i in range(arity)], [("any",)] * arity, ("any",))
        defined = list(range(arity))
        for _ in range(draw(st.integers(0, 8))):
            choice = draw(st.integers(0, 4 if defined else 1))
            dst = f.reg()
            if choice == 0:
                f.emit(Opcode.LoadConsti, draw(st.integers(-(2**63), 2**63 - 1)), dst)
            elif choice == 1 and constants:
                f.emit(Opcode.LoadConst, draw(st.sampled_from(constants)), dst)
            elif choice == 1:
                f.emit(Opcode.LoadConsti, 0, dst)
            elif choice == 2:
                f.emit(Opcode.Move, draw(st.sampled_from(defined)), dst)
            elif choice == 3:
                fields = draw(st.lists(st.sampled_from(defined), max_size=3))
                f.emit(Opcode.AllocADT, 0, tuple(fields), dst)
            else:
                f.emit(
                    Opcode.GetField, draw(st.sampled_from(defined)), draw(st.integers(0, 5)), dst
                )
            defined.append(dst)
        if defined:
            f.emit(Opcode.Ret, draw(st.sampled_from(defined)))
        else:
            f.emit(Opcode.Fatal)
        b.add_function(f)
    return b.build()


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_valid_programs_round_trip_byte_for_byte(exe):
    data = exe.save()[0]
    loaded = Executable.load_exec(data)
    assert_same_sections(exe, loaded)
    assert loaded.save()[0] == data
