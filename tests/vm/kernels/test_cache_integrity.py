"""Damaged kernel cache files heal: checked before anything loads them, discarded with a
warning that names them, compiled again.

Returns group: sealed payloads round-trip; every cached numba function of the library
uses sealed files.
Malformed group: a truncated, garbled or bit-flipped file of each kind (a generated module,
its bytecode, numba's index, numba's data; the library's own cached functions) makes a
fresh process warn, name the file and still return the right answer, and the next process
loads the rebuilt entry without compiling; a fuzz of random damage does the same
(``RELAYVM_CACHE_FUZZ`` damaged files, 4 by default, ``RELAYVM_CACHE_FUZZ_BATCH`` of them
per child process, ``RELAYVM_CACHE_FUZZ_SEED``; crashes, hangs and wrong answers are
counted and reported, ``pytest -s`` prints the counts).
Invalid group: a regular file where the cache directory or its ``kernels`` directory
belongs, or a directory where a kernel module belongs, makes the cache fall back to a
temporary directory with a warning; numba files that cannot be read or written are
bypassed with a warning and the kernel still runs.

Every run that could crash happens in a child process with a private cache directory.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest

import vm.kernels.cache as cache
from tests.vm.kernels.harness import seed_library_cache

ROOT = pathlib.Path(__file__).resolve().parents[3]

#: Unary operators of the small kernels the child builds (inputs are positive).
OPS = ("negative", "exp", "sqrt", "tanh")

CHILD = textwrap.dedent(
    """
    import json, sys, warnings

    caught = []
    warnings.showwarning = lambda message, category, *rest: caught.append(
        f"{category.__name__}: {message}")
    warnings.simplefilter("always")

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
    from vm.kernels.runtime import jobs

    report = {"kernels": {}}
    x = np.linspace(0.5, 2.0, 7, dtype="float32")
    for op in json.loads(sys.argv[1]):
        kernel = load_kernel({
            "inputs": [["float32", 1]], "outputs": [["float32", 1]],
            "nodes": [{"op": op, "args": [0], "attrs": {}, "outputs": [["float32", 1]]}],
            "results": [1],
        })
        out = np.empty_like(x)
        kernel.entry(x, out)
        report["kernels"][op] = {
            "correct": bool(np.allclose(out, getattr(np, op)(x), rtol=1e-6)),
            "from_cache": kernel.from_cache,
            "module": kernel.path.stem,
            "path": str(kernel.path),
        }
    report["compiled"] = sorted(set(compiled))
    report["library_hits"] = {
        "pool_loops._max_pool_chunk": jobs.callback(jobs.MAX_POOL).cache_hits,
    }
    report["warnings"] = caught
    print(json.dumps(report))
    """
)


def _run(
    cache_dir: pathlib.Path,
    ops: tuple[str, ...] = OPS,
    pythonpath: pathlib.Path = ROOT,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    env = {**os.environ, "RELAYVM_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(pythonpath)}
    env.pop("NUMBA_CACHE_DIR", None)
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(list(ops))],
        cwd=pythonpath,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _report(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, f"exit code {done.returncode}: {done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def _copy_cache(source: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    # copy2 keeps the modification times, so nothing looks newer than it is.
    shutil.copytree(source, target, copy_function=shutil.copy2)
    return target


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A private cache directory holding the kernels of :data:`OPS`, compiled once."""
    directory = seed_library_cache(tmp_path_factory.mktemp("warm") / "cache")
    report = _report(_run(directory))
    assert all(k["correct"] for k in report["kernels"].values())
    return directory


def _kernel_files(cache_dir: pathlib.Path, module: str) -> dict[str, pathlib.Path]:
    """The cache files of one generated kernel, by kind."""
    kernels = cache_dir / "kernels"
    pycache = kernels / "__pycache__"
    kinds = {
        "module": [kernels / f"{module}.py"],
        "bytecode": [*pycache.glob(f"{module}.*.sealed-code"), *pycache.glob(f"{module}.*.pyc")],
        "index": sorted(pycache.glob(f"{module}.*.nbi")),
        "data": sorted(pycache.glob(f"{module}.*.nbc")),
    }
    files = {}
    for kind, paths in kinds.items():
        if paths:
            assert len(paths) == 1, f"{kind} files of {module}: {paths}"
            files[kind] = paths[0]
    return files


