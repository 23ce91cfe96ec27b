"""Model Library Format archives: layout, metadata, determinism, and hostile tars.

The serialization layer takes modules by duck typing, so these tests hand it small
stand-ins with the attributes ``relay.build`` results and executables have;
``tests/compiler/test_model_library_export.py`` runs the real thing end to end.

Returns: the layout and metadata are TVM's version 1, reading gives back every member, two
exports give the same bytes. Invalid: modules and names that cannot be exported.
Malformed: links, traversal, duplicates, unknown members, newer versions, truncations and
byte flips all raise ``FormatError`` naming what was wrong; so do sparse members, sizes
beyond the limits or the archive, hostile JSON, and paths that are not regular files, all
refused without allocating more than the archive's size.

``RELAYVM_FUZZ_ARCHIVES`` sets how many byte-mutated archives the fuzz test reads
(default 600, a few seconds).
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tracemalloc

import numpy as np
import pytest

import serialization
from serialization import (
    MODEL_LIBRARY_VERSION,
    FormatError,
    ModelLibraryParts,
    UnsupportedInModelLibraryFormatError,
    export_model_library_format,
    read_model_library_format,
)

GRAPH = {
    "nodes": [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "p0", "inputs": []},
        {
            "op": "tvm_op",
            "name": "add",
            "attrs": {
                "func_name": "k0",
                "num_inputs": "2",
                "num_outputs": "1",
                "flatten_data": "0",
            },
            "inputs": [[0, 0, 0], [1, 0, 0]],
        },
        {
            "op": "tvm_op",
            "name": "relu",
            "attrs": {
                "func_name": "k1",
                "num_inputs": "1",
                "num_outputs": "1",
                "flatten_data": "0",
            },
            "inputs": [[2, 0, 0]],
        },
    ],
    "arg_nodes": [0, 1],
    "heads": [[3, 0, 0]],
    "node_row_ptr": [0, 1, 2, 3, 4],
    "attrs": {
        "shape": ["list_shape", [[2, 3], [2, 3], [2, 3], [2, 3]]],
        "dltype": ["list_str", ["float32", "float32", "float32", "float32"]],
        "storage_id": ["list_int", [0, 1, 2, 3]],
    },
}


class FakeLib:
    """An executable as export sees it: its file bytes and one storage entry per constant."""

    def __init__(self, payload: bytes = b"RVM\x00executable bytes") -> None:
        self.payload = payload

    def model_library_parts(self) -> ModelLibraryParts:
        return ModelLibraryParts(
            model_name="default",
            runtime="vm",
            executable=self.payload,
            params={},
            memory=[{"storage_id": 0, "size_bytes": 20}, {"storage_id": 1, "size_bytes": 32}],
        )


class FakeFactory:
    """A ``relay.build`` result as export sees it."""

    def __init__(self, name: str = "default", graph: dict | None = None) -> None:
        self.name = name
        self.ir_mod = "def @main(%x: Tensor[(2, 3), float32]) { nn.relu(%x + 1f) }"
        self.graph = json.dumps(GRAPH if graph is None else graph)
        self.lib = FakeLib()
        self.params = {"p0": np.full((2, 3), 1.0, "float32")}

    def model_library_parts(self) -> ModelLibraryParts:
        return ModelLibraryParts(
            model_name=self.name,
            runtime="graph",
            executable=self.lib.payload,
            params=self.params,
            graph_json=self.graph,
            relay_text=self.ir_mod,
        )


def members_of(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return {info.name: info for info in tar}


def tar_of(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, payload in entries:
            info.size = len(payload) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(payload) if info.isreg() else None)
    return buffer.getvalue()


def archive_entries(data: bytes) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return [(info, tar.extractfile(info).read()) for info in tar]


def regular(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


@pytest.fixture
def graph_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    return export_model_library_format(FakeFactory(), tmp_path / "model.tar").read_bytes()


# ---- returns ------------------------------------------------------------------------------


def test_graph_module_archive_has_the_documented_members(graph_archive):
    assert sorted(members_of(graph_archive)) == [
        "codegen/host/lib/default.rvm",
        "metadata.json",
        "parameters/default.params",
        "relay.txt",
        "runtime-config/graph/graph.json",
    ]


def test_members_have_fixed_owners_modes_and_times(graph_archive):
    for info in members_of(graph_archive).values():
        assert (info.uid, info.gid, info.uname, info.gname) == (0, 0, "", "")
        assert (info.mode, info.mtime) == (0o644, 0)
        assert info.isreg()


def test_metadata_names_model_runtime_target_and_memory_map(graph_archive):
    metadata = read_model_library_format(graph_archive).metadata
    assert metadata["version"] == MODEL_LIBRARY_VERSION
    assert metadata["model_name"] == "default"
    assert metadata["export_datetime"] == "2023-11-14 22:13:20Z"
    assert metadata["runtimes"] == ["graph"]
    assert metadata["target"] == {"1": "cpu"}
    assert metadata["style"] == "full-model"
    assert metadata["producer"].startswith("relayvm")
    assert metadata["memory"] == [
        {"storage_id": 0, "size_bytes": 24, "input_binding": "x"},
        {"storage_id": 1, "size_bytes": 24, "input_binding": "p0"},
        {"storage_id": 2, "size_bytes": 24},
        {"storage_id": 3, "size_bytes": 24},
    ]


def test_memory_map_sizes_a_shared_storage_id_by_its_largest_entry(tmp_path):
    graph = json.loads(json.dumps(GRAPH))
    graph["attrs"]["shape"][1][3] = [4, 3]
    graph["attrs"]["dltype"][1][3] = "float64"
    graph["attrs"]["storage_id"][1] = [0, 1, 2, 2]
    path = export_model_library_format(FakeFactory(graph=graph), tmp_path / "m.tar")
    sids = read_model_library_format(path).metadata["memory"]
    assert sids[2] == {"storage_id": 2, "size_bytes": 96}
    assert len(sids) == 3


def test_metadata_json_is_sorted_indented_and_ends_with_a_newline(graph_archive):
    with tarfile.open(fileobj=io.BytesIO(graph_archive), mode="r:") as tar:
        text = tar.extractfile("metadata.json").read().decode()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


def test_reading_gives_back_every_member(graph_archive):
    factory = FakeFactory()
    library = read_model_library_format(graph_archive)
    assert library.model_name == "default"
    assert library.runtimes == ("graph",)
    assert library.executable == factory.lib.payload
    assert library.graph_json == factory.graph
    assert library.relay_text == factory.ir_mod
    assert list(library.params) == ["p0"]
    np.testing.assert_array_equal(library.params["p0"], factory.params["p0"])


def test_reading_a_path_and_reading_bytes_agree(tmp_path, graph_archive):
    path = tmp_path / "copy.tar"
    path.write_bytes(graph_archive)
    assert read_model_library_format(path).metadata == (
        read_model_library_format(graph_archive).metadata
    )
    assert read_model_library_format(str(path)).executable == FakeLib().payload


def test_two_exports_give_the_same_bytes_with_source_date_epoch(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    first = export_model_library_format(FakeFactory(), tmp_path / "a.tar").read_bytes()
    second = export_model_library_format(FakeFactory(), tmp_path / "b.tar").read_bytes()
    assert first == second


def test_without_source_date_epoch_the_export_time_is_now(tmp_path, monkeypatch):
    import datetime

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    path = export_model_library_format(FakeFactory(), tmp_path / "m.tar")
    stamp = read_model_library_format(path).metadata["export_datetime"]
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert before <= moment <= datetime.datetime.now(datetime.UTC)


def test_vm_executable_archive_has_no_graph_and_lists_its_constants_as_storage(tmp_path):
    path = export_model_library_format(FakeLib(b"vm bytes"), tmp_path / "vm.tar")
    assert sorted(members_of(path.read_bytes())) == [
        "codegen/host/lib/default.rvm",
        "metadata.json",
        "parameters/default.params",
    ]
    library = read_model_library_format(path)
    assert library.runtimes == ("vm",)
    assert library.graph_json is None and library.relay_text is None
    assert library.executable == b"vm bytes"
    assert library.params == {}
    assert library.metadata["memory"] == [
        {"storage_id": 0, "size_bytes": 20},
        {"storage_id": 1, "size_bytes": 32},
    ]


def test_members_are_named_after_the_module(tmp_path):
    path = export_model_library_format(FakeFactory("resnet-18.v1"), tmp_path / "m.tar")
    assert "parameters/resnet-18.v1.params" in members_of(path.read_bytes())
    assert read_model_library_format(path).model_name == "resnet-18.v1"


def test_export_replaces_an_existing_file(tmp_path):
    path = tmp_path / "m.tar"
    path.write_bytes(b"old contents")
    export_model_library_format(FakeFactory(), path)
    assert read_model_library_format(path).model_name == "default"


def test_the_api_is_exported_from_the_package():
    assert serialization.export_model_library_format is export_model_library_format
    assert serialization.read_model_library_format is read_model_library_format
    assert serialization.UnsupportedInModelLibraryFormatError is (
        UnsupportedInModelLibraryFormatError
    )


def test_directory_entries_from_other_tar_tools_are_accepted(graph_archive):
    directory = tarfile.TarInfo("parameters")
    directory.type = tarfile.DIRTYPE
    data = tar_of([(directory, b""), *archive_entries(graph_archive)])
    assert read_model_library_format(data).model_name == "default"


# ---- invalid ------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [object(), "model", 3])
def test_export_rejects_what_is_not_a_module(tmp_path, module):
    with pytest.raises(UnsupportedInModelLibraryFormatError, match=r"relay\.build.*vm\.Execut"):
        export_model_library_format(module, tmp_path / "m.tar")
    assert not (tmp_path / "m.tar").exists()


def test_export_rejects_parts_that_are_not_model_library_parts(tmp_path):
    class Wrong:
        def model_library_parts(self):
            return {"runtime": "vm"}

    with pytest.raises(TypeError, match=r"Wrong\.model_library_parts\(\) must return"):
        export_model_library_format(Wrong(), tmp_path / "m.tar")
    assert not (tmp_path / "m.tar").exists()


def test_export_rejects_a_graph_module_without_its_graph(tmp_path):
    class NoGraph(FakeFactory):
        def model_library_parts(self):
            parts = super().model_library_parts()
            return ModelLibraryParts(parts.model_name, "graph", parts.executable, parts.params)

    with pytest.raises(TypeError, match="need graph_json"):
        export_model_library_format(NoGraph(), tmp_path / "m.tar")


@pytest.mark.parametrize("name", ["", "a/b", "..", "../x", "a b", "é"])
def test_export_rejects_a_name_that_cannot_name_files(tmp_path, name):
    with pytest.raises(ValueError, match="cannot name files"):
        export_model_library_format(FakeFactory(name), tmp_path / "m.tar")


def test_export_rejects_a_graph_that_is_not_json(tmp_path):
    factory = FakeFactory()
    factory.graph = "{nodes"
    with pytest.raises(ValueError, match="graph JSON: not JSON"):
        export_model_library_format(factory, tmp_path / "m.tar")


def test_a_failed_export_leaves_the_old_file(tmp_path):
    path = tmp_path / "m.tar"
    path.write_bytes(b"old contents")
    with pytest.raises(TypeError):
        export_model_library_format(object(), path)
    assert path.read_bytes() == b"old contents"


def test_export_into_a_missing_directory_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        export_model_library_format(FakeFactory(), tmp_path / "missing" / "m.tar")


# ---- malformed ----------------------------------------------------------------------------


def replace_member(data: bytes, name: str, payload: bytes) -> bytes:
    return tar_of(
        [(info, payload if info.name == name else body) for info, body in archive_entries(data)]
    )


def with_metadata(data: bytes, **changes) -> bytes:
    entries = archive_entries(data)
    metadata = json.loads(next(body for info, body in entries if info.name == "metadata.json"))
    metadata.update(changes)
    metadata = {k: v for k, v in metadata.items() if v is not None}
    return replace_member(data, "metadata.json", json.dumps(metadata).encode())


def test_a_newer_version_names_both_versions_and_the_fix(graph_archive):
    data = with_metadata(graph_archive, version=MODEL_LIBRARY_VERSION + 1, producer="relayvm 9")
    with pytest.raises(FormatError, match=r"version 2 is newer than 1.*relayvm 9.*upgrade"):
        read_model_library_format(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": "1"}, "'version' must be a positive integer"),
        ({"version": None}, "'version' must be a positive integer"),
        ({"model_name": "../etc"}, "'model_name'"),
        ({"runtimes": ["aot"]}, "'runtimes'"),
        ({"runtimes": "graph"}, "'runtimes'"),
        ({"target": "cpu"}, "'target'"),
    ],
)
def test_bad_metadata_fields_are_named(graph_archive, changes, message):
    with pytest.raises(FormatError, match=message) as info:
        read_model_library_format(with_metadata(graph_archive, **changes))
    assert info.value.section == "metadata.json"


@pytest.mark.parametrize("payload", [b"{", b"[1, 2]", b"\xff\xfe"])
def test_metadata_that_is_not_a_json_object_is_refused(graph_archive, payload):
    with pytest.raises(FormatError, match=r"metadata.json"):
        read_model_library_format(replace_member(graph_archive, "metadata.json", payload))


@pytest.mark.parametrize(
    "name",
    [
        "metadata.json",
        "codegen/host/lib/default.rvm",
        "parameters/default.params",
        "runtime-config/graph/graph.json",
    ],
)
def test_a_missing_member_is_named(graph_archive, name):
    entries = [(i, b) for i, b in archive_entries(graph_archive) if i.name != name]
    with pytest.raises(FormatError, match=re.escape(f"'{name}' is missing")):
        read_model_library_format(tar_of(entries))


def test_an_unknown_member_is_refused(graph_archive):
    data = tar_of([*archive_entries(graph_archive), (regular("codegen/host/lib/evil.so"), b"x")])
    with pytest.raises(FormatError, match=r"unexpected member 'codegen/host/lib/evil.so'"):
        read_model_library_format(data)


def test_a_duplicate_member_is_refused(graph_archive):
    entries = archive_entries(graph_archive)
    with pytest.raises(FormatError, match="appears twice"):
        read_model_library_format(tar_of([*entries, entries[0]]))


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "../metadata.json", "src/../../x", "a//b", "./../x", "a\\b"]
)
def test_paths_outside_the_archive_are_refused(graph_archive, name):
    data = tar_of([(regular(name), b"x"), *archive_entries(graph_archive)])
    with pytest.raises(FormatError, match="not a relative path inside the archive"):
        read_model_library_format(data)


@pytest.mark.parametrize(
    "kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE]
)
def test_links_and_devices_are_refused(graph_archive, kind):
    entries = [e for e in archive_entries(graph_archive) if e[0].name != "metadata.json"]
    link = tarfile.TarInfo("metadata.json")
    link.type = kind
    link.linkname = "/etc/passwd"
    with pytest.raises(FormatError, match=r"'metadata.json' is not a regular file"):
        read_model_library_format(tar_of([(link, b""), *entries]))


def test_bad_parameters_are_named(graph_archive):
    data = replace_member(graph_archive, "parameters/default.params", b"not params")
    with pytest.raises(FormatError, match=r"parameters/default.params"):
        read_model_library_format(data)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ("[]", "not a JSON object"),
        ('{"nodes": 1}', "'nodes'"),
        ('{"nodes": [], "arg_nodes": [3]}', "'arg_nodes'"),
        ('{"nodes": [], "arg_nodes": [], "attrs": {}}', "'attrs.shape'"),
    ],
)
def test_a_bad_graph_is_named(graph_archive, graph, message):
    data = replace_member(graph_archive, "runtime-config/graph/graph.json", graph.encode())
    with pytest.raises(FormatError, match=message) as info:
        read_model_library_format(data)
    assert info.value.section == "runtime-config/graph/graph.json"


def test_a_graph_with_an_unknown_dtype_is_refused(graph_archive):
    graph = json.loads(json.dumps(GRAPH))
    graph["attrs"]["dltype"][1][0] = "object"
    data = replace_member(
        graph_archive, "runtime-config/graph/graph.json", json.dumps(graph).encode()
    )
    with pytest.raises(FormatError, match="dltype 'object'"):
        read_model_library_format(data)


@pytest.mark.parametrize("data", [b"", b"not a tar at all", b"\x00" * 10])
def test_bytes_that_are_not_a_tar_are_refused(data):
    with pytest.raises(FormatError):
        read_model_library_format(data)


def test_a_gzipped_archive_is_refused_rather_than_decompressed(graph_archive):
    import gzip

    with pytest.raises(FormatError, match="archive"):
        read_model_library_format(gzip.compress(graph_archive))


def test_every_truncation_raises_format_error_or_reads_the_whole_archive(graph_archive):
    full = read_model_library_format(graph_archive)
    for end in range(0, len(graph_archive), 97):
        try:
            library = read_model_library_format(graph_archive[:end])
        except FormatError:
            continue
        # A tar ends with zero blocks that a reader may not need.
        assert (library.metadata, library.executable, library.graph_json) == (
            full.metadata,
            full.executable,
            full.graph_json,
        )


def test_random_byte_changes_raise_only_format_error(graph_archive):
    rng = np.random.default_rng(0)
    outcomes = {"refused": 0, "read": 0}
    for _ in range(int(os.environ.get("RELAYVM_FUZZ_ARCHIVES", "600"))):
        data = bytearray(graph_archive)
        for position in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            data[position] = int(rng.integers(0, 256))
        try:
            read_model_library_format(bytes(data))
        except FormatError:
            outcomes["refused"] += 1
        else:
            outcomes["read"] += 1
    assert outcomes["refused"] > 0 and outcomes["read"] > 0


def test_a_source_that_is_neither_path_nor_bytes_is_a_type_error():
    with pytest.raises(TypeError, match="path or bytes"):
        read_model_library_format(3)


# ---- malformed: archives that declare more than they hold ----------------------------------

FOUR_GB = 4_000_000_000


def _octal(value: int, width: int) -> bytes:
    return f"{value:0{width - 1}o}".encode() + b"\0"


def _with_checksum(header: bytearray) -> bytes:
    header[148:156] = b" " * 8
    header[148:156] = f"{sum(header):06o}".encode() + b"\0 "
    return bytes(header)


def gnu_sparse_member(name: str, real_size: int, stored: bytes = b"x" * 512) -> bytes:
    """A GNU sparse member (type 'S') of ``real_size`` bytes whose data is ``stored`` at the
    end: tarfile cannot write one, so the header is built from a plain one."""
    info = tarfile.TarInfo(name)
    info.size = len(stored)
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[156:157] = tarfile.GNUTYPE_SPARSE
    header[386:398] = _octal(real_size - len(stored), 12)  # first map entry: offset
    header[398:410] = _octal(len(stored), 12)  # and length
    header[482] = 0  # no extension headers
    header[483:495] = _octal(real_size, 12)  # the expanded size
    return _with_checksum(header) + stored + b"\0" * (-len(stored) % 512)


def pax_sparse_member(name: str, real_size: int, stored: bytes = b"x" * 512) -> bytes:
    """A PAX 1.0 sparse member: the map is the first block of the member's data."""
    sparse_map = f"1\n{real_size - len(stored)}\n{len(stored)}\n".encode()
    sparse_map += b"\0" * (-len(sparse_map) % 512)
    info = tarfile.TarInfo("GNUSparseFile.0/x")
    info.size = len(sparse_map) + len(stored)
    info.pax_headers = {
        "GNU.sparse.major": "1",
        "GNU.sparse.minor": "0",
        "GNU.sparse.name": name,
        "GNU.sparse.realsize": str(real_size),
    }
    body = sparse_map + stored
    return info.tobuf(format=tarfile.PAX_FORMAT) + body + b"\0" * (-len(body) % 512)


