"""The verifier: valid programs pass; each broken rule raises InvalidExecutableError naming
section, function and instruction (the WebAssembly suite's "invalid" group, in memory)."""

import numpy as np
import pytest

from serialization.limits import MAX_REGISTERS
from tests.vm.executable_samples import (
    ADD_DESCRIPTION,
    F32x2,
    control_flow_executable,
    every_opcode_executable,
    kernel_executable,
)
from vm.errors import InvalidExecutableError
from vm.executable import Executable
from vm.isa import OPCODES, Opcode
from vm.program import ConstructorInfo, Instruction, Primitive, VMFunction
from vm.verify import verify

I = Instruction
O = Opcode
LIST = (ConstructorInfo(1, "Cons", 2, "List"), ConstructorInfo(2, "Nil", 0, "List"))


def fn(name, code, size=4, params=("x",), param_types=None, ret_type=F32x2):
    types = param_types if param_types is not None else (F32x2,) * len(params)
    return VMFunction(name, tuple(params), tuple(types), ret_type, size, tuple(code))


def exe_of(*functions, constants=(), primitives=(), constructors=LIST):
    return Executable(functions, constants, primitives, constructors)


def single(code, **kwargs):
    return exe_of(fn("main", code, **kwargs), constants=(np.zeros(2, "float32"),),
                  primitives=(Primitive("vm_mod_add", ADD_DESCRIPTION),))  # fmt: skip


def callee(arity=2):
    return fn("callee", [I(O.Ret, (0,))], size=arity, params=[f"p{i}" for i in range(arity)])


def expect_invalid(exe, message, section="code", function="main", pc=None):
    with pytest.raises(InvalidExecutableError) as info:
        verify(exe)
    err = info.value
    assert message in str(err), str(err)
    assert str(err).startswith("invalid executable: ")
    assert err.section == section
    if section == "code":
        assert err.function == function
    assert err.pc == pc
    return err


# ---- returns ------------------------------------------------------------------------------


def test_the_sample_programs_verify():
    verify(control_flow_executable())
    verify(kernel_executable())


def test_an_executable_without_main_verifies():
    verify(exe_of(fn("helper", [I(O.Ret, (0,))])))


def test_an_empty_executable_verifies():
    verify(Executable((), (), ()))


def test_every_opcode_can_appear_in_a_valid_program():
    exe = every_opcode_executable()
    assert {ins.opcode for ins in exe.functions[0].instructions} == set(OPCODES)
    verify(exe)


# ---- invalid: instructions by operand kind ------------------------------------------------


