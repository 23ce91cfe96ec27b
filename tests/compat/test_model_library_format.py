"""TVM's Model Library Format export test, with only the imports changed."""

from __future__ import annotations

import datetime
import json
import os
import tarfile

import numpy as np
import pytest

from compiler import tvm
from compiler.tvm import relay
from compiler.tvm.contrib import utils

RELAY_TEXT = """
#[version = "0.0.5"]
def @main(%a : Tensor[(1, 2), uint8], %b : Tensor[(1, 2), float32], %c : Tensor[(1, 2), float32]) {
    %0 = cast(%a, dtype="float32") + %b * %c;
    %0
}
"""


def test_export_model_library_format_fields():
    relay_mod = tvm.parser.fromtext(RELAY_TEXT)
    target = tvm.target.Target("llvm")
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(
            relay_mod, target, mod_name="add", params={"c": np.array([[2.0, 4.0]], "float32")}
        )
    temp_dir = utils.tempdir()
    mlf_tar_path = temp_dir.relpath("lib.tar")
    tvm.micro.export_model_library_format(factory, mlf_tar_path)
    with tarfile.open(mlf_tar_path) as tf:
        extract_dir = temp_dir.relpath("extract")
        os.mkdir(extract_dir)
        tf.extractall(extract_dir)
    with open(os.path.join(extract_dir, "metadata.json")) as json_f:
        metadata = json.load(json_f)
    assert metadata["version"] == 1
    assert metadata["model_name"] == "add"
    export_datetime = datetime.datetime.strptime(metadata["export_datetime"], "%Y-%m-%d %H:%M:%SZ")
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert now - export_datetime < datetime.timedelta(minutes=5)
    assert metadata["target"] == {"1": str(target)}
    memory = metadata["memory"]
    assert isinstance(memory, list)
    assert all({"storage_id", "size_bytes"} <= set(entry) for entry in memory)
    bindings = {e["input_binding"]: e["size_bytes"] for e in memory if "input_binding" in e}
    assert bindings["a"] == 2 and bindings["b"] == 8
    with open(os.path.join(extract_dir, "relay.txt")) as relay_f:
        assert relay_f.read() == str(relay_mod)
    assert os.listdir(os.path.join(extract_dir, "codegen", "host"))


def test_export_of_a_module_that_is_not_built_is_unsupported():
    relay_mod = tvm.parser.fromtext(RELAY_TEXT)
    temp_dir = utils.tempdir()
    with pytest.raises(tvm.micro.UnsupportedInModelLibraryFormatError):
        tvm.micro.export_model_library_format(relay_mod, temp_dir.relpath("lib.tar"))
