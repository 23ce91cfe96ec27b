"""vm.executable.Executable: construction, immutability, introspection, save/load entry points."""

import threading

import numpy as np
import pytest

from tests.vm.executable_samples import (
    ADD_DESCRIPTION,
    F32x2,
    control_flow_executable,
    kernel_executable,
    tiny_executable,
)
from vm.canonical import canonical_description, canonical_type_spec
from vm.errors import (
    ExecutableLoadError,
    InvalidExecutableError,
    MalformedExecutableError,
    UnknownFunctionError,
    VMError,
)
from vm.executable import Executable
from vm.isa import Opcode
from vm.program import Instruction, Primitive, VMFunction


def ret_function(name="main", params=("x",)):
    return VMFunction(
        name, tuple(params), (F32x2,) * len(params), F32x2, max(1, len(params)),
        (Instruction(Opcode.Ret, (0,)),),
    )  # fmt: skip


# ---- errors -------------------------------------------------------------------------------


def test_error_classes_follow_the_contract():
    assert issubclass(ExecutableLoadError, ValueError)
    assert issubclass(MalformedExecutableError, ExecutableLoadError)
    assert issubclass(InvalidExecutableError, ExecutableLoadError)
    assert issubclass(VMError, RuntimeError)
    err = InvalidExecutableError("msg", "code", "main", 3)
    assert (err.section, err.function, err.pc) == ("code", "main", 3)


# ---- construction -------------------------------------------------------------------------


def test_pieces_are_kept_in_index_order():
    exe = control_flow_executable()
    assert exe.globals == ["identity", "pick", "first", "cons", "head", "main"]
    assert [f.name for f in exe.functions] == exe.globals
    assert [c.name for c in exe.constructors] == ["Cons", "Nil"]
    assert exe.constructor_by_tag[1].name == "Cons"


def test_wrong_piece_types_raise_type_error_naming_the_piece():
    with pytest.raises(TypeError, match=r"functions\[0\] must be a vm.program.VMFunction"):
        Executable(["main"], (), (), ())
    with pytest.raises(TypeError, match="constant 0 must be a numpy array, got list"):
        Executable((), ([1, 2],), (), ())
    with pytest.raises(TypeError, match=r"primitives\[0\]"):
        Executable((), (), ("add",), ())
    with pytest.raises(TypeError, match=r"constructors\[0\]"):
        Executable((), (), (), ((1, "A", 0, "T"),))


def test_constants_of_a_disallowed_dtype_are_rejected():
    with pytest.raises(TypeError, match="constant 0: arrays of dtype object cannot be saved"):
        Executable((), (np.array([None]),), (), ())


def test_constants_become_private_read_only_little_endian_c_order_arrays():
    source = np.arange(6, dtype=">i4").reshape(2, 3).T
    exe = Executable((), (source,), (), ())
    (const,) = exe.constant_values
    assert not const.flags.writeable and const.flags.c_contiguous
    assert const.dtype == np.dtype("<i4")
    assert np.array_equal(const, source)
    source[0, 0] = 99  # the caller's array is not shared
    assert const[0, 0] == 0


def test_a_read_only_view_of_a_writable_array_is_copied():
    base = np.arange(3, dtype="float32")
    view = base[:]
    view.flags.writeable = False
    exe = Executable((), (view,), (), ())
    base[0] = 42
    assert exe.constant_values[0][0] == 0


def test_type_specs_become_nested_tuples():
    assert canonical_type_spec(["tuple", [["tensor", [2, -1], "float32"], ["func"]]]) == (
        "tuple",
        (("tensor", (2, -1), "float32"), ("func",)),
    )
    f = VMFunction("main", ["x"], [["tensor", [2], "float32"]], ["tensor", [2], "float32"], 1,
                   [Instruction(Opcode.Ret, (0,))])  # fmt: skip
    (g,) = Executable((f,), (), (), ()).functions
    assert g.params == ("x",) and g.param_types == (F32x2,) and g.ret_type == F32x2
    assert isinstance(g.instructions, tuple)


def test_a_cyclic_type_spec_is_rejected():
    spec: list = ["tuple"]
    spec.append([spec])
    with pytest.raises(ValueError, match="nested deeper"):
        canonical_type_spec(spec)