def damage(path: pathlib.Path, how: str, rng: random.Random) -> None:
    """Truncate, garble, bit-flip, empty or extend the file at ``path`` (keeping its mtime)."""
    data = bytearray(path.read_bytes())
    stat = path.stat()
    if how == "truncate":
        data = data[: rng.randrange(len(data))]
    elif how == "garble":
        start = rng.randrange(len(data))
        for k in range(start, min(len(data), start + rng.randint(1, 64))):
            data[k] = (data[k] + rng.randint(1, 255)) % 256
    elif how == "bitflip":
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "empty":
        data = bytearray()
    elif how == "append":
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    else:  # pragma: no cover - a typo in a test
        raise ValueError(how)
    path.write_bytes(bytes(data))
    # Same modification time: only the contents say the file changed.
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


DAMAGES = ("truncate", "garble", "bitflip")


# --- returns ----------------------------------------------------------------------------


def test_a_sealed_payload_round_trips() -> None:
    for payload in (b"", b"x", bytes(range(256)) * 100):
        assert cache.unseal(cache.seal(payload)) == payload


def test_every_cached_library_function_uses_sealed_files() -> None:
    # The seal is installed into numba's dispatchers; a numba that created its caches
    # some other way would silently load unchecked files again.
    import importlib

    from numba.core.caching import NullCache
    from numba.core.ccallback import CFunc
    from numba.core.dispatcher import Dispatcher

    import vm.kernels
    from vm.kernels.runtime import callbacks, jobs

    here = pathlib.Path(vm.kernels.__file__).parent
    cached = []
    for path in sorted([*here.glob("[!_]*.py"), *here.glob("runtime/[!_]*.py")]):
        dotted = ".".join(path.relative_to(here).with_suffix("").parts)
        module = importlib.import_module(f"vm.kernels.{dotted}")
        for name, value in vars(module).items():
            if not isinstance(value, (Dispatcher, CFunc)):
                continue
            if isinstance(value._cache, NullCache):
                continue
            cached.append(f"{module.__name__}.{name}")
            assert isinstance(value._cache._cache_file, cache._SealedCacheFile), name
    # The C callbacks are compiled on first need: every job kind's, and every entry point.
    jobs.require(*jobs.OWNERS)
    callbacks.link(*callbacks.entries())
    for name, value in callbacks.compiled().items():
        if name.startswith("vm.kernels."):  # not another test's callback
            cached.append(name)
            assert isinstance(value._cache._cache_file, cache._SealedCacheFile), name
    runtime = "vm.kernels.runtime."
    assert f"{runtime}products._blas_chunk" in cached
    assert f"{runtime}products._packed_entry" in cached
    assert f"{runtime}pool_loops._max_pool_chunk" in cached


def test_unsealed_bytes_are_rejected_with_the_reason() -> None:
    sealed = cache.seal(b"payload")
    with pytest.raises(ValueError, match="shorter than"):
        cache.unseal(sealed[:10])
    with pytest.raises(ValueError, match="magic"):
        cache.unseal(b"\x80\x05" + sealed[2:])
    with pytest.raises(ValueError, match="do not match their sha256"):
        cache.unseal(sealed[:-1] + b"P")


