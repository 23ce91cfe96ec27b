"""compiler.relay.target: TVM's target strings, dicts and Target objects all mean this CPU.

Returns: CPU spellings parse, keep their options and print back. Invalid: GPU and
accelerator kinds, unknown kinds and malformed options raise ValueError naming them.
"""

from __future__ import annotations

import pytest

from compiler.relay.target import Target, as_target, enabled


@pytest.mark.parametrize(
    "text",
    ["llvm", "c", "cpu", "llvm -mcpu=skylake-avx512", "llvm -mcpu=znver3 -mattr=+avx2,+fma"],
)
def test_cpu_target_strings_print_back_as_given(text):
    assert str(Target(text)) == text


def test_options_are_parsed_as_tvm_names_them():
    target = Target("llvm  -mcpu=skylake -mattr=+avx2,+fma -system-lib")
    assert target.kind.name == "llvm"
    assert target.mcpu == "skylake"
    assert target.mattr == ["+avx2", "+fma"]
    assert target.attrs["system-lib"] is True
    assert target.keys == ["cpu"]


def test_a_dict_and_a_target_make_equal_targets():
    from_dict = Target({"kind": "llvm", "mcpu": "znver3"})
    assert from_dict == Target("llvm -mcpu=znver3") == Target(from_dict)
    assert hash(from_dict) == hash(Target("llvm -mcpu=znver3"))


def test_host_is_a_target_and_none_means_cpu():
    assert Target("llvm", host="c").host == Target("c")
    assert as_target(None) == Target("cpu")
    assert as_target("llvm", "llvm").host == Target("llvm")


def test_enabled_is_true_for_cpu_kinds_only():
    assert enabled("llvm") and enabled("llvm -mcpu=x") and enabled("c") and enabled(Target("cpu"))
    assert not enabled("cuda") and not enabled("") and not enabled(None)


def test_a_target_is_immutable():
    with pytest.raises(AttributeError, match="immutable"):
        Target("llvm").kind = "cuda"


@pytest.mark.parametrize("text", ["cuda", "cuda -arch=sm_80", "opencl", "vulkan", "metal", "rocm"])
def test_device_targets_are_refused_naming_the_device(text):
    kind = text.split()[0]
    with pytest.raises(
        ValueError, match=f"is a {kind} device: relayvm generates code for the host"
    ):
        Target(text)
    with pytest.raises(ValueError, match="host CPU only"):
        Target("llvm", host=text)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("x86", "unknown target kind 'x86'"),
        ("", "empty target string"),
        ("llvm mcpu=skylake", "option 'mcpu=skylake' does not start with '-'"),
        ("llvm -=3", "has no name"),
        ({"mcpu": "x"}, "needs a 'kind' key"),
    ],
)
def test_malformed_targets_are_refused_naming_the_problem(target, message):
    with pytest.raises(ValueError, match=message):
        Target(target)


def test_a_target_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="got int"):
        Target(3)