@pytest.mark.parametrize(
    ("code", "size", "message", "pc"),
    [
        ([I(255, (0,)), I(O.Ret, (0,))], 4, "unknown opcode 255", 0),
        ([I(True, ()), I(O.Ret, (0,))], 4, "unknown opcode True", 0),
        (
            [I(O.Move, (0,)), I(O.Ret, (0,))],
            4,
            "(Move): 2 operands expected (src, dst), found 1",
            0,
        ),
        ([I(O.Ret, [0])], 4, "(Ret): 1 operands expected (result), found 1", 0),
        ([I(O.Move, (0, True)), I(O.Ret, (0,))], 4, "operand dst: must be an int, found bool", 0),
        ([I(O.Move, (np.int64(0), 1)), I(O.Ret, (0,))], 4, "found int64", 0),
        (
            [I(O.Ret, (4,))],
            4,
            "(Ret): operand result: register $4 is outside the frame (registers 0..3)",
            0,
        ),
        ([I(O.Move, (0, 4)), I(O.Ret, (0,))], 4, "operand dst: register $4 is outside", 0),
        ([I(O.Move, (-1, 1)), I(O.Ret, (0,))], 4, "register $-1 is outside", 0),
        (
            [I(O.AllocADT, (0, (0, 9), 1)), I(O.Ret, (1,))],
            4,
            "operand fields: register $9 is outside the frame",
            0,
        ),
        ([I(O.AllocADT, (0, [0], 1)), I(O.Ret, (1,))], 4, "must be a tuple of ints, found list", 0),
        (
            [I(O.LoadConst, (1, 1)), I(O.Ret, (1,))],
            4,
            "constant index 1 is outside the constant pool (0..0)",
            0,
        ),
        (
            [I(O.Invoke, (1, (0,), 1)), I(O.Ret, (1,))],
            4,
            "function index 1 is outside the function table (0..0)",
            0,
        ),
        (
            [I(O.InvokePacked, (1, (0, 0, 0), 1)), I(O.Ret, (0,))],
            4,
            "primitive index 1 is outside the primitive table (0..0)",
            0,
        ),
        (
            [I(O.Goto, (-1,))],
            4,
            "(Goto): operand offset: jump target -1 is outside the function (0..0)",
            0,
        ),
        (
            [I(O.LoadConsti, (1, 1)), I(O.If, (1, 1, 1, 2)), I(O.Ret, (0,))],
            4,
            "(If): operand false_offset: jump target 3 is outside the function (0..2)",
            1,
        ),
        ([I(O.Goto, (0,))], 4, "a jump offset of 0 would loop on itself forever", 0),
        ([I(O.LoadConsti, (1 << 63, 1)), I(O.Ret, (1,))], 4, "does not fit in 64 bits", 0),
        ([I(O.AllocADT, (-1, (), 1)), I(O.Ret, (1,))], 4, "tag -1 must be from 0", 0),
        (
            [I(O.LoadConsti, (8, 1)), I(O.AllocStorage, (1, 64, "float8", 2)), I(O.Ret, (2,))],
            4,
            "unknown dtype 'float8'",
            1,
        ),
        (
            [
                I(O.LoadConsti, (8, 1)),
                I(O.AllocStorage, (1, 64, "float32", 2)),
                I(O.AllocTensor, (2, 0, (2, -1), "float32", 3)),
                I(O.Ret, (3,)),
            ],
            4,
            "dimension -1 must be a non-negative int",
            2,
        ),
        (
            [I(O.LoadConsti, (8, 1)), I(O.AllocStorage, (1, 3, "float32", 2)), I(O.Ret, (2,))],
            4,
            "alignment 3 must be a positive power of two",
            1,
        ),
        (
            [
                I(O.LoadConsti, (8, 1)),
                I(O.AllocStorage, (1, 64, "float32", 2)),
                I(O.AllocTensor, (2, -8, (2,), "float32", 3)),
                I(O.Ret, (3,)),
            ],
            4,
            "operand offset is -8; it must be from 0",
            2,
        ),
        (
            [I(O.AllocADT, (0, (0,), 1)), I(O.GetField, (1, -1, 2)), I(O.Ret, (2,))],
            4,
            "operand index is -1",
            1,
        ),
        (
            [I(O.Move, (0, 1))],
            4,
            "the last instruction is Move; a function must end with Ret, Goto or Fatal",
            0,
        ),
        ([I(O.LoadConsti, (1, 1)), I(O.If, (1, 1, -1, -1))], 4, "the last instruction is If", 1),
        (["ret"], 4, "'ret' is not an Instruction", 0),
    ],
)
def test_invalid_instructions(code, size, message, pc):
    expect_invalid(single(code, size=size), message, pc=pc)


def test_an_empty_function_is_invalid():
    expect_invalid(single([]), "the function has no instructions")


def test_a_frame_smaller_than_the_parameters_is_invalid():
    expect_invalid(single([I(O.Ret, (0,))], size=1, params=("a", "b")),
                   "2 parameters do not fit in a frame of 1 registers")  # fmt: skip


def test_a_frame_larger_than_the_cap_is_invalid():
    expect_invalid(single([I(O.Ret, (0,))], size=MAX_REGISTERS + 1), "MAX_REGISTERS")


def test_a_frame_size_that_is_not_an_int_is_invalid():
    expect_invalid(single([I(O.Ret, (0,))], size=4.0), "register file size 4.0 must be an int")


