"""The on-disk kernel cache: location, atomic module files, cache keys, reuse across processes.

Returns group: the cache directory follows RELAYVM_CACHE_DIR / XDG_CACHE_HOME / HOME and
falls back to a temporary directory with one warning; module files are written once,
atomically, and never rewritten when unchanged; the cache key follows the normalized
description; a fresh process loads a cached kernel without compiling anything; processes
racing to build the same kernel both succeed.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

import vm.kernels.cache as cache
from tests.vm.kernels.harness import seed_library_cache
from vm.kernels import cache_dir, load_kernel
from vm.kernels.description import parse_description
from vm.kernels.library import kernel_key

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture
def fresh_cache_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "_FALLBACK", None)
    monkeypatch.setattr(cache, "_CHECKED", {})


def test_cache_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, fresh_cache_state: None
) -> None:
    monkeypatch.setenv("RELAYVM_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("RELAYVM_CACHE_DIR")
    assert cache_dir() == tmp_path / "xdg" / "relayvm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "relayvm"
    assert (tmp_path / "home" / ".cache" / "relayvm").is_dir()


def test_unwritable_cache_dir_falls_back_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, fresh_cache_state: None
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("RELAYVM_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = cache_dir()
        second = cache_dir()
    assert first == second != blocker / "cache"
    assert first.is_dir() and os.access(first, os.W_OK)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "not writable" in messages[0]


def test_module_files_are_written_once(tmp_path: pathlib.Path) -> None:
    path = cache.write_module(tmp_path, "k_x.py", "A = 1\n")
    assert path.read_text() == "A = 1\n"
    before = path.stat()
    again = cache.write_module(tmp_path, "k_x.py", "A = 1\n")
    after = again.stat()
    # Same inode and timestamp: an unchanged module is never rewritten.
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    # Different text under the same name is damage (or another build): replaced, with a warning.
    with pytest.warns(cache.KernelCacheWarning, match=r"k_x.py did not hold the generated source"):
        cache.write_module(tmp_path, "k_x.py", "A = 2\n")
    assert path.read_text() == "A = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k_x.py"]


def test_a_failed_write_leaves_no_partial_module(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        cache.write_module(tmp_path, "k_y.py", "B = 1\n")
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writers_of_one_module_agree(tmp_path: pathlib.Path) -> None:
    text = "C = 3\n" * 1000
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(20):
                cache.write_module(tmp_path, "k_z.py", text)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert (tmp_path / "k_z.py").read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k_z.py"]


def _desc(dtype: str = "float32", **attrs: object) -> dict:
    rank = 3 if attrs.get("keepdims") else 2
    return {
        "inputs": [[dtype, 3]],
        "outputs": [[dtype, rank]],
        "nodes": [{"op": "sum", "args": [0], "attrs": {"axis": [1], **attrs},
                   "outputs": [[dtype, rank]]}],
        "results": [1],
    }  # fmt: skip


def test_cache_key_follows_the_normalized_description() -> None:
    def key(d: dict) -> str:
        return kernel_key(parse_description(d))

    base = key(_desc())
    assert key(_desc(keepdims=False, exclude=False)) == base  # defaults spelled out
    assert key({**_desc(), "nodes": [{**_desc()["nodes"][0], "attrs": {"axis": (1,)}}]}) == base
    assert key(_desc("float64")) != base
    assert key(_desc(keepdims=True)) != base
    other_op = _desc()
    other_op["nodes"][0]["op"] = "prod"
    assert key(other_op) != base
    assert len(base) == 64 and int(base, 16) >= 0


SUBPROCESS = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__module__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    from vm.kernels import load_kernel
    description = json.loads(sys.argv[1])
    last_op = getattr(np, description["nodes"][-1]["op"])
    kernel = load_kernel(description)
    x = np.arange(24, dtype="float32").reshape(2, 3, 4)
    out = np.empty((2, 4), "float32")
    kernel.entry(x, out)
    print(json.dumps({
        "from_cache": kernel.from_cache,
        "cache_hits": sum(kernel.dispatcher.stats.cache_hits.values()),
        "correct": bool(np.allclose(out, last_op(x.sum(axis=1)), rtol=1e-6)),
        "module": kernel.dispatcher.py_func.__module__,
        "compiled": sorted(set(compiled)),
        "files": sorted(p.name for p in kernel.path.parent.iterdir() if p.is_file()),
    }))
    """
)


