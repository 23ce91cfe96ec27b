"""``build_kernels``: an executable's kernels built ahead of use, reported through a callback.

Returns: each distinct kernel is built once and reported once, with the total, after a
``(0, total)`` call; the kernels are the in-process table's, so a machine made afterwards
builds nothing. New kernels are compiled by builder processes into the disk cache and
loaded from there; a second process, finding them built, starts no builder. Invalid: a
bad description fails before any kernel is built or reported, and a bad process count in
the environment is named.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import vm.prebuild
from tests.vm.kernels.harness import Program, seed_library_cache
from tests.vm.kernels.sharing_kernels import conv_packed_blocks
from vm.kernels import KernelDescriptionError, load_kernel
from vm.kernels.description import parse_description
from vm.kernels.library import LibraryUnit, kernel_key, library_units
from vm.kernels.runtime import symbols
from vm.prebuild import (
    MIN_PARALLEL_KERNELS,
    PROCESSES_ENV,
    _Schedule,
    build_in_processes,
    build_kernels,
    build_processes,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary(op: str) -> dict:
    a = np.ones((2, 3), "float32")
    program = Program([a, a])
    return program.description(program.add(op, [0, 1]))


def test_each_distinct_kernel_is_reported_once_with_the_total() -> None:
    calls: list[tuple[int, int]] = []
    kernels = build_kernels(
        [binary("add"), binary("multiply"), binary("add")],
        lambda done, total: calls.append((done, total)),
    )
    assert calls == [(0, 2), (1, 2), (2, 2)]
    assert [k.key for k in kernels] == [
        load_kernel(binary("add")).key,
        load_kernel(binary("multiply")).key,
    ]
    assert kernels[0] is load_kernel(binary("add"))


def test_no_descriptions_report_a_total_of_zero() -> None:
    calls: list[tuple[int, int]] = []
    assert build_kernels([], lambda done, total: calls.append((done, total))) == []
    assert calls == [(0, 0)]


def test_without_a_callback_the_kernels_are_still_built() -> None:
    (kernel,) = build_kernels([binary("subtract")])
    assert kernel is load_kernel(binary("subtract"))


def test_an_invalid_description_fails_before_anything_is_reported() -> None:
    calls: list[tuple[int, int]] = []
    with pytest.raises(KernelDescriptionError):
        build_kernels([binary("add"), {"nodes": "nope"}], lambda *a: calls.append(a))
    assert calls == []


# --- builder processes -------------------------------------------------------------------------

BUILDERS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from vm.prebuild import build_kernels

    descriptions = json.loads(sys.argv[1])
    calls = []
    kernels = build_kernels(descriptions, lambda *a: calls.append(a), processes=2)
    x = np.arange(1, 7, dtype="float32").reshape(2, 3)
    results = []
    for kernel in kernels:
        out = np.empty((2, 3), "float32")
        kernel.entry(x, x, out)
        results.append(out.tolist())
    print(json.dumps({
        "calls": calls,
        "from_cache": [k.from_cache for k in kernels],
        "results": results,
    }))
    """
)


def _child(cache: pathlib.Path, code: str, *argv: str, stdin: str | None = None) -> str:
    """The standard output of ``code`` run by a new interpreter whose cache directory is
    ``cache`` (given the compiled kernel library first)."""
    env = {**os.environ, "RELAYVM_CACHE_DIR": str(seed_library_cache(cache))}
    env.pop("RELAYVM_BUILD_PROCESSES", None)
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        input=stdin,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _build_in_a_fresh_cache(cache: pathlib.Path, descriptions: list[dict]) -> dict:
    out = _child(cache, BUILDERS, json.dumps(descriptions))
    return json.loads(out.strip().splitlines()[-1])


def test_new_kernels_built_by_builder_processes_load_here_from_the_disk_cache(
    tmp_path: pathlib.Path,
) -> None:
    ops = ["add", "multiply", "subtract", "maximum"]
    first = _build_in_a_fresh_cache(tmp_path, [binary(op) for op in ops])
    # The builders compiled every kernel; this process loaded each from numba's disk cache.
    assert first["from_cache"] == [True] * 4
    assert [c[1] for c in first["calls"]] == [4] * 5
    assert sorted(c[0] for c in first["calls"]) == [0, 1, 2, 3, 4]
    x = np.arange(1, 7, dtype="float32").reshape(2, 3)
    expected = [getattr(np, op)(x, x).tolist() for op in ops]
    assert first["results"] == expected
    # Built before: the next process starts no builder and loads them all itself.
    again = _build_in_a_fresh_cache(tmp_path, [binary(op) for op in ops])
    assert again["from_cache"] == [True] * 4 and again["results"] == expected
    assert again["calls"] == [[0, 4], [1, 4], [2, 4], [3, 4], [4, 4]]


