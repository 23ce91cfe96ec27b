"""The malformed corpus: files that do not decode raise MalformedExecutableError naming the
section (WebAssembly's assert_malformed). Each case is a small mutator of a valid file."""

import struct

import msgpack
import numpy as np
import pytest

from serialization.codec import pack
from serialization.limits import MAX_REGISTERS
from serialization.ndarray import NDARRAY_EXT_CODE
from tests.vm.executable_samples import (
    code_record,
    control_flow_executable,
    document_from,
    from_raw_body,
    instruction_starts,
    kernel_executable,
    operand_position,
    raw_body,
    sections_of,
)
from vm.errors import ExecutableLoadError, MalformedExecutableError
from vm.executable import Executable

BASE = control_flow_executable().save()[0]
KERNEL_BASE = kernel_executable().save()[0]


def edit(mutate, base=BASE):
    """A file whose decoded sections were changed by ``mutate(sections)``."""
    sections = sections_of(base)
    mutate(sections)
    return document_from(sections)


def edit_raw(mutate, base=BASE):
    """A file whose [name, bytes] section list was changed by ``mutate(body)``."""
    body = raw_body(base)
    mutate(body)
    return from_raw_body(base, body)


def array_ext(dtype, shape, raw):
    return msgpack.ExtType(NDARRAY_EXT_CODE, pack([dtype, shape, raw]))


def set_word(function, pc, operand, value):
    def mutate(s):
        record = code_record(s, function)
        record["code"][operand_position(record, pc, operand)] = value

    return mutate


def set_record(function, key, value):
    def mutate(s):
        code_record(s, function)[key] = value

    return mutate


def nested(depth):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


