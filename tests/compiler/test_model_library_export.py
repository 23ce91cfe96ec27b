"""Model Library Format end to end: ``relay.build`` or ``relay.vm.compile``, export, load, run.

Returns: a graph module exported and loaded back (here and in a process that never imports
``compiler``) gives the original's answers; a VM executable's archive loads with
``vm.Executable.load_exec``; the archive is TVM's version 1 field by field (``relay.txt`` at
the root equal to ``str(mod)``, the memory list, the target, the UTC export time).
Invalid: loading a VM archive as a graph names what to do instead; a module that was never
built raises ``UnsupportedInModelLibraryFormatError``.
Malformed: a corrupted executable inside the archive raises ``vm.ExecutableLoadError``; a
sparse member declaring 4 GB is refused by ``load_model_library`` before anything is read.
"""

from __future__ import annotations

import datetime
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

import serialization
import vm
from compiler import relay
from tests.serialization.test_model_library_format import (
    FOUR_GB,
    gnu_sparse_member,
    refused_within_memory,
)
from vm.graph_executor import GraphModule, load_model_library

ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(11)

MLP = """
def @main(%x: Tensor[(2, 8), float32], %w1: Tensor[(16, 8), float32], %b1: Tensor[(16), float32],
          %w2: Tensor[(4, 16), float32]) {
  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1), %b1));
  (nn.softmax(nn.dense(%0, %w2)), %0)
}
"""


@pytest.fixture(scope="module")
def model():
    mod = relay.fromtext(MLP)
    params = {
        "w1": RNG.standard_normal((16, 8)).astype("float32"),
        "b1": RNG.standard_normal(16).astype("float32"),
        "w2": RNG.standard_normal((4, 16)).astype("float32"),
    }
    return mod, params, RNG.standard_normal((2, 8)).astype("float32")


def outputs(factory, x):
    module = GraphModule(factory[factory.libmod_name](vm.cpu()))
    module.run(x=x)
    return [module.get_output(i) for i in range(module.get_num_outputs())]


# ---- returns ------------------------------------------------------------------------------


def test_graph_module_loaded_from_the_archive_gives_the_same_outputs(tmp_path, model):
    mod, params, x = model
    factory = relay.build(mod, params=params, mod_name="mlp")
    path = serialization.export_model_library_format(factory, tmp_path / "mlp.tar")
    loaded = load_model_library(path)
    assert loaded.libmod_name == "mlp"
    assert loaded.get_graph_json() == factory.get_graph_json()
    assert sorted(loaded.get_params()) == sorted(factory.get_params())
    for got, want in zip(outputs(loaded, x), outputs(factory, x), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_archive_holds_relay_text_that_parses_back_to_the_module(tmp_path, model):
    mod, _, _ = model
    path = serialization.export_model_library_format(relay.build(mod), tmp_path / "m.tar")
    text = serialization.read_model_library_format(path).relay_text
    assert relay.structural_equal(relay.fromtext(text), mod)


def test_the_archive_is_tvms_version_1_field_by_field(tmp_path, model):
    mod, params, _ = model
    factory = relay.build(mod, params=params, mod_name="mlp")
    path = serialization.export_model_library_format(factory, tmp_path / "mlp.tar")
    with tarfile.open(path, mode="r:") as tar:
        names = sorted(info.name for info in tar)
        relay_txt = tar.extractfile("relay.txt").read().decode()
        metadata = json.loads(tar.extractfile("metadata.json").read())
    assert names == [
        "codegen/host/lib/mlp.rvm",
        "metadata.json",
        "parameters/mlp.params",
        "relay.txt",
        "runtime-config/graph/graph.json",
    ]
    assert relay_txt == str(mod)
    assert metadata["version"] == 1
    assert metadata["model_name"] == "mlp"
    assert metadata["target"] == {"1": str(factory.target)}
    assert metadata["runtimes"] == ["graph"]
    stamp = datetime.datetime.strptime(metadata["export_datetime"], "%Y-%m-%d %H:%M:%SZ")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert abs(now - stamp) < datetime.timedelta(hours=1)  # UTC, not local time
    memory = metadata["memory"]
    assert isinstance(memory, list) and memory
    for entry in memory:
        assert set(entry) <= {"storage_id", "size_bytes", "input_binding"}
        assert type(entry["storage_id"]) is int and entry["size_bytes"] > 0
    graph = json.loads(factory.get_graph_json())
    sids = graph["attrs"]["storage_id"][1]
    assert sorted(e["storage_id"] for e in memory) == sorted(set(sids))


def test_the_memory_map_binds_every_graph_input(tmp_path, model):
    mod, _, _ = model
    factory = relay.build(mod)
    path = serialization.export_model_library_format(factory, tmp_path / "m.tar")
    sids = serialization.read_model_library_format(path).metadata["memory"]
    bound = {s["input_binding"] for s in sids if "input_binding" in s}
    assert bound == {"x", "w1", "b1", "w2"}
    assert all(s["size_bytes"] > 0 for s in sids)


def test_a_process_without_the_compiler_runs_the_archive(tmp_path, model):
    mod, params, x = model
    factory = relay.build(mod, params=params)
    path = serialization.export_model_library_format(factory, tmp_path / "m.tar")
    np.save(tmp_path / "x.npy", x)
    script = f"""
import sys
import numpy as np
import vm
from vm.graph_executor import GraphModule, load_model_library
module = GraphModule(load_model_library({str(path)!r})["default"](vm.cpu()))
module.run(x=np.load({str(tmp_path / "x.npy")!r}))
np.save({str(tmp_path / "y.npy")!r}, module.get_output(0))
assert not any(name == "compiler" or name.startswith("compiler.") for name in sys.modules)
"""
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=300)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), outputs(factory, x)[0])


