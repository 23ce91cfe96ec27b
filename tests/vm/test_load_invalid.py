"""The invalid corpus: files that decode but fail verification raise InvalidExecutableError
naming function and instruction (WebAssembly's assert_invalid). Each case mutates a valid file."""

import pytest

from tests.vm.executable_samples import (
    code_record,
    control_flow_executable,
    document_from,
    instruction_starts,
    kernel_executable,
    operand_position,
    sections_of,
)
from vm.errors import ExecutableLoadError, InvalidExecutableError, MalformedExecutableError
from vm.executable import Executable
from vm.isa import Opcode

BASE = control_flow_executable().save()[0]
KERNEL_BASE = kernel_executable().save()[0]


def edit(mutate, base=BASE):
    sections = sections_of(base)
    mutate(sections)
    return document_from(sections)


def set_word(function, pc, operand, value, base=BASE):
    def mutate(s):
        record = code_record(s, function)
        record["code"][operand_position(record, pc, operand)] = value

    return lambda: edit(mutate, base)


def drop_last_instruction(function):
    def mutate(s):
        record = code_record(s, function)
        del record["code"][instruction_starts(record)[-1] :]
        record["instruction_count"] -= 1

    return lambda: edit(mutate)


def rename(old, new):
    def mutate(s):
        names = s["global"]["functions"]
        names[names.index(old)] = new
        code_record(s, old)["name"] = new

    return lambda: edit(mutate)


def pick_size():
    return sections_of(BASE)["code"][1]["register_file_size"]