CASES = {
    # framing and version
    "bad magic": (lambda: b"\x7fELF" + BASE[4:], None, "not a relayvm executable"),
    "text mode": (lambda: BASE.replace(b"\r\n", b"\n", 1), None, "copied in text mode"),
    "newer major": (
        lambda: BASE[:8] + struct.pack("<HH", 2, 0) + BASE[12:],
        "header",
        "has format version 2.0 (written by relayvm",
    ),
    "newer minor": (
        lambda: BASE[:8] + struct.pack("<HH", 1, 3) + BASE[12:],
        "header",
        "reads format 1.0 to 1.2; upgrade relayvm",
    ),
    "trailing byte": (lambda: BASE + b"\x00", None, "unexpected bytes after the end"),
    "one byte short": (lambda: BASE[:-1], None, "truncated"),
    "empty": (lambda: b"", None, "truncated"),
    "missing section": (lambda: edit_raw(lambda b: b.pop()), None, "has the sections"),
    "nesting depth 5000": (
        lambda: edit_raw(lambda b: b.__setitem__(5, ["code", b"\x91" * 5000 + b"\x90"])),
        "code",
        "nested too deeply",
    ),
    "nesting depth 100": (
        lambda: edit(set_record("main", "ret_type", nested(100))),
        "code",
        "nested deeper than 64",
    ),
    "invalid utf-8": (
        lambda: edit_raw(lambda b: b.__setitem__(3, ["primitive", b"\x91\xa2\xff\xfe"])),
        "primitive",
        "not valid UTF-8",
    ),
    "duplicate map key": (
        lambda: edit_raw(
            lambda b: b.__setitem__(1, ["global", b"\x82\xa9functions\x90\xa9functions\x90"])
        ),
        "global",
        "the key 'functions' twice",
    ),
    # global section
    "global not a map": (
        lambda: edit(lambda s: s.__setitem__("global", [])),
        "global",
        "must be a map",
    ),
    "global missing key": (
        lambda: edit(lambda s: s["global"].pop("constructors")),
        "global",
        "missing keys ['constructors']",
    ),
    "global unknown key": (
        lambda: edit(lambda s: s["global"].__setitem__("entry", "main")),
        "global",
        "unknown keys ['entry']",
    ),
    "bytes map key": (
        lambda: edit(lambda s: s["global"].__setitem__(b"raw", 1)),
        "global",
        "unknown keys [b'raw']",
    ),
    "function name not a string": (
        lambda: edit(lambda s: s["global"]["functions"].__setitem__(0, 7)),
        "global",
        "function 0: the name must be a string, found int",
    ),
    "constructor entry shape": (
        lambda: edit(lambda s: s["global"]["constructors"].__setitem__(0, [1, "Cons", 2])),
        "global",
        "constructor 0 must be [tag, name, arity, type_name] (format 1.0 and 1.1) or [tag, "
        "name, arity, type_name, type_arity, field_types], found [1, 'Cons', 2]",
    ),
    "constructor tag is bool": (
        lambda: edit(lambda s: s["global"]["constructors"].__setitem__(0, [True, "Cons", 2, "L"])),
        "global",
        "constructor 0 must be [tag, name, arity, type_name] (format 1.0 and 1.1) or [tag, "
        "name, arity, type_name, type_arity, field_types], found [True, 'Cons', 2, 'L']",
    ),
    # constant section
    "dtype |O": (
        lambda: edit(lambda s: s.__setitem__("constant", [array_ext("|O", [1], b"\0" * 8)])),
        "constant",
        "array dtype '|O' is not allowed",
    ),
    "shape product overflow": (
        lambda: edit(
            lambda s: s.__setitem__("constant", [array_ext("<f4", [2**62, 2**62, 0], b"")])
        ),
        "constant",
        "elements (MAX_ARRAY_ELEMENTS)",
    ),
    "array bytes one short": (
        lambda: edit(lambda s: s.__setitem__("constant", [array_ext("<f4", [2], b"\0" * 7)])),
        "constant",
        "needs 8 bytes of data, found 7",
    ),
    "array bytes one long": (
        lambda: edit(lambda s: s.__setitem__("constant", [array_ext("<f4", [2], b"\0" * 9)])),
        "constant",
        "needs 8 bytes of data, found 9",
    ),
    "constant not an array": (
        lambda: edit(lambda s: s.__setitem__("constant", [3])),
        "constant",
        "constant 0 must be an array, found int",
    ),
    "unknown extension code": (
        lambda: edit(lambda s: s.__setitem__("constant", [msgpack.ExtType(9, b"")])),
        "constant",
        "unknown msgpack extension type code 9",
    ),
    # primitive and kernel sections
    "kernel count mismatch": (
        lambda: edit(lambda s: s["kernel"].append({}), KERNEL_BASE),
        "kernel",
        "2 kernel descriptions for 1 primitives",
    ),
    "primitive name not a string": (
        lambda: edit(lambda s: s["primitive"].__setitem__(0, 1), KERNEL_BASE),
        "primitive",
        "primitive 0: the name must be a string, found int",
    ),
    "description not a map": (
        lambda: edit(lambda s: s["kernel"].__setitem__(0, [1]), KERNEL_BASE),
        "kernel",
        "a kernel description must be a dict",
    ),
    "description holds bytes": (
        lambda: edit(lambda s: s["kernel"][0].__setitem__("blob", b"\x00"), KERNEL_BASE),
        "kernel",
        "found bytes",
    ),
    "extension value in kernel section": (
        lambda: edit(
            lambda s: s["kernel"][0].__setitem__("x", msgpack.ExtType(NDARRAY_EXT_CODE, b"")),
            KERNEL_BASE,
        ),
        "kernel",
        "unexpected msgpack extension value",
    ),
    # code section
    "function count mismatch": (
        lambda: edit(lambda s: s["code"].pop()),
        "code",
        "5 functions, but the global section names 6",
    ),
    "function name mismatch": (
        lambda: edit(set_record("main", "name", "entry")),
        "code",
        "function 5 is named 'entry' here but 'main' in the global section",
    ),
    "function record missing key": (
        lambda: edit(lambda s: code_record(s, "main").pop("ret_type")),
        "code",
        "missing keys ['ret_type']",
    ),
    "param types count": (
        lambda: edit(set_record("pick", "param_types", [])),
        "code",
        "function 'pick': the parameter types must be a list of one type per parameter (3), "
        "found 0 types",
    ),
    "param name not a string": (
        lambda: edit(set_record("pick", "params", ["c", 1, "b"])),
        "code",
        "the parameter names must be a list of strings, found ['c', 1, 'b']",
    ),
    "register file too large": (
        lambda: edit(set_record("main", "register_file_size", MAX_REGISTERS + 1)),
        "code",
        f"register file size must be an int from 0 to MAX_REGISTERS = {MAX_REGISTERS}",
    ),
    "register file size negative": (
        lambda: edit(set_record("main", "register_file_size", -1)),
        "code",
        "found -1",
    ),
    "instruction count too small": (
        lambda: edit(set_record("pick", "instruction_count", 5)),
        "code",
        "function 'pick': more code than the declared 5 instructions",
    ),
    "instruction count too large": (
        lambda: edit(set_record("pick", "instruction_count", 7)),
        "code",
        "function 'pick': 6 instructions, but 7 were declared",
    ),
    "unknown opcode 255": (
        lambda: edit(lambda s: code_record(s, "pick")["code"].__setitem__(0, 255)),
        "code",
        "function 'pick', instruction 0: unknown opcode 255",
    ),
    "opcode 19 (unassigned)": (
        lambda: edit(lambda s: code_record(s, "identity")["code"].__setitem__(0, 19)),
        "code",
        "unknown opcode 19",
    ),
    "operand of the wrong type": (
        lambda: edit(set_word("pick", 2, "dst", "4")),
        "code",
        "function 'pick', instruction 2 (Move): operand dst must be an int, found str",
    ),
    "operand is a float": (
        lambda: edit(set_word("pick", 2, "src", 1.0)),
        "code",
        "operand src must be an int, found float",
    ),
    "register list longer than the code": (
        lambda: edit(set_word("first", 0, "fields", 99)),
        "code",
        "operand fields declares 99 items but only",
    ),
    "register list holds a string": (
        lambda: edit(
            lambda s: code_record(s, "first")["code"].__setitem__(
                operand_position(code_record(s, "first"), 0, "fields") + 1, "$0"
            )
        ),
        "code",
        "operand fields must hold ints, found '$0'",
    ),
    "dtype is not a string": (
        lambda: edit(set_word("main", 1, "dtype_hint", 5), KERNEL_BASE),
        "code",
        "operand dtype_hint must be a dtype name, found 5",
    ),
    "code ends inside an instruction": (
        lambda: edit(lambda s: code_record(s, "pick")["code"].pop()),
        "code",
        "instruction 5 (Ret): the code ends before operand result",
    ),
    "code not a list": (
        lambda: edit(set_record("pick", "code", b"\x01")),
        "code",
        "the code must be a list, found bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_corpus(case):
    make, section, message = CASES[case]
    data = make()
    with pytest.raises(MalformedExecutableError) as info:
        Executable.load_exec(data)
    err = info.value
    assert message in str(err), str(err)
    assert err.section == section
    assert isinstance(err, ExecutableLoadError) and isinstance(err, ValueError)


def test_corpus_mutators_start_from_a_loadable_file():
    # Guards against a corpus that fails for the wrong reason: the unmutated round trip loads.
    assert Executable.load_exec(edit(lambda s: None)).save()[0] == BASE
    assert Executable.load_exec(edit(lambda s: None, KERNEL_BASE)).save()[0] == KERNEL_BASE
    assert Executable.load_exec(edit_raw(lambda b: None)).save()[0] == BASE


def test_malformed_messages_carry_no_library_internals():
    for case, (make, _, _) in sorted(CASES.items()):
        with pytest.raises(MalformedExecutableError) as info:
            Executable.load_exec(make())
        text = str(info.value)
        for internal in ("msgpack.", "Traceback", "numpy.", "max_bin_len", "unpackb"):
            assert internal not in text, (case, text)


def test_instruction_starts_helper_matches_the_decoder():
    sections = sections_of(BASE)
    record = code_record(sections, "pick")
    assert len(instruction_starts(record)) == record["instruction_count"]
    assert np.all(np.diff(instruction_starts(record)) > 0)
