"""compiler.tvm: TVM's namespace re-exports relayvm's own objects, one object per concept.

Returns: every TVM name of the issue is the relayvm object itself (identity, not a copy or
a wrapper); tempdir behaves as TVM's. Invalid: TVM names relayvm does not implement raise
AttributeError naming the nearest relayvm feature; unknown names list what is offered.
"""

from __future__ import annotations

import os

import pytest

import serialization
import vm
from compiler import relay as relay_package
from compiler import tvm
from compiler.ir.expr import Op
from compiler.ir.module import IRModule
from compiler.relay.target import Target, enabled
from compiler.text import parser
from compiler.transform import PassContext, Sequential

# ---- returns --------------------------------------------------------------------------------


def test_top_level_names_are_relayvms_objects():
    assert tvm.relay is relay_package
    assert tvm.IRModule is IRModule
    assert tvm.parser.fromtext is parser.fromtext
    assert tvm.transform.PassContext is PassContext
    assert tvm.transform.Sequential is Sequential
    assert tvm.target.Target is Target
    assert tvm.ir.op.Op is Op
    assert tvm.ir.IRModule is IRModule
    assert tvm.cpu is vm.cpu
    assert tvm.device("cpu", 0) == vm.cpu(0) == tvm.device("llvm")


def test_relay_names_are_the_compilers_objects():
    from compiler.build import build
    from compiler.executor import create_executor
    from compiler.ir.bind import bind_params_by_name
    from compiler.ir.visitor import post_order_visit
    from compiler.relay import vm as relay_vm

    relay = tvm.relay
    assert relay.Module is IRModule
    assert relay.build_module.bind_params_by_name is bind_params_by_name
    assert relay.build_module.build is build is relay.build
    assert relay.create_executor is create_executor
    assert relay.vm is relay_vm
    assert relay.vm.Executable is vm.Executable
    assert relay.vm.VirtualMachine is vm.VirtualMachine
    assert callable(relay.vm.compile) and callable(relay.vm.VMCompiler)
    assert relay.save_param_dict is serialization.save_param_dict
    assert relay.load_param_dict is serialization.load_param_dict
    assert relay.analysis.post_order_visit is post_order_visit
    assert callable(relay.frontend.from_onnx)


def test_runtime_names_are_the_vms_objects():
    from vm.graph_executor import load_module

    runtime = tvm.runtime
    assert runtime.vm is vm
    assert runtime.relax_vm is vm
    assert runtime.relax_vm.VMInstrumentReturnKind is vm.VMInstrumentReturnKind
    assert runtime.vm.Executable is vm.Executable
    assert runtime.load_module is load_module
    assert runtime.enabled is enabled
    assert runtime.Device is vm.Device
    assert runtime.save_param_dict is serialization.save_param_dict
    assert runtime.load_param_dict is serialization.load_param_dict


def test_contrib_and_micro_names():
    import vm.graph_executor

    assert tvm.contrib.graph_executor is vm.graph_executor
    assert tvm.micro.export_model_library_format is serialization.export_model_library_format
    from compiler.tvm.contrib import graph_executor

    assert graph_executor is vm.graph_executor


def test_from_imports_of_the_issues_import_lines_work():
    from compiler.tvm import relay
    from compiler.tvm.contrib import graph_executor, utils

    assert relay is relay_package
    assert graph_executor.GraphModule is vm.graph_executor.GraphModule
    assert callable(utils.tempdir)


def test_tempdir_gives_relpaths_lists_and_removes_the_directory():
    tmp = tvm.contrib.utils.tempdir()
    path = tmp.relpath("code.ro")
    with open(path, "wb") as handle:
        handle.write(b"x")
    assert tmp.listdir() == ["code.ro"]
    assert os.path.dirname(path) == tmp.path
    tmp.remove()
    assert not os.path.exists(tmp.path)


def test_tempdir_as_a_context_manager_and_a_custom_path_kept(tmp_path):
    with tvm.contrib.utils.tempdir() as tmp:
        directory = tmp.path
        assert os.path.isdir(directory)
    assert not os.path.exists(directory)
    kept = tvm.contrib.utils.tempdir(str(tmp_path / "mine"))
    kept.remove()
    assert os.path.isdir(tmp_path / "mine")


# ---- invalid: names relayvm does not implement --------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "nearest"),
    [
        ("tvm", "te", "write programs with tvm.relay"),
        ("tvm", "tir", "compiler.op"),
        ("tvm", "cuda", "use tvm.cpu()"),
        ("tvm", "build", "use tvm.relay.build"),
        ("tvm", "relax", "tvm.runtime.relax_vm"),
        ("tvm", "autotvm", "nothing to tune"),
        ("tvm.runtime", "profiler_vm", "machine.profile"),
        ("tvm.contrib", "graph_runtime", "use tvm.contrib.graph_executor"),
        ("tvm.contrib", "debugger", "debug_get_output"),
        ("tvm.micro", "Session", "host CPU"),
        ("tvm.ir", "PrimFunc", "no TIR"),
    ],
)
def test_unimplemented_tvm_names_say_so_and_name_the_nearest_feature(namespace, name, nearest):
    module = tvm
    for part in namespace.split(".")[1:]:
        module = getattr(module, part)
    with pytest.raises(AttributeError, match=f"relayvm does not implement {namespace}.{name}"):
        getattr(module, name)
    with pytest.raises(AttributeError, match=nearest):
        getattr(module, name)


def test_an_unknown_name_lists_what_the_namespace_offers():
    with pytest.raises(
        AttributeError, match=r"tvm has no attribute 'frobnicate'; it offers .*relay"
    ):
        tvm.frobnicate  # noqa: B018
    with pytest.raises(
        AttributeError, match=r"tvm.runtime has no attribute 'x'; it offers .*load_module"
    ):
        tvm.runtime.x  # noqa: B018


@pytest.mark.parametrize(
    ("namespace", "name", "home", "attribute"),
    [
        ("tvm", "nd", "vm", "nd"),
        ("tvm.runtime", "NDArray", "vm", "NDArray"),
        (
            "tvm.micro",
            "UnsupportedInModelLibraryFormatError",
            "serialization.model_library",
            "UnsupportedInModelLibraryFormatError",
        ),
    ],
)
def test_names_other_work_delivers_are_its_objects_or_say_what_they_wait_for(
    namespace, name, home, attribute
):
    import importlib

    module = tvm
    for part in namespace.split(".")[1:]:
        module = getattr(module, part)
    real = getattr(importlib.import_module(home), attribute, None)
    if real is not None:
        assert getattr(module, name) is real
        return
    with pytest.raises(AttributeError, match=rf"{namespace}.{name} is not available in this build"):
        getattr(module, name)
    with pytest.raises(AttributeError, match="meanwhile"):
        getattr(module, name)