# Each case: (make the file, section, function, pc, message substring).
CASES = {
    "register = frame size": (
        set_word("pick", 2, "dst", pick_size()),
        "code",
        "pick",
        2,
        f"instruction 2 (Move): operand dst: register ${pick_size()} is outside the frame "
        f"(registers 0..{pick_size() - 1})",
    ),
    "negative register": (
        set_word("identity", 0, "result", -1),
        "code",
        "identity",
        0,
        "register $-1 is outside the frame",
    ),
    "jump to -1": (
        set_word("pick", 3, "offset", -4),
        "code",
        "pick",
        3,
        "instruction 3 (Goto): operand offset: jump target -1 is outside the function (0..5)",
    ),
    "jump to len(code)": (
        set_word("pick", 1, "false_offset", 5),
        "code",
        "pick",
        1,
        "instruction 1 (If): operand false_offset: jump target 6 is outside the function (0..5)",
    ),
    "jump offset 0": (
        set_word("pick", 3, "offset", 0),
        "code",
        "pick",
        3,
        "a jump offset of 0 would loop on itself forever",
    ),
    "const index = len(constants)": (
        set_word("main", 0, "const_index", 1),
        "code",
        "main",
        0,
        "instruction 0 (LoadConst): operand const_index: constant index 1 "
        "is outside the constant pool (0..0)",
    ),
    "func index = len(functions)": (
        set_word("main", 4, "func_index", 6),
        "code",
        "main",
        4,
        "function index 6 is outside the function table (0..5)",
    ),
    "prim index = len(primitives)": (
        set_word("main", 3, "prim_index", 1, KERNEL_BASE),
        "code",
        "main",
        3,
        "primitive index 1 is outside the primitive table (0..0)",
    ),
    "last ret dropped": (
        drop_last_instruction("first"),
        "code",
        "first",
        1,
        "the last instruction is GetField; a function must end with Ret, Goto or Fatal",
    ),
    "only instruction dropped": (
        drop_last_instruction("identity"),
        "code",
        "identity",
        None,
        "the function has no instructions",
    ),
    "duplicate function name": (
        rename("cons", "pick"),
        "global",
        None,
        None,
        "functions 1 and 3 are both named 'pick'",
    ),
    "function name not an identifier": (
        rename("cons", "cons list"),
        "global",
        None,
        None,
        "function 3: the name 'cons list' is not a valid identifier",
    ),
    "invoke arity mismatch": (
        lambda: edit(_pass_four_arguments),
        "code",
        "main",
        4,
        "instruction 4 (Invoke): 4 arguments passed to 'pick', which takes 3",
    ),
    "bad tag": (
        set_word("cons", 0, "tag", 3),
        "code",
        "cons",
        0,
        "instruction 0 (AllocADT): tag 3 is neither 0 (tuple) nor a known "
        "constructor (Cons=1, Nil=2)",
    ),
    "constructor field count": (
        lambda: edit(lambda s: s["global"]["constructors"][0].__setitem__(2, 3)),
        "code",
        "cons",
        0,
        "constructor Cons (tag 1) takes 3 fields, 2 given",
    ),
    "duplicate constructor tag": (
        lambda: edit(lambda s: s["global"]["constructors"][1].__setitem__(0, 1)),
        "global",
        None,
        None,
        "constructors Cons and Nil share the tag 1",
    ),
    "closure captures too much": (
        lambda: edit(_capture_three),
        "code",
        "main",
        1,
        "3 captured values for 'first', which takes only 2 parameters",
    ),
    "unknown dtype": (
        set_word("main", 1, "dtype_hint", "float128", KERNEL_BASE),
        "code",
        "main",
        1,
        "operand dtype_hint: unknown dtype 'float128'",
    ),
    "invoke_packed output count": (
        set_word("main", 3, "num_outputs", 2, KERNEL_BASE),
        "code",
        "main",
        3,
        "num_outputs is 2, but primitive 0 has 1 outputs",
    ),
    "immediate beyond int64": (
        set_word("pick", 0, "value", 2**64 - 1),
        "code",
        "pick",
        0,
        "immediate 18446744073709551615 does not fit in 64 bits",
    ),
    "invalid type spec": (
        lambda: edit(lambda s: code_record(s, "pick").__setitem__("ret_type", ["tensor", [2]])),
        "code",
        "pick",
        None,
        "the return type is invalid",
    ),
    "frame smaller than arity": (
        lambda: edit(lambda s: code_record(s, "pick").__setitem__("register_file_size", 2)),
        "code",
        "pick",
        None,
        "3 parameters do not fit in a frame of 2 registers",
    ),
    "read before write": (
        set_word("head", 0, "object", 3),
        "code",
        "head",
        0,
        "instruction 0 (GetTag): register $3 is read before it is written",
    ),
    "kernel description rejected": (
        lambda: edit(lambda s: s["kernel"][0].__setitem__("nodes", "none"), KERNEL_BASE),
        "kernel",
        None,
        None,
        "kernel section, primitive 0 ('vm_mod_add'): ",
    ),
    "description without outputs": (
        lambda: edit(lambda s: s["kernel"][0].pop("outputs"), KERNEL_BASE),
        "kernel",
        None,
        None,
        "kernel section, primitive 0 ('vm_mod_add'): the description has no 'outputs' list",
    ),
}


def _pass_four_arguments(sections):
    record = code_record(sections, "main")
    position = operand_position(record, 4, "args")
    count = record["code"][position]
    record["code"][position : position + 1 + count] = [
        count + 1, *record["code"][position + 1 : position + 1 + count], 0,
    ]  # fmt: skip


def _capture_three(sections):
    record = code_record(sections, "main")
    position = operand_position(record, 1, "captured")
    record["code"][position : position + 2] = [3, 0, 0, 1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_invalid_corpus(case):
    make, section, function, pc, message = CASES[case]
    data = make()
    with pytest.raises(InvalidExecutableError) as info:
        Executable.load_exec(data)
    err = info.value
    assert message in str(err), str(err)
    assert (err.section, err.function, err.pc) == (section, function, pc)
    assert isinstance(err, ExecutableLoadError) and not isinstance(err, MalformedExecutableError)


def test_invalid_files_still_decode():
    # The invalid corpus is "decodes, fails verification": decoding alone succeeds.
    from vm.executable_codec import decode

    for make, *_rest in CASES.values():
        decode(make())


def test_the_example_message_from_the_contract():
    data = set_word("pick", 1, "false_offset", 41)()
    with pytest.raises(InvalidExecutableError) as info:
        Executable.load_exec(data)
    assert str(info.value) == (
        "invalid executable: code section, function 'pick', instruction 1 (If): "
        "operand false_offset: jump target 42 is outside the function (0..5)"
    )
    assert Opcode.If.name in str(info.value)