def _spawn(cache: pathlib.Path, description: dict) -> subprocess.Popen:
    env = {**os.environ, "RELAYVM_CACHE_DIR": str(seed_library_cache(cache))}
    env.pop("NUMBA_CACHE_DIR", None)
    return subprocess.Popen(
        [sys.executable, "-c", SUBPROCESS, json.dumps(description)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _sum_exp() -> dict:
    return {
        "inputs": [["float32", 3]],
        "outputs": [["float32", 2]],
        "nodes": [
            {"op": "sum", "args": [0], "attrs": {"axis": [1]}, "outputs": [["float32", 2]]},
            {"op": "exp", "args": [1], "attrs": {}, "outputs": [["float32", 2]]},
        ],
        "results": [2],
    }


def test_a_fresh_process_loads_a_cached_kernel_without_compiling(tmp_path: pathlib.Path) -> None:
    cold = _result(_spawn(tmp_path, _sum_exp()))
    assert cold["correct"] and not cold["from_cache"]
    warm = _result(_spawn(tmp_path, _sum_exp()))
    assert warm["correct"] and warm["from_cache"] and warm["cache_hits"] >= 1
    # The first process compiled the kernel; the second compiled nothing at all.
    assert cold["module"] in cold["compiled"]
    assert warm["compiled"] == []
    assert [f for f in warm["files"] if not f.startswith("k_")] == []


def test_processes_racing_to_build_one_kernel_both_succeed(tmp_path: pathlib.Path) -> None:
    description = _sum_exp()
    description["nodes"][1]["op"] = "tanh"  # a kernel no other test builds in this directory
    first, second = _spawn(tmp_path, description), _spawn(tmp_path, description)
    results = [_result(first), _result(second)]
    assert all(r["correct"] for r in results)
    modules = [f for f in results[1]["files"] if f.endswith(".py")]
    assert len(modules) == 1 and modules[0].startswith("k_")
    assert _result(_spawn(tmp_path, description))["from_cache"]


def test_threads_loading_one_new_kernel_share_one_build() -> None:
    description = _sum_exp()
    description["nodes"][1]["op"] = "sqrt"
    kernels: list[object] = []
    barrier = threading.Barrier(4)

    def load() -> None:
        barrier.wait()
        kernels.append(load_kernel(description))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kernels) == 4 and all(k is kernels[0] for k in kernels)


CONVOLUTIONS = textwrap.dedent(
    """
    import json
    import numpy as np
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    import vm
    from compiler import relay

    # A 1x1 stride-2 block (small: product without the GIL), a 3x3 one with more channels
    # than pixels (im2col by channel chunks), a big one (chunks of output rows).
    x = relay.var("x", shape=(1, 16, 8, 8), dtype="float32")
    y = relay.var("y", shape=(1, 4, 64, 64), dtype="float32")
    rng = np.random.default_rng(0)
    w1 = relay.const(rng.standard_normal((32, 16, 1, 1)).astype("float32"))
    w2 = relay.const(rng.standard_normal((128, 16, 3, 3)).astype("float32"))
    w3 = relay.const(rng.standard_normal((64, 4, 3, 3)).astype("float32"))
    body = relay.Tuple([
        relay.nn.conv2d(x, w1, strides=(2, 2)),
        relay.nn.conv2d(x, w2, padding=(1, 1)),
        relay.nn.conv2d(y, w3, padding=(1, 1)),
    ])
    exe = relay.vm.compile(relay.IRModule.from_expr(relay.Function([x, y], body)))
    machine = vm.VirtualMachine(exe, vm.cpu())
    a, b = np.ones((1, 16, 8, 8), "float32"), np.ones((1, 4, 64, 64), "float32")
    for _ in range(3):
        machine.invoke("main", a, b)
    print(json.dumps(sorted(set(compiled))))
    """
)


def test_a_fresh_process_runs_convolutions_from_the_cache_without_compiling() -> None:
    # Every compiled function the convolutions call from Python must be cached on disk:
    # one that is not compiles again in each process (about 2 s for the shared product).
    def compiled_in_a_fresh_process() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", CONVOLUTIONS],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    compiled_in_a_fresh_process()  # fills the cache if this run has not yet
    assert compiled_in_a_fresh_process() == []


def test_every_module_generated_kernels_can_reach_is_in_the_cache_key() -> None:
    # A helper module left out of the key would let a changed helper keep serving machine
    # code compiled from its old source.
    from vm.kernels import fingerprint

    here = pathlib.Path(fingerprint.__file__).parent
    modules = {path.relative_to(here).as_posix() for path in here.glob("**/*.py")}
    bookkeeping = {"__init__.py", "runtime/__init__.py", "cache.py", "library.py"}
    assert modules - bookkeeping == set(fingerprint.LIBRARY_MODULES)