def test_a_kernel_needs_the_library_units_it_calls_and_the_units_they_call() -> None:
    program, results = conv_packed_blocks()
    graph = library_units(program.description(results))
    entries = {unit.name: unit for unit in graph if unit.part == "entry"}
    # The column blocks call by symbol the register tiles, the pixel panels, a pointwise
    # convolution's items and a product stored transposed; those two call the first two.
    blocks = entries[symbols.CONV_BLOCKS]
    tiles = {entries[symbols.TILE], entries[symbols.PIXEL_PANELS]}
    items, transposed = entries[symbols.POINTWISE_ITEMS], entries[symbols.TRANSPOSED]
    assert set(graph[blocks]) == tiles | {items, transposed}
    assert set(graph[items]) == tiles
    assert set(graph[transposed]) == {entries[symbols.TILE]}
    assert all(set(links) <= set(graph) for links in graph.values())
    assert all(unit.module.startswith("vm.kernels.runtime.") for unit in graph)
    assert library_units(binary("add")) == {}


def test_the_schedule_hands_out_each_task_once_after_what_it_needs() -> None:
    tile, blocks = LibraryUnit("entry", "t", "m"), LibraryUnit("entry", "b", "m")
    # Given kernels first: the order breaks ties only.
    schedule = _Schedule(
        {"add": (), "dense": (tile,), "conv": (tile, blocks), blocks: (tile,), tile: ()}
    )
    # The unit most tasks wait for first, then the one ready kernel.
    assert schedule.take() == tile
    assert schedule.take() == "add"
    taken: list[object] = []
    waiter = threading.Thread(target=lambda: taken.append(schedule.take()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and taken == []  # nothing is ready until the tile is built
    schedule.finish(tile)
    waiter.join(60)
    assert taken == [blocks]  # a kernel waits for the blocks, none for the dense one
    assert schedule.take() == "dense"
    schedule.finish(blocks)
    assert schedule.take() == "conv"
    assert schedule.take() is None


SERVE = textwrap.dedent(
    """
    import vm.prebuild
    vm.prebuild._serve()
    """
)


def test_a_builder_answers_each_task_as_it_comes(tmp_path: pathlib.Path) -> None:
    program, results = conv_packed_blocks()
    description = program.description(results)
    (unit,) = [u for u in library_units(description) if u.name == symbols.CONV_BLOCKS]
    tasks = [
        {"unit": list(unit)},
        {"unit": ["entry", "relayvm_no_such_entry", unit.module]},
        {"kernel": description},
        {"kernel": {"inputs": "no"}},
    ]
    out = _child(tmp_path, SERVE, stdin="".join(json.dumps(task) + "\n" for task in tasks))
    key = kernel_key(parse_description(description))
    assert out.split() == ["ok", "failed", key, "failed"]


def test_too_few_new_kernels_start_no_builder_nor_ask_for_examples() -> None:
    assert MIN_PARALLEL_KERNELS > 2

    def examples() -> list:
        raise AssertionError("examples are wanted only when builders start")

    described = [binary("add"), binary("multiply")]
    assert build_in_processes(described, processes=8, examples=examples) == []


def test_a_builder_runs_each_kernel_it_built_once_on_zeros_of_the_example(monkeypatch) -> None:
    calls: list[tuple] = []

    class Recorder:
        key = "k"

        def __call__(self, *arrays: np.ndarray) -> None:
            calls.append(tuple((a.shape, a.dtype.name, int(np.count_nonzero(a))) for a in arrays))
            raise ValueError("whatever a rehearsal raises is dropped")

    monkeypatch.setattr(vm.prebuild, "load_kernel", lambda description: Recorder())
    example = [[[2, 3], "float32"], [[3], "int64"], [[2, 3], "float32"]]
    lines = [{"kernel": {}, "example": example}, {"kernel": {}, "example": None}]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(t) + "\n" for t in lines)))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    vm.prebuild._serve()
    assert out.getvalue().split() == ["k", "k"]
    assert calls == [(((2, 3), "float32", 0), ((3,), "int64", 0), ((2, 3), "float32", 0))]


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_process_count_in_the_environment_is_named(monkeypatch, value: str) -> None:
    monkeypatch.setenv(PROCESSES_ENV, value)
    with pytest.raises(ValueError, match=rf"RELAYVM_BUILD_PROCESSES='{value}'.*positive integer"):
        build_processes()


def test_the_environment_sets_the_process_count(monkeypatch) -> None:
    monkeypatch.setenv(PROCESSES_ENV, "3")
    assert build_processes() == 3
    monkeypatch.delenv(PROCESSES_ENV)
    assert build_processes() >= 1