# --- malformed --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["module", "bytecode", "index", "data"])
def test_a_damaged_cache_file_is_discarded_with_a_warning_and_rebuilt(
    kind: str, warm_cache: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    directory = _copy_cache(warm_cache, tmp_path / "cache")
    rng = random.Random(f"{kind}-13")
    ops = OPS[: len(DAMAGES)]
    damaged = {}
    for op, how in zip(ops, DAMAGES):
        module = f"k_{_module_key(directory, op)}"
        damaged[op] = _kernel_files(directory, module)[kind]
        damage(damaged[op], how, rng)

    report = _report(_run(directory, ops))
    text = "\n".join(report["warnings"])
    for op, path in damaged.items():
        assert report["kernels"][op]["correct"], op
        assert path.name in text, f"no warning names {path.name}: {text}"
    assert all(w.startswith("KernelCacheWarning") for w in report["warnings"]), text
    prefix = cache.KERNEL_MODULE_PREFIX
    recompiled = {n.removeprefix(prefix) for n in report["compiled"] if n.startswith(prefix)}
    if kind in ("index", "data"):
        # numba's files are rebuilt by compiling; the module and its bytecode are rewritten.
        assert recompiled == {_module_key(directory, op) for op in ops}
    else:
        assert recompiled == set()

    again = _report(_run(directory, ops))
    assert again["warnings"] == [] and again["compiled"] == []
    assert all(k["correct"] and k["from_cache"] for k in again["kernels"].values())


def _module_key(directory: pathlib.Path, op: str) -> str:
    """The cache key of the kernel of ``op`` (found by the operator in its source)."""
    for path in (directory / "kernels").glob("k_*.py"):
        text = path.read_text(errors="replace")
        if f'"op": "{op}"' in text:
            return path.stem.removeprefix("k_")
    raise AssertionError(f"no kernel module for {op} in {directory}")


def test_a_bit_flip_in_the_librarys_own_cached_machine_code_is_rebuilt(
    warm_cache: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # The library's functions are cached under the cache directory, keyed by the library's
    # hash (a job's chunk code like this one is loaded when it is first required).
    from numba.core.registry import cpu_target

    from vm.kernels.runtime import jobs

    files = jobs.callback(jobs.MAX_POOL)._cache._cache_file
    # The entry of the target numba compiles for here (the index keys entries by target;
    # the children inherit it), not one another target left in the same directory.
    target = cpu_target.target_context.codegen().magic_tuple()
    (name,) = [name for key, name in files._load_index().items() if key[1] == target]
    directory = _copy_cache(warm_cache, tmp_path / "cache")
    library = directory / cache.library_dir().relative_to(cache.cache_dir())
    damage(library / name, "bitflip", random.Random(13))

    report = _report(_run(directory, OPS[:1]))
    text = "\n".join(report["warnings"])
    assert report["kernels"][OPS[0]]["correct"]
    assert name in text, text
    assert report["library_hits"]["pool_loops._max_pool_chunk"] == 0  # compiled again
    again = _report(_run(directory, OPS[:1]))
    assert again["warnings"] == [] and again["library_hits"]["pool_loops._max_pool_chunk"] == 1


def test_fuzzed_damage_to_cache_files_never_crashes_or_answers_wrong(
    warm_cache: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    cases = int(os.environ.get("RELAYVM_CACHE_FUZZ", "4"))
    seed = int(os.environ.get("RELAYVM_CACHE_FUZZ_SEED", "13"))
    # Damaged kernels per child process: fewer processes by default, 1 to attribute crashes.
    per_child = max(1, min(len(OPS), int(os.environ.get("RELAYVM_CACHE_FUZZ_BATCH", "4"))))
    rng = random.Random(seed)
    # clean: right answer, a warning naming the file, rebuilt for the next process.
    kinds_of_outcome = ("clean", "silent", "not rebuilt", "crash", "error", "hang", "wrong")
    outcomes = dict.fromkeys(kinds_of_outcome, 0)
    failures: list[str] = []
    done_cases = 0
    batch = 0
    while done_cases < cases:
        # One child per batch: each kernel of the batch gets one damaged file.
        directory = _copy_cache(warm_cache, tmp_path / f"cache{batch}")
        ops = rng.sample(OPS, min(per_child, cases - done_cases))
        plan, paths = [], []
        for op in ops:
            files = _kernel_files(directory, f"k_{_module_key(directory, op)}")
            kind = rng.choice(sorted(files))
            how = rng.choice(["truncate", "garble", "bitflip", "empty", "append"])
            path = files[kind]
            damage(path, how, rng)
            plan.append(f"{op}:{kind}:{how}")
            paths.append(path)
        done_cases += len(ops)
        batch += 1
        try:
            done = _run(directory, tuple(ops), timeout=300)
        except subprocess.TimeoutExpired:
            outcomes["hang"] += len(ops)
            failures.append(f"{plan}: hang")
            continue
        if done.returncode < 0:
            outcomes["crash"] += len(ops)
            failures.append(f"{plan}: signal {-done.returncode}")
            continue
        if done.returncode != 0:
            outcomes["error"] += len(ops)
            failures.append(f"{plan}: {done.stderr.strip().splitlines()[-1:]}")
            continue
        report = json.loads(done.stdout.strip().splitlines()[-1])
        second = _run(directory, tuple(ops))
        again = json.loads(second.stdout.strip().splitlines()[-1]) if second.returncode == 0 else {}
        rebuilt = {op: k["from_cache"] for op, k in again.get("kernels", {}).items()}
        text = "\n".join(report["warnings"])
        for op, step, path in zip(ops, plan, paths):
            if not report["kernels"][op]["correct"]:
                outcome = "wrong"
            elif path.name not in text:
                outcome = "silent"
            elif not rebuilt.get(op) or again["warnings"]:
                outcome = "not rebuilt"
            else:
                outcome = "clean"
            outcomes[outcome] += 1
            if outcome != "clean":
                failures.append(f"{step}: {outcome}")
    print(f"cache fuzz: {cases} damaged files (seed {seed}): {outcomes}")
    assert not failures, f"{outcomes}: {failures}"


# --- invalid ----------------------------------------------------------------------------


@pytest.fixture
def fresh_cache_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache, "_FALLBACK", None)
    monkeypatch.setattr(cache, "_CHECKED", {})


@pytest.mark.parametrize("blocked", ["cache", "kernels"])
def test_a_regular_file_in_place_of_the_cache_directory_falls_back_with_a_warning(
    blocked: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, fresh_cache_state: None
) -> None:
    directory = tmp_path / "cache"
    if blocked == "cache":
        directory.write_text("a file, not a directory")
    else:
        directory.mkdir()
        (directory / "kernels").write_text("a file, not a directory")
    monkeypatch.setenv("RELAYVM_CACHE_DIR", str(directory))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernels = cache.kernels_dir()
        again = cache.kernels_dir()
    assert kernels == again and kernels.is_dir() and not kernels.is_relative_to(directory)
    messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
    assert len(messages) == 1, messages
    assert f"{directory} is not writable" in messages[0]
    assert ("NotADirectoryError" if blocked == "cache" else "FileExistsError") in messages[0]


def test_a_directory_in_place_of_a_kernel_module_falls_back_with_a_warning(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, fresh_cache_state: None
) -> None:
    monkeypatch.setenv("RELAYVM_CACHE_DIR", str(tmp_path / "cache"))
    blocked = tmp_path / "cache" / "kernels" / "k_abc.py"
    blocked.mkdir(parents=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = cache.store_module("k_abc.py", "A = 1\n")
    assert path.read_text() == "A = 1\n" and not path.is_relative_to(tmp_path / "cache")
    (message,) = [str(w.message) for w in caught]
    assert f"the kernel module {blocked} cannot be written (IsADirectoryError" in message


def test_a_kernel_whose_cache_directory_is_a_file_still_runs(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, fresh_cache_state: None
) -> None:
    # End to end in this process, with a kernel no other test builds.
    import numpy as np

    from vm.kernels import load_kernel

    (tmp_path / "cache").write_text("a file, not a directory")
    monkeypatch.setenv("RELAYVM_CACHE_DIR", str(tmp_path / "cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = load_kernel({
            "inputs": [["float64", 3]], "outputs": [["float64", 3]],
            "nodes": [{"op": "floor", "args": [0], "attrs": {}, "outputs": [["float64", 3]]}],
            "results": [1],
        })  # fmt: skip
    x = np.linspace(-2, 2, 12).reshape(2, 3, 2)
    out = np.empty_like(x)
    kernel(x, out)
    np.testing.assert_array_equal(out, np.floor(x))
    assert kernel.path.parent == cache._FALLBACK / "kernels"
    assert any("is not writable" in str(w.message) for w in caught)


def test_numba_files_that_cannot_be_written_are_bypassed_with_a_warning(
    warm_cache: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # A directory where a kernel's numba index belongs: it can be neither read nor
    # replaced, so the kernel is compiled (in every process), with warnings, and works.
    directory = _copy_cache(warm_cache, tmp_path / "cache")
    index = _kernel_files(directory, f"k_{_module_key(directory, 'exp')}")["index"]
    index.unlink()
    index.mkdir()
    (index / "keep").write_text("so the directory cannot be removed")
    report = _report(_run(directory, ("exp",)))
    assert report["kernels"]["exp"]["correct"] and not report["kernels"]["exp"]["from_cache"]
    text = "\n".join(report["warnings"])
    assert f"cannot read the kernel cache file {index}" in text, text
    assert "could not write the kernel cache files" in text, text