def test_kernel_descriptions_become_sorted_plain_data():
    description = {
        "results": (2,),
        "inputs": [("float32", np.int64(1))],
        "attrs": {"z": np.float32(0.5), "a": np.bool_(True), "n": None},
    }
    canonical = canonical_description(description)
    assert list(canonical) == ["attrs", "inputs", "results"]
    assert list(canonical["attrs"]) == ["a", "n", "z"]
    assert canonical == {
        "attrs": {"a": True, "n": None, "z": 0.5},
        "inputs": [["float32", 1]],
        "results": [2],
    }
    assert type(canonical["inputs"][0][1]) is int and type(canonical["attrs"]["a"]) is bool
    assert canonical_description(canonical) == canonical


@pytest.mark.parametrize(
    ("description", "message"),
    [
        ([1], "must be a dict"),
        ({1: 2}, "keys must be strings"),
        ({"a": object()}, "found object"),
        ({"a": b"bytes"}, "found bytes"),
    ],
)
def test_descriptions_that_are_not_plain_data_are_rejected(description, message):
    with pytest.raises(TypeError, match=message):
        canonical_description(description)


def test_a_cyclic_description_is_rejected():
    cycle: dict = {}
    cycle["self"] = cycle
    with pytest.raises(TypeError, match="nested deeper"):
        canonical_description(cycle)


def test_the_executable_is_immutable():
    exe = tiny_executable()
    with pytest.raises(AttributeError, match="immutable"):
        exe.extra = 1
    with pytest.raises(AttributeError, match="immutable"):
        exe._functions = ()
    with pytest.raises(AttributeError, match="immutable"):
        del exe._functions
    with pytest.raises(TypeError):
        exe.constructor_by_tag[5] = None
    assert exe.globals is not exe.globals  # callers get fresh lists


def test_the_builder_output_is_shared_safely_across_threads():
    exe = control_flow_executable()
    expected = exe.save()[0]
    results = []

    def worker():
        results.append(exe.save()[0] == expected and exe.bytecode == exe.bytecode)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


# ---- introspection ------------------------------------------------------------------------


def test_function_params_and_arity_by_name():
    exe = control_flow_executable()
    assert exe.get_function_params("pick") == ["c", "a", "b"]
    assert exe.get_function_arity("pick") == 3
    assert exe.function_index("main") == 5
    assert exe.get_function("head").name == "head"


@pytest.mark.parametrize("method", ["function_index", "get_function_params", "get_function_arity"])
def test_an_unknown_function_names_itself_and_the_known_ones(method):
    exe = control_flow_executable()
    with pytest.raises(UnknownFunctionError) as info:
        getattr(exe, method)("mian")
    message = str(info.value)
    assert message.startswith("unknown function 'mian'; the executable defines: identity, pick")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)


def test_an_unhashable_function_name_is_an_unknown_function():
    with pytest.raises(UnknownFunctionError):
        tiny_executable().function_index(["main"])


def test_primitive_ops_and_primitives():
    exe = kernel_executable()
    assert exe.primitive_ops == ["vm_mod_add"]
    assert exe.primitives == (Primitive("vm_mod_add", canonical_description(ADD_DESCRIPTION)),)


def test_repr_counts_the_pieces():
    assert repr(control_flow_executable()) == (
        "<Executable: 6 functions, 1 constants, 0 primitives, 2 constructors>"
    )


def test_constructors_accept_an_empty_default():
    exe = Executable((ret_function(),), (), ())
    assert exe.constructors == ()


# ---- save / load_exec entry points ---------------------------------------------------------


def test_save_with_a_path_writes_the_same_bytes(tmp_path):
    exe = control_flow_executable()
    path = tmp_path / "model.relayvm"
    data, _ = exe.save(path)
    assert path.read_bytes() == data == exe.save()[0]


@pytest.mark.parametrize("convert", [bytes, bytearray, memoryview])
def test_load_exec_accepts_bytes_like_values(convert):
    data = tiny_executable().save()[0]
    assert Executable.load_exec(convert(data)).save()[0] == data


def test_load_exec_accepts_str_and_pathlike_paths(tmp_path):
    path = tmp_path / "model.relayvm"
    data, _ = control_flow_executable().save(path)
    assert Executable.load_exec(path).save()[0] == data
    assert Executable.load_exec(str(path)).save()[0] == data


@pytest.mark.parametrize("value", [None, 42, ["bytes"], 3.5])
def test_load_exec_rejects_other_types_naming_the_type(value):
    with pytest.raises(TypeError, match=f"got {type(value).__name__}"):
        Executable.load_exec(value)