# ---- invalid: cross-checks against other tables ---------------------------------------------


def test_invoke_argument_count_must_match_the_callee_arity():
    main = fn("main", [I(O.Invoke, (1, (0,), 1)), I(O.Ret, (1,))])
    expect_invalid(exe_of(main, callee(2)),
                   "(Invoke): 1 arguments passed to 'callee', which takes 2", pc=0)  # fmt: skip


def test_a_closure_cannot_capture_more_than_the_callee_takes():
    main = fn("main", [I(O.AllocClosure, (1, (0, 0, 0), 1)), I(O.Ret, (1,))])
    expect_invalid(exe_of(main, callee(2)), "3 captured values for 'callee'", pc=0)
    ok = fn("main", [I(O.AllocClosure, (1, (0, 0), 1)), I(O.Ret, (1,))])
    verify(exe_of(ok, callee(2)))


def test_alloc_adt_needs_a_known_tag_with_the_right_field_count():
    unknown = fn("main", [I(O.AllocADT, (7, (0,), 1)), I(O.Ret, (1,))])
    expect_invalid(exe_of(unknown), "tag 7 is neither 0 (tuple) nor a known constructor "
                   "(Cons=1, Nil=2)", pc=0)  # fmt: skip
    wrong = fn("main", [I(O.AllocADT, (1, (0,), 1)), I(O.Ret, (1,))])
    expect_invalid(exe_of(wrong), "constructor Cons (tag 1) takes 2 fields, 1 given", pc=0)
    tuple_ok = fn("main", [I(O.AllocADT, (0, (0, 0, 0), 1)), I(O.Ret, (1,))])
    verify(exe_of(tuple_ok))


def test_invoke_packed_must_match_the_kernel_signature():
    expect_invalid(single([I(O.InvokePacked, (0, (0, 0), 1)), I(O.Ret, (0,))]),
                   "2 registers passed to primitive 0, which takes 2 inputs and 1 outputs",
                   pc=0)  # fmt: skip
    expect_invalid(single([I(O.InvokePacked, (0, (0, 0, 0), 2)), I(O.Ret, (0,))]),
                   "num_outputs is 2, but primitive 0 has 1 outputs", pc=0)  # fmt: skip


# ---- invalid: signatures and tables ---------------------------------------------------------


def test_function_names_must_be_unique():
    err = expect_invalid(exe_of(callee(1), callee(1)),
                         "functions 0 and 1 are both named 'callee'", section="global")  # fmt: skip
    assert err.function is None


@pytest.mark.parametrize("name", ["", "two words", "1st", "a-b", 5])
def test_function_names_must_be_identifiers(name):
    bad = fn(name, [I(O.Ret, (0,))])
    expect_invalid(exe_of(bad), "is not a valid identifier", section="global")


@pytest.mark.parametrize(
    ("constructors", "message"),
    [
        ((ConstructorInfo(0, "Zero", 0, "T"),), "tag 0 must be an int from 1"),
        (
            (ConstructorInfo(1, "A", 0, "T"), ConstructorInfo(1, "B", 0, "T")),
            "constructors A and B share the tag 1",
        ),
        ((ConstructorInfo(1, "", 0, "T"),), "the name must be a non-empty string"),
        ((ConstructorInfo(1, "A", -1, "T"),), "arity -1 must be a non-negative int"),
        ((ConstructorInfo(1, "A", 0, 3),), "the type name must be a non-empty string"),
        ((ConstructorInfo(1 << 40, "A", 0, "T"),), "must be an int from 1 to 2147483647"),
    ],
)
def test_constructor_tables_are_checked(constructors, message):
    exe = exe_of(callee(1), constructors=constructors)
    expect_invalid(exe, message, section="global")