def plain_header(name: str, declared: int) -> bytes:
    """A plain member's header declaring ``declared`` bytes, with none of them following."""
    info = tarfile.TarInfo(name)
    info.size = declared
    return info.tobuf(format=tarfile.GNU_FORMAT)


def refused_within_memory(
    data: bytes, match: str, budget: int = 200 << 20, reader=read_model_library_format
) -> FormatError:
    """Read ``data`` with ``reader``, expect a FormatError, and check the peak allocation."""
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=match) as info:
            reader(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < budget, f"refusing a {len(data)}-byte archive allocated {peak} bytes"
    return info.value


@pytest.mark.parametrize("make", [gnu_sparse_member, pax_sparse_member])
def test_a_sparse_member_of_4_gb_is_refused_before_anything_is_read(graph_archive, make):
    # The small archive of the report: every member as exported, the executable sparse.
    entries = [e for e in archive_entries(graph_archive) if not e[0].name.endswith(".rvm")]
    data = make("codegen/host/lib/default.rvm", FOUR_GB) + tar_of(entries)
    assert len(data) < 32 * 1024
    error = refused_within_memory(data, r"'codegen/host/lib/default.rvm' is a sparse file")
    assert str(FOUR_GB) in str(error)


@pytest.mark.parametrize(
    ("name", "declared", "limit"),
    [
        ("metadata.json", (1 << 28) + 1, "MAX_TEXT_MEMBER_BYTES"),
        ("relay.txt", (1 << 28) + 1, "MAX_TEXT_MEMBER_BYTES"),
        ("codegen/host/lib/default.rvm", 5_000_000_000, "MAX_CONSTANT_BYTES"),
    ],
)
def test_a_member_declaring_more_than_its_limit_is_refused(name, declared, limit):
    data = plain_header(name, declared) + b"\0" * 1024
    refused_within_memory(data, rf"{re.escape(repr(name))} declares {declared} bytes.*{limit}")


def test_a_member_declaring_more_than_the_archive_holds_is_refused(graph_archive):
    data = plain_header("parameters/default.params", 100_000_000) + graph_archive
    refused_within_memory(data, r"'parameters/default.params' is truncated.*100000000 bytes")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"version": 1' + b"0" * 5000 + b"}", "digits"),
        (b'{"version": 1, "model_name": "default", "memory": ' + b"[" * 50_000, "JSON"),
    ],
)
def test_hostile_metadata_json_is_a_format_error(graph_archive, payload, message):
    with pytest.raises(FormatError, match=message) as info:
        read_model_library_format(replace_member(graph_archive, "metadata.json", payload))
    assert info.value.section == "metadata.json"