def test_load_exec_of_a_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        Executable.load_exec(tmp_path / "missing.relayvm")


def test_load_exec_verifies(tmp_path):
    from tests.vm.executable_samples import control_flow_builder

    builder = control_flow_builder()
    exe = builder.build()
    bad_main = VMFunction("main", ("x",), (F32x2,), F32x2, 1, (Instruction(Opcode.Ret, (5,)),))
    broken = Executable(exe.functions[:-1] + (bad_main,), exe.constant_values, (), exe.constructors)
    with pytest.raises(InvalidExecutableError, match=r"function 'main', instruction 0 \(Ret\)"):
        Executable.load_exec(broken.save()[0])


def test_saving_constants_beyond_the_byte_cap_names_the_cap(monkeypatch):
    import vm.executable_codec as codec

    monkeypatch.setattr(codec, "MAX_CONSTANT_BYTES", 16)
    exe = Executable((), (np.zeros(2), np.zeros(2)), ())
    with pytest.raises(ValueError, match="MAX_CONSTANT_BYTES"):
        exe.save()


def test_saving_an_instruction_that_does_not_match_its_row_names_it():
    bad = VMFunction("main", (), (), ("any",), 1, (Instruction(Opcode.Move, (0,)),))
    with pytest.raises(ValueError, match="cannot save function 'main', instruction 0"):
        Executable((bad,), (), ()).save()


def test_saving_an_int_beyond_64_bits_names_the_section():
    bad = VMFunction("main", (), (), ("any",), 1, (Instruction(Opcode.LoadConsti, (1 << 70, 0)),))
    with pytest.raises(ValueError, match="code section"):
        Executable((bad,), (), ()).save()


# ---- TVM's (code, lib) pair ------------------------------------------------------------------


def test_save_returns_tvms_pair_of_code_bytearray_and_library():
    exe = kernel_executable()
    code, lib = exe.save()
    assert type(code) is bytearray
    assert lib == exe.lib
    assert lib.primitive_ops == exe.primitive_ops
    assert Executable.load_exec(code, lib).save()[0] == code


def test_library_export_and_load_module_give_back_an_equal_library(tmp_path):
    from vm.executable import KernelLibrary
    from vm.graph_executor import load_module

    code, lib = kernel_executable().save()
    lib.export_library(tmp_path / "lib.rvl")
    loaded = load_module(tmp_path / "lib.rvl")
    assert isinstance(loaded, KernelLibrary)
    assert loaded == lib
    assert Executable.load_exec(bytes(code), loaded).primitive_ops == lib.primitive_ops


def test_load_module_of_an_executable_file_loads_the_executable(tmp_path):
    from vm.graph_executor import load_module

    exe = kernel_executable()
    exe.save(tmp_path / "model.relayvm")
    assert load_module(tmp_path / "model.relayvm").save() == exe.save()


def test_load_exec_of_a_library_saved_with_other_code_is_invalid():
    code, _ = kernel_executable().save()
    _, other_lib = control_flow_executable().save()
    with pytest.raises(InvalidExecutableError, match="library was not saved with this code"):
        Executable.load_exec(code, other_lib)


def test_load_exec_of_the_pair_as_one_argument_says_to_pass_two():
    with pytest.raises(TypeError, match=r"two arguments: code, lib = exe.save\(\)"):
        Executable.load_exec(kernel_executable().save())


def test_load_exec_rejects_a_library_of_another_type_naming_it():
    code, _ = kernel_executable().save()
    with pytest.raises(TypeError, match=r"lib must be the library saved with the code.*got str"):
        Executable.load_exec(code, "lib.so")


@pytest.mark.parametrize("data", [b"\x89RVL\r\n\x1a\n", b"\x89RVL\r\n\x1a\n\x01\x00\x00\x00junk"])
def test_a_malformed_library_file_is_a_malformed_executable_error(tmp_path, data):
    from vm.graph_executor import load_module

    path = tmp_path / "lib.rvl"
    path.write_bytes(data)
    with pytest.raises(MalformedExecutableError, match="malformed kernel library"):
        load_module(path)


def test_load_module_of_a_file_of_no_known_kind_names_the_kinds(tmp_path):
    from vm.graph_executor import load_module

    path = tmp_path / "lib.so"
    path.write_bytes(b"\x7fELF")
    with pytest.raises(ValueError, match="not a file relayvm's export_library or save wrote"):
        load_module(path)