@pytest.mark.parametrize(
    ("param_types", "ret_type", "message"),
    [
        ((F32x2, F32x2), F32x2, "1 parameters need 1 parameter types"),
        ((("tensor", (2,), "float8"),), F32x2, "the type of parameter 0 ('x') is invalid"),
        ((("tensor", (-2,), "float32"),), F32x2, "dimensions that are not ints >= -1"),
        ((("tuple", "x"),), F32x2, "is not ('tuple', (spec, ...))"),
        ((("adt",),), F32x2, "is not ('adt', type_name)"),
        ((("func", 1),), F32x2, "is not ('func',)"),
        ((("record",),), F32x2, "unknown type kind 'record'"),
        ((F32x2,), "tensor", "the return type is invalid"),
        ((F32x2,), (), "the return type is invalid"),
    ],
)
def test_type_specs_are_checked(param_types, ret_type, message):
    bad = VMFunction("main", ("x",), param_types, ret_type, 2, (I(O.Ret, (0,)),))
    expect_invalid(exe_of(bad), message)


def test_valid_type_specs_of_every_kind_pass():
    spec = ("tuple", (("tensor", (-1, 3), "int64"), ("adt", "List"), ("func",), ("any",),
                      ("tuple", ())))  # fmt: skip
    verify(exe_of(VMFunction("main", ("x",), (spec,), spec, 1, (I(O.Ret, (0,)),))))


def test_primitive_names_must_be_unique_and_non_empty():
    twice = (Primitive("k", ADD_DESCRIPTION), Primitive("k", ADD_DESCRIPTION))
    expect_invalid(exe_of(callee(1), primitives=twice), "primitives 0 and 1 are both named 'k'",
                   section="primitive")  # fmt: skip
    expect_invalid(exe_of(callee(1), primitives=(Primitive("", ADD_DESCRIPTION),)),
                   "the name must be a non-empty string", section="primitive")  # fmt: skip


def test_a_description_without_inputs_and_outputs_is_invalid():
    exe = exe_of(callee(1), primitives=(Primitive("k", {"nodes": []}),))
    expect_invalid(exe, "primitive 0 ('k'): the description has no 'inputs' list",
                   section="kernel")  # fmt: skip


PAIR = "must be a [dtype, ndim] pair (a string and an int), found"


@pytest.mark.parametrize("kind", ["kernel", "shape function"])
@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("inputs", 1, "'inputs' must be a list of [dtype, ndim] pairs, found 1"),
        ("inputs", [1.0], f"inputs[0] {PAIR} 1.0"),
        ("outputs", [11], f"outputs[0] {PAIR} 11"),
        ("outputs", [["int64", 1, 2]], f"outputs[0] {PAIR} ['int64', 1, 2]"),
        ("inputs", [["int64", True]], f"inputs[0] {PAIR} ['int64', True]"),
        ("inputs", [None], f"inputs[0] {PAIR} None"),
        ("outputs", [["float32", 1], [1, "int64"]], f"outputs[1] {PAIR} [1, 'int64']"),
    ],
    ids=["not-a-list", "float", "int", "triple", "bool-ndim", "none", "swapped"],
)
def test_a_signature_that_is_not_dtype_ndim_pairs_is_named_precisely(kind, key, value, message):
    # Shape functions once failed here with "could not be checked (TypeError: 'int' object
    # is not iterable)" (issue 13, item 7).
    from vm.shape_funcs import shape_func_description

    description = dict(ADD_DESCRIPTION)
    if kind == "shape function":
        description = shape_func_description(ADD_DESCRIPTION)
    description[key] = value
    exe = exe_of(callee(1), primitives=(Primitive("k", description),))
    err = expect_invalid(exe, f"kernel section, primitive 0 ('k'): {message}", section="kernel")
    assert "could not be checked" not in str(err)


def test_descriptions_are_checked_by_the_kernel_library():
    broken = dict(ADD_DESCRIPTION, nodes="not a list of nodes")
    exe = exe_of(callee(1), primitives=(Primitive("vm_mod_add", broken),))
    err = expect_invalid(exe, "kernel section, primitive 0 ('vm_mod_add'): ", section="kernel")
    assert "could not be checked" not in str(err)