def test_a_deeply_nested_graph_is_a_format_error(graph_archive):
    payload = b'{"nodes": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    data = replace_member(graph_archive, "runtime-config/graph/graph.json", payload)
    with pytest.raises(FormatError, match="nested too deeply"):
        read_model_library_format(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g: g["nodes"][2].update(inputs=1), r"'nodes'\[2\]\.inputs must be a list"),
        (lambda g: g["nodes"][2].update(inputs=[[9, 0, 0]]), r"'nodes'\[2\]\.inputs"),
        (lambda g: g["nodes"][2].update(inputs=[["0", 0, 0]]), r"'nodes'\[2\]\.inputs"),
        (lambda g: g["nodes"][3].update(op=None), r"'nodes'\[3\]\.op must be a string"),
        (lambda g: g["nodes"][3].update(attrs=[]), r"'nodes'\[3\]\.attrs must be an object"),
        (lambda g: g.update(heads=5), "'heads'"),
    ],
)
def test_a_graph_node_of_the_wrong_shape_is_named(graph_archive, change, message):
    graph = json.loads(json.dumps(GRAPH))
    change(graph)
    data = replace_member(
        graph_archive, "runtime-config/graph/graph.json", json.dumps(graph).encode()
    )
    with pytest.raises(FormatError, match=message):
        read_model_library_format(data)


@pytest.mark.parametrize(
    "memory", [{"sids": []}, "x", [{"storage_id": "0", "size_bytes": 1}], [{"storage_id": 0}]]
)
def test_a_memory_map_that_is_not_a_list_of_storage_entries_is_named(graph_archive, memory):
    with pytest.raises(FormatError, match="'memory'"):
        read_model_library_format(with_metadata(graph_archive, memory=memory))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_path_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "model.tar"
    os.mkfifo(fifo)
    with pytest.raises(FormatError, match=r"model.tar' is a FIFO, not an archive"):
        read_model_library_format(fifo)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_path_is_refused_without_reading_it():
    with pytest.raises(FormatError, match=r"'/dev/zero' is a character device"):
        read_model_library_format("/dev/zero")


def test_a_directory_path_is_refused(tmp_path):
    with pytest.raises(FormatError, match="is a directory, not an archive"):
        read_model_library_format(tmp_path)
