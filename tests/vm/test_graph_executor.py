"""vm.graph_executor: graphs written by hand over an assembled executable, no compiler.

Returns: a graph of kernel calls and reshapes runs, shares storage, hands out copies,
reads params, benchmarks. Traps: a kernel failing mid-graph names the node and the module
keeps working. Invalid: wrong input names, shapes, dtypes and output indices. Malformed:
graph JSON that does not parse, or names a missing kernel, node, entry or storage.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import serialization
import vm
from tests.vm.executable_samples import kernel_executable
from vm.graph_executor import GraphExecutorFactoryModule, GraphModule, create


def add_node(name, a, b):
    return {
        "op": "tvm_op",
        "name": name,
        "attrs": {"func_name": "vm_mod_add", "num_inputs": "2", "num_outputs": "1"},
        "inputs": [[a, 0, 0], [b, 0, 0]],
    }


def graph(n=4, storage=None, shapes=None):
    """x, y -> s = x + y -> t = s + s -> reshape(t) to (2, n/2) -> u = t + y; outputs u, r."""
    nodes = [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "y", "inputs": []},
        add_node("s", 0, 1),
        add_node("t", 2, 2),
        {
            "op": "tvm_op",
            "name": "r",
            "attrs": {"func_name": "__nop", "num_inputs": "1", "num_outputs": "1"},
            "inputs": [[3, 0, 0]],
        },
        add_node("u", 3, 1),
    ]
    return {
        "nodes": nodes,
        "arg_nodes": [0, 1],
        "heads": [[5, 0, 0], [4, 0, 0]],
        "attrs": {
            "dltype": ["list_str", ["float32"] * 6],
            "shape": ["list_shape", shapes or [[n], [n], [n], [n], [2, n // 2], [n]]],
            "storage_id": ["list_int", storage or [0, 1, 2, 3, 3, 2]],
        },
        "node_row_ptr": [0, 1, 2, 3, 4, 5, 6],
    }


def factory(g=None, params=None):
    return GraphExecutorFactoryModule(
        json.dumps(g or graph()), kernel_executable(), params or {}, mod_name="default"
    )


def module(g=None, params=None):
    f = factory(g, params)
    return GraphModule(f["default"](vm.cpu()))


X = np.array([1, 2, 3, 4], "float32")
Y = np.array([10, 20, 30, 40], "float32")


# ---- returns --------------------------------------------------------------------------------


def test_graph_of_kernels_and_a_reshape_computes_its_outputs():
    m = module()
    m.set_input("x", X)
    m.set_input(1, Y)
    m.run()
    t = (X + Y) * 2
    np.testing.assert_array_equal(m.get_output(0), t + Y)
    np.testing.assert_array_equal(m.get_output(1), t.reshape(2, 2))
    assert m.get_num_outputs() == 2
    assert m.get_num_inputs() == 2
    assert m.get_output_info() == ([(4,), (2, 2)], ["float32", "float32"])


def test_entries_with_one_storage_id_share_a_buffer_sized_for_the_largest():
    m = module()
    entries = m.module.entries
    assert np.shares_memory(entries[2], entries[5])  # s is dead when u is written
    assert np.shares_memory(entries[3], entries[4])  # the reshape views t
    assert not np.shares_memory(entries[0], entries[2])


def test_outputs_and_inputs_are_copies_the_caller_owns():
    m = module()
    m.run(x=X, y=Y)
    first = m.get_output(0)
    m.run(x=X * 0, y=Y * 0)
    np.testing.assert_array_equal(first, (X + Y) * 2 + Y)
    got = m.get_input("x")
    got[:] = 99
    np.testing.assert_array_equal(m.get_input(0), X * 0)


def test_get_output_and_get_input_copy_into_out():
    m = module()
    m.run(x=X, y=Y)
    out = np.empty(4, "float32")
    assert m.get_output(0, out=out) is out
    np.testing.assert_array_equal(out, (X + Y) * 2 + Y)
    assert m.get_input("y", np.empty(4, "float32")).tolist() == Y.tolist()


def test_params_are_set_at_creation_and_excluded_from_input_info():
    m = module(params={"y": Y})
    assert m.get_input_info() == ({"x": (4,)}, {"x": "float32"})
    assert m.get_num_inputs() == 1
    assert m.get_input_index("y") == 1
    m.run(x=X)
    np.testing.assert_array_equal(m.get_output(0), (X + Y) * 2 + Y)


def test_load_params_reads_a_param_dict_blob():
    m = module()
    m.load_params(serialization.save_param_dict({"y": Y}))
    m.run(x=X)
    np.testing.assert_array_equal(m.get_output(0), (X + Y) * 2 + Y)


def test_python_scalars_and_lists_are_converted_to_the_input_dtype():
    m = module()
    m.set_input("x", [1, 2, 3, 4])
    m.set_input("y", Y)
    m.run()
    np.testing.assert_array_equal(m.get_output(0), (X + Y) * 2 + Y)


def test_modules_of_one_factory_keep_separate_buffers():
    f = factory()
    a, b = GraphModule(f["default"](vm.cpu())), GraphModule(f["default"]())
    a.run(x=X, y=Y)
    b.run(x=X * 2, y=Y * 2)
    np.testing.assert_array_equal(a.get_output(0), (X + Y) * 2 + Y)
    np.testing.assert_array_equal(b.get_output(0), ((X + Y) * 2 + Y) * 2)


def test_create_builds_a_module_from_json_and_an_executable():
    m = create(json.dumps(graph()), kernel_executable(), vm.cpu())
    m.run(x=X, y=Y)
    np.testing.assert_array_equal(m.get_output(1), ((X + Y) * 2).reshape(2, 2))


def test_benchmark_times_run_with_tvm_semantics():
    m = module()
    result = m.benchmark(vm.cpu(), repeat=3, number=2, x=X, y=Y)
    assert isinstance(result, vm.BenchmarkResult) and len(result.results) == 3
    np.testing.assert_array_equal(m.get_output(0), (X + Y) * 2 + Y)
    assert len(m.benchmark(end_to_end=True, repeat=2, number=1, x=X, y=Y).results) == 2


def test_profile_times_every_kernel_call_and_leaves_the_outputs():
    m = module()
    report = m.profile(x=X, y=Y)
    assert isinstance(report, vm.Report)
    (row,) = report.calls
    assert row["Name"] == "vm_mod_add" and row["Count"] == 3
    assert row["Argument Shapes"] == "float32[4], float32[4], float32[4]"
    assert 0 < row["Duration (us)"] <= report.device_metrics["cpu0"]["Duration (us)"]
    assert report.configuration["Executor"] == "Graph"
    assert "vm_mod_add" in str(report)
    np.testing.assert_array_equal(m.get_output(0), (X + Y) * 2 + Y)


def test_factory_exposes_graph_params_and_lib():
    f = factory(params={"y": Y})
    assert json.loads(f.get_graph_json())["arg_nodes"] == [0, 1]
    assert list(f.get_params()) == ["y"]
    assert f.get_lib().primitive_ops == ["vm_mod_add"]
    assert "default" in repr(f)


# ---- traps ----------------------------------------------------------------------------------


def test_a_failing_kernel_names_the_node_and_the_module_keeps_working():
    g = graph(shapes=[[4], [3], [4], [4], [2, 2], [4]])
    m = module(g)
    with pytest.raises(vm.VMError, match="graph node 's'"):
        m.run(x=X, y=Y[:3])
    good = module()
    good.run(x=X, y=Y)
    np.testing.assert_array_equal(good.get_output(0), (X + Y) * 2 + Y)


# ---- invalid --------------------------------------------------------------------------------


def test_unknown_input_name_lists_the_inputs():
    with pytest.raises(KeyError, match="no input named 'z'; inputs: x, y"):
        module().set_input("z", X)


def test_input_of_the_wrong_shape_or_dtype_names_the_input():
    m = module()
    with pytest.raises(ValueError, match=r"input 'x' expects float32\[4\], got float32\[3\]"):
        m.set_input("x", X[:3])
    with pytest.raises(TypeError, match="input 'x' expects dtype float32, got int64"):
        m.set_input("x", np.arange(4))
    with pytest.raises(TypeError, match="must be a numpy array"):
        m.set_input("x", object())


def test_output_index_out_of_range_and_bad_out_array():
    m = module()
    with pytest.raises(IndexError, match="the graph has 2"):
        m.get_output(2)
    with pytest.raises(ValueError, match=r"must be a float32\[4\] numpy array"):
        m.get_output(0, out=np.empty(3, "float32"))


def test_factory_answers_only_to_its_module_name():
    with pytest.raises(KeyError, match="holds module 'default', not 'main'"):
        factory()["main"]


def test_graph_module_wraps_only_a_graph_executor_module():
    with pytest.raises(TypeError, match="GraphModule wraps"):
        GraphModule(factory())


# ---- malformed ------------------------------------------------------------------------------


def broken(edit):
    g = copy.deepcopy(graph())
    edit(g)
    return json.dumps(g)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda g: g.pop("nodes"), "'nodes' is missing"),
        (lambda g: g["nodes"][2]["attrs"].update(func_name="nope"), "no kernel named 'nope'"),
        (lambda g: g["nodes"][2].update(inputs=[[0, 0, 0]]), "takes 2 inputs, the node has 1"),
        (lambda g: g["nodes"][2].update(inputs=1), "inputs must be a list of references"),
        (lambda g: g["nodes"][2].update(inputs=[[0, 0, 0], [3, 0, 0]]), "does not come before"),
        (lambda g: g["nodes"][2].update(inputs=[[0, 0, 0], [1, 1, 0]]), "node 1 has no output 1"),
        (lambda g: g["attrs"]["shape"][1].__setitem__(0, [2, 2]), "kernel vm_mod_add takes"),
        (lambda g: g["attrs"]["dltype"][1].__setitem__(0, "object"), "dtype 'object'"),
        (lambda g: g["attrs"]["storage_id"][1].__setitem__(4, 0), "cannot view"),
        (lambda g: g["attrs"]["storage_id"][1].__setitem__(0, -1), "storage_id -1"),
        (lambda g: g["node_row_ptr"].pop(), "node_row_ptr has 6 entries for 6 nodes"),
        (lambda g: g.update(arg_nodes=[2]), r"arg node 2 \('s'\) is an op"),
        (lambda g: g.update(heads=[[9, 0, 0]]), "node 9"),
        (lambda g: g["nodes"][0].update(op="conv"), "op 'null' or 'tvm_op'"),
    ],
)
def test_malformed_graphs_are_rejected_naming_the_problem(edit, message):
    with pytest.raises(ValueError, match=message):
        GraphExecutorFactoryModule(broken(edit), kernel_executable(), {})


def test_graph_json_that_does_not_parse_is_a_value_error():
    with pytest.raises(ValueError, match="graph JSON does not parse"):
        GraphExecutorFactoryModule("{", kernel_executable(), {})
    with pytest.raises(ValueError, match="'nodes' is missing"):
        GraphExecutorFactoryModule("[]", kernel_executable(), {})


def test_lib_must_be_an_executable():
    with pytest.raises(TypeError, match=r"lib must be a vm\.Executable"):
        GraphExecutorFactoryModule(json.dumps(graph()), object(), {})


# ---- TVM's GraphModule API: returns -------------------------------------------------------


def test_get_input_index_is_minus_one_for_an_unknown_name():
    m = module()
    assert m.get_input_index("y") == 1
    assert m.get_input_index("nope") == -1


def test_getitem_gives_tvms_packed_functions():
    m = module()
    m["set_input"]("x", X)
    m["set_input"]("y", Y)
    m["run"]()
    np.testing.assert_array_equal(m["get_output"](0), 2 * (X + Y) + Y)
    assert m["get_num_outputs"]() == 2


def test_get_device_is_the_cpu():
    assert module().get_device() == vm.cpu()
    f = factory()
    assert GraphModule(f["default"]()).get_device() == vm.cpu(0)


def test_load_params_ignores_names_the_graph_lacks():
    m = module()
    m.load_params(serialization.save_param_dict({"y": Y, "not_in_graph": X}))
    np.testing.assert_array_equal(m.get_input("y"), Y)


def test_debug_get_output_runs_only_up_to_the_node():
    m = module()
    m.set_input(x=X, y=Y)
    out = np.empty(4, "float32")
    assert m.debug_get_output("s", out) is out
    np.testing.assert_array_equal(out, X + Y)
    # Node "u" (index 5) has not run: its buffer (storage 2, shared with "s") holds x + y.
    np.testing.assert_array_equal(m.module.entries[m.module.graph.nodes[5].first_entry], X + Y)
    np.testing.assert_array_equal(m.debug_get_output(3), 2 * (X + Y))
    np.testing.assert_array_equal(m.debug_get_output("x"), X)


def test_share_params_makes_two_modules_read_one_weight_array():
    f = factory(params={"y": Y})
    first = GraphModule(f["default"](vm.cpu()))
    second = GraphModule(f["default"](vm.cpu()))
    second.share_params(first, serialization.save_param_dict({"y": np.zeros(4, "float32")}))
    first_y = first.module.entries[first.module.input_entries["y"]]
    assert second.module.entries[second.module.input_entries["y"]] is first_y
    first.set_input("y", 2 * Y)  # loading new weights into one changes both
    second.run(x=X)
    np.testing.assert_array_equal(second.get_output(0), 2 * (X + 2 * Y) + 2 * Y)
    assert second.get_num_inputs() == 1


def test_export_library_and_load_module_give_back_a_working_factory(tmp_path):
    from vm.graph_executor import load_module

    f = factory(params={"y": Y})
    f.export_library(tmp_path / "deploy.rvg")
    loaded = load_module(str(tmp_path / "deploy.rvg"))
    assert isinstance(loaded, GraphExecutorFactoryModule)
    assert loaded.get_graph_json() == f.get_graph_json()
    assert loaded.lib.save() == f.lib.save()
    m = GraphModule(loaded["default"](vm.cpu()))
    m.run(x=X)
    np.testing.assert_array_equal(m.get_output(0), 2 * (X + Y) + Y)


# ---- TVM's GraphModule API: invalid -------------------------------------------------------


def test_getitem_of_an_unknown_function_lists_them():
    with pytest.raises(KeyError, match="no function 'time_evaluator'; it has set_input, run"):
        module()["time_evaluator"]


def test_debug_get_output_of_an_unknown_node_names_it():
    with pytest.raises(KeyError, match="no node named 'zz'"):
        module().debug_get_output("zz")
    with pytest.raises(KeyError, match="index below 6"):
        module().debug_get_output(6)


def test_share_params_refuses_a_mismatched_or_unknown_parameter():
    first = module()
    other = module(graph(n=6, shapes=[[6], [6], [6], [6], [2, 3], [6]]))
    with pytest.raises(ValueError, match="cannot share parameter 'y': it is float32"):
        first.share_params(other, serialization.save_param_dict({"y": Y}))
    with pytest.raises(KeyError, match="cannot share parameter 'w'"):
        first.share_params(module(), serialization.save_param_dict({"w": Y}))
    with pytest.raises(TypeError, match="another GraphModule"):
        first.share_params(object(), b"")


def test_share_params_refuses_a_parameter_whose_storage_the_graph_writes():
    # y shares storage 1 with "t", which the graph writes.
    m = module(graph(storage=[0, 1, 2, 1, 1, 2]))
    with pytest.raises(ValueError, match="storage 1 also holds entry 3"):
        m.share_params(module(), serialization.save_param_dict({"y": Y}))


def test_export_library_refuses_compiler_options(tmp_path):
    with pytest.raises(TypeError, match="takes no compiler options"):
        factory().export_library(tmp_path / "lib.so", cc="g++")


# ---- TVM's GraphModule API: malformed -----------------------------------------------------


def test_a_truncated_factory_file_is_a_format_error_naming_the_problem(tmp_path):
    from vm.graph_executor import load_module

    path = tmp_path / "deploy.rvg"
    factory().export_library(path)
    path.write_bytes(path.read_bytes()[:-7])
    with pytest.raises(serialization.FormatError):
        load_module(path)


def test_a_factory_file_with_a_tampered_executable_fails_verification(tmp_path):
    from serialization.formats import GRAPH_FACTORY_FORMAT
    from serialization.framing import read_document, write_document
    from vm.graph_executor import load_module

    path = tmp_path / "deploy.rvg"
    factory().export_library(path)
    document = read_document(GRAPH_FACTORY_FORMAT, path.read_bytes())
    sections = dict(document.sections)
    sections["executable"] = sections["executable"][:-3]
    path.write_bytes(
        write_document(
            GRAPH_FACTORY_FORMAT, [(n, sections[n]) for n in GRAPH_FACTORY_FORMAT.sections]
        )
    )
    with pytest.raises(vm.ExecutableLoadError):
        load_module(path)


def test_module_time_evaluator_times_run_as_tvms_tutorials_do():
    m = module()
    m.set_input(x=X, y=Y)
    result = m.module.time_evaluator("run", vm.cpu(), number=2, repeat=3, f_preproc="")()
    assert isinstance(result, vm.BenchmarkResult) and len(result.results) == 3
    with pytest.raises(ValueError, match="can only time 'run', not 'set_input'"):
        m.module.time_evaluator("set_input", vm.cpu())
