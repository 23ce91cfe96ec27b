"""compiler.tvm: TVM's namespace re-exports relayvm's own objects, one object per concept.

Returns: every TVM name of the issue is the relayvm object itself (identity, not a copy or
a wrapper); tempdir behaves as TVM's. Invalid: TVM names relayvm does not implement raise
AttributeError naming the nearest relayvm feature; unknown names list what is offered.
"""

from __future__ import annotations

import os

import numpy as np
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


def test_the_spellings_of_custom_passes_are_the_compilers_objects():
    from compiler.ir.bind import bind
    from compiler.ir.functor import ExprFunctor, ExprMutator, ExprVisitor
    from compiler.ir.scope_builder import ScopeBuilder
    from compiler.ir.structural import assert_structural_equal
    from compiler.relay import vm as relay_vm
    from compiler.relay.analysis import get_total_mac_number, list_op_freqs, well_formed
    from compiler.transform.convert_layout import ConvertLayout

    relay = tvm.relay
    assert (relay.ExprFunctor, relay.ExprVisitor, relay.ExprMutator) == (
        ExprFunctor, ExprVisitor, ExprMutator,
    )  # fmt: skip
    assert relay.ScopeBuilder is ScopeBuilder and relay.bind is bind
    assert relay.optimize is relay_vm.optimize
    assert tvm.ir.assert_structural_equal is assert_structural_equal
    assert relay.transform.ConvertLayout is ConvertLayout
    assert (relay.analysis.well_formed, relay.analysis.list_op_freqs) == (
        well_formed, list_op_freqs,
    )  # fmt: skip
    assert relay.analysis.get_total_mac_number is get_total_mac_number


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


def test_tir_immediates_mark_functions_and_testing_compares_results():
    x = tvm.relay.var("x", shape=(3,))
    func = tvm.relay.Function([x], tvm.relay.negative(x))
    marked = func.with_attr("Primitive", tvm.tir.IntImm("int32", 1))
    assert marked.attrs["Primitive"] == 1 and type(marked.attrs["Primitive"]) is int
    named = func.with_attr("Compiler", tvm.tir.StringImm("dnnl"))
    assert named.attrs["Compiler"] == "dnnl" and type(named.attrs["Compiler"]) is str
    half = tvm.tir.FloatImm("float32", 0.5)
    assert (half.value, half.dtype, str(half)) == (0.5, "float32", "0.5")
    for dtype, value in (("float32", 1), ("int8", 300), ("int32", 1.5)):
        with pytest.raises(ValueError, match="IntImm"):
            tvm.tir.IntImm(dtype, value)
    mod = tvm.IRModule.from_expr(func)
    (target, dev), *_ = tvm.testing.enabled_targets()
    exe = tvm.relay.vm.compile(mod, target=target)
    got = tvm.runtime.vm.VirtualMachine(exe, dev).run(np.ones(3, "float32"))
    tvm.testing.assert_allclose(got.numpy(), -np.ones(3))
    with pytest.raises(AssertionError, match="shapes differ"):
        tvm.testing.assert_allclose(got, -np.ones((1, 3)))
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(got, -np.ones(3) + 1e-3)


# ---- invalid: names relayvm does not implement --------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "nearest"),
    [
        ("tvm", "te", "write programs with tvm.relay"),
        ("tvm.tir", "PrimFunc", "relayvm has no TIR"),
        ("tvm.testing", "parametrize_targets", "numpy.testing and pytest"),
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


def test_names_other_work_delivered_are_its_objects():
    import serialization.model_library

    assert tvm.nd is vm.nd and tvm.nd.NDArray is vm.NDArray
    assert tvm.runtime.NDArray is vm.NDArray and tvm.runtime.ndarray is vm.nd
    assert (
        tvm.micro.UnsupportedInModelLibraryFormatError
        is serialization.model_library.UnsupportedInModelLibraryFormatError
    )


def test_import_statements_reach_facade_namespaces_without_a_second_copy():
    import compiler.tvm.relay.nn as facade_nn
    from compiler.tvm.relay.backend import Executor
    from compiler.tvm.relay.build_module import bind_params_by_name
    from compiler.tvm.runtime.vm import VirtualMachine

    import compiler.op.nn
    import compiler.relay.backend

    assert VirtualMachine is vm.VirtualMachine
    assert Executor is compiler.relay.backend.Executor
    assert facade_nn is compiler.op.nn and compiler.op.nn.__spec__.name == "compiler.op.nn"
    assert bind_params_by_name is tvm.relay.build_module.bind_params_by_name
    with pytest.raises(ModuleNotFoundError, match=r"compiler\.tvm\.relay\.nosuch"):
        import compiler.tvm.relay.nosuch


def test_op_get_astuple_backend_options_and_the_aot_module():
    from vm.aot import AotModule

    relay = tvm.relay
    assert tvm.ir.Op.get("add") is relay.op.get("add") is tvm.ir.op.Op.get("add")
    x = relay.var("x", shape=(5,))
    both = relay.topk(x, k=2)
    assert both.astuple() is both
    executor = relay.backend.Executor("aot", {"interface-api": "packed"})
    assert executor.name == "aot" and executor["interface-api"] == "packed"
    assert relay.backend.Runtime("cpp").name == "cpp"
    assert tvm.runtime.executor.AotModule is AotModule
    with pytest.raises(ValueError, match="not executor 'vm'"):
        relay.build(tvm.IRModule.from_expr(relay.Function([x], x)), executor="vm")
