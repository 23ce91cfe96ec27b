"""The package layering of API.md holds: vm never imports compiler; serialization imports neither;
the kernels' compiled runtime (vm.kernels.runtime) imports nothing of their generator.

Checked two ways: statically over every source file's imports, and dynamically by importing
the lower layers in a fresh interpreter and looking at sys.modules.
"""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"vm": {"compiler"}, "serialization": {"compiler", "vm"}}


def imported_top_levels(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_source_file_imports_a_higher_layer(package):
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_top_levels(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_importing_a_layer_loads_no_higher_layer(package):
    code = (
        "import sys, importlib, pkgutil\n"
        f"import {package}\n"
        f"for m in pkgutil.walk_packages({package}.__path__, '{package}.'):\n"
        "    if not m.name.endswith('__main__'):  # running it would start the CLI\n"
        "        importlib.import_module(m.name)\n"
        f"higher = {sorted(FORBIDDEN[package])!r}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in higher)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"importing {package} loaded {out.stdout.strip()}"


def _imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_kernel_runtime_imports_nothing_of_the_generator():
    # Compiled runtime support (vm.kernels.runtime) is what kernels call while they run; the
    # generator (descriptions, rules, emitters, source, cache) builds them and stays apart.
    offenders = []
    for path in sorted((ROOT / "vm" / "kernels" / "runtime").rglob("*.py")):
        ours = {
            m
            for m in _imported_modules(path)
            if m.split(".")[0] in {"compiler", "serialization", "vm"}
        }
        bad = {
            m for m in ours if m != "vm.kernels.runtime" and not m.startswith("vm.kernels.runtime.")
        }
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not offenders, "the runtime reaches into the generator:\n" + "\n".join(offenders)