def test_a_vm_executable_archive_loads_with_load_exec(tmp_path, model):
    mod, params, x = model
    exe = relay.vm.compile(mod, params=params)
    path = serialization.export_model_library_format(exe, tmp_path / "vm.tar")
    library = serialization.read_model_library_format(path)
    assert library.runtimes == ("vm",)
    loaded = vm.Executable.load_exec(library.executable)
    got = vm.VirtualMachine(loaded, vm.cpu()).invoke("main", x)
    want = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# ---- invalid ------------------------------------------------------------------------------


def test_loading_a_vm_archive_as_a_graph_says_to_use_load_exec(tmp_path, model):
    mod, params, _ = model
    exe = relay.vm.compile(mod, params=params)
    path = serialization.export_model_library_format(exe, tmp_path / "vm.tar")
    with pytest.raises(ValueError, match="load_exec"):
        load_model_library(path)


@pytest.mark.parametrize("unbuilt", ["module", "function", "params"])
def test_what_was_never_built_is_unsupported_in_model_library_format(tmp_path, model, unbuilt):
    mod, params, _ = model
    value = {"module": mod, "function": mod["main"], "params": params}[unbuilt]
    with pytest.raises(serialization.UnsupportedInModelLibraryFormatError, match=r"relay\.build"):
        serialization.export_model_library_format(value, tmp_path / "m.tar")
    assert not (tmp_path / "m.tar").exists()


# ---- malformed ----------------------------------------------------------------------------


def test_a_corrupted_executable_in_the_archive_raises_executable_load_error(tmp_path, model):
    mod, params, _ = model
    path = serialization.export_model_library_format(
        relay.build(mod, params=params), tmp_path / "m.tar"
    )
    buffer = io.BytesIO()
    with tarfile.open(path, mode="r:") as src, tarfile.open(fileobj=buffer, mode="w") as dst:
        for info in src:
            payload = src.extractfile(info).read()
            if info.name.endswith(".rvm"):
                payload = payload[: len(payload) // 2]
                info.size = len(payload)
            dst.addfile(info, io.BytesIO(payload))
    with pytest.raises(vm.ExecutableLoadError):
        load_model_library(buffer.getvalue())


def test_load_model_library_refuses_a_sparse_member_before_reading_it(tmp_path, model):
    mod, params, _ = model
    path = serialization.export_model_library_format(
        relay.build(mod, params=params), tmp_path / "m.tar"
    )
    with tarfile.open(path, mode="r:") as tar:
        entries = [(i, tar.extractfile(i).read()) for i in tar if not i.name.endswith(".rvm")]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, payload in entries:
            tar.addfile(info, io.BytesIO(payload))
    data = gnu_sparse_member("codegen/host/lib/default.rvm", FOUR_GB) + buffer.getvalue()
    refused_within_memory(data, "is a sparse file", reader=load_model_library)
