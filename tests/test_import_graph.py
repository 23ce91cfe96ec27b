"""The module import graph of compiler/, vm/ and serialization/ has no cycle.

The graph is drawn from the source with ``ast``: every ``import`` statement is an arrow from
the module it sits in to the module it names, whether it runs when the module loads or only
when a function is called (a function-level import hides an arrow; it does not remove it).
Relative imports are resolved, and ``from pkg import name`` points at ``pkg.name`` when that is
a module and at ``pkg`` otherwise. Parent packages a name passes through are not arrows: every
module would otherwise point at its own package, which imports it back.

Imports under ``if TYPE_CHECKING:`` never run and are not arrows.

A module imports the modules it needs at its top. The one exception is an import deferred to
keep a heavy package out of a process until it is needed: numba (seconds of start-up), or the
optional onnx and torch. It sits in a function body and carries a marker comment on its first
line, naming the package and why the caller can wait::

    from vm.kernels import library  # deferred: numba, <why this caller can wait>

Such an import is no arrow; the test checks that its target really does load the package it
names (through module-level imports, its parent packages included), so the marker cannot hide
an ordinary cycle. Any other function-level import of one of our modules fails the test.
"""

from __future__ import annotations

import ast
import pathlib
import re
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "vm", "serialization")
MARKER = re.compile(r"#\s*deferred:\s*(?P<package>[\w.]+)(?P<reason>.*)$")
#: What a marker may name: the packages worth keeping out of a process until needed.
DEFERRABLE = frozenset({"numba", "onnx", "torch"})


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    module_level: bool
    deferred: tuple[str, str] | None  # (package, reason) of a deferral marker


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement with whether it runs when the module loads (iterative walk)."""
    found = []
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, module_level = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, module_level))
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend((child, module_level) for child in node.orelse)
            continue
        inner = module_level and not isinstance(
            node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
        )
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return found


def _resolve(
    node: ast.Import | ast.ImportFrom, source: str, is_package: bool, modules: set[str]
) -> list[str]:
    """The modules of ours an import statement names (most specific module for each name)."""
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        names: list[str | None] = [None] * len(bases)
    else:
        if node.level:
            package = source.split(".") if is_package else source.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        bases = [base] * len(node.names)
        names = [alias.name for alias in node.names]
    targets = []
    for base, name in zip(bases, names):
        if name is not None and f"{base}.{name}" in modules:
            targets.append(f"{base}.{name}")
            continue
        # `import a.b.c` names a.b.c; fall back to the longest prefix that is a module of ours.
        parts = base.split(".")
        while parts and ".".join(parts) not in modules:
            parts.pop()
        if parts:
            targets.append(".".join(parts))
    return list(dict.fromkeys(targets))


def _outside_packages(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        names = {alias.name.split(".")[0] for alias in node.names}
    else:
        names = {(node.module or "").split(".")[0]} if node.level == 0 else set()
    return names - set(PACKAGES)


def build_graph() -> tuple[list[Arrow], dict[str, set[str]]]:
    """All arrows between our modules, and the outside packages each module imports when it
    loads (top-level names: ``numba``, ``onnx``, ...)."""
    paths = all_modules()
    modules = set(paths)
    arrows: list[Arrow] = []
    outside: dict[str, set[str]] = {}
    for source, path in sorted(paths.items()):
        text = path.read_text()
        lines = text.splitlines()
        is_package = path.name == "__init__.py"
        for node, module_level in _import_nodes(ast.parse(text, str(path))):
            if module_level:
                outside.setdefault(source, set()).update(_outside_packages(node))
            match = MARKER.search(lines[node.lineno - 1])
            deferred = (
                (match.group("package"), match.group("reason").strip(" ,;:-")) if match else None
            )
            for target in _resolve(node, source, is_package, modules):
                if target != source:
                    arrows.append(Arrow(source, target, node.lineno, module_level, deferred))
    return arrows, outside


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def _edges(arrows: list[Arrow]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for arrow in arrows:
        if arrow.deferred is None:
            edges.setdefault(arrow.source, set()).add(arrow.target)
    return edges


def _describe(component: list[str], arrows: list[Arrow]) -> str:
    members = set(component)
    inside = [a for a in arrows if a.source in members and a.target in members]
    lines = [f"cycle through {len(component)} modules:"]
    for a in sorted(inside, key=lambda a: (a.source, a.line)):
        where = "" if a.module_level else " (in a function)"
        lines.append(f"  {a.source}:{a.line} -> {a.target}{where}")
    return "\n".join(lines)


def _dedup(arrows: list[Arrow]) -> list[Arrow]:
    return list({(a.source, a.line): a for a in arrows}.values())


def test_the_import_graph_has_no_cycle():
    arrows, _ = build_graph()
    cycles = find_cycles(_edges(arrows))
    assert not cycles, "import cycles:\n" + "\n".join(_describe(c, arrows) for c in cycles)


def test_functions_import_our_modules_only_to_defer_a_heavy_package():
    arrows, _ = build_graph()
    hidden = [
        f"{a.source}:{a.line} imports {a.target} inside a function"
        for a in _dedup(arrows)
        if not a.module_level and a.deferred is None
    ]
    assert not hidden, "\n".join(hidden)


def _in_ir(module: str) -> bool:
    return module == "compiler.ir" or module.startswith("compiler.ir.")


def test_the_ir_is_the_lowest_layer_of_the_compiler():
    # The printer and the operator table plug into compiler.ir.hooks instead.
    arrows, _ = build_graph()
    upward = [
        f"{a.source}:{a.line} imports {a.target}"
        for a in _dedup(arrows)
        if _in_ir(a.source) and a.target.startswith("compiler") and not _in_ir(a.target)
    ]
    assert not upward, "\n".join(upward)


def test_deferred_imports_really_put_off_the_package_they_name():
    arrows, outside = build_graph()
    module_edges: dict[str, set[str]] = {}
    for arrow in arrows:
        if arrow.module_level:
            module_edges.setdefault(arrow.source, set()).add(arrow.target)

    def loads(start: str) -> set[str]:
        """Every outside package importing ``start`` loads (its parent packages run too)."""
        seen, todo, found = {start}, [start], set()
        while todo:
            module = todo.pop()
            found |= outside.get(module, set())
            parents = {module.rsplit(".", k)[0] for k in range(1, module.count(".") + 1)}
            for target in (module_edges.get(module, set()) | parents) - seen:
                seen.add(target)
                todo.append(target)
        return found

    wrong = []
    for a in _dedup(arrows):
        if a.deferred is None:
            continue
        package, reason = a.deferred
        where = f"{a.source}:{a.line}"
        if a.module_level:
            wrong.append(f"{where} is marked deferred but runs when the module loads")
        elif package not in DEFERRABLE:
            wrong.append(f"{where} defers {package}, not one of {sorted(DEFERRABLE)}")
        elif not reason:
            wrong.append(f"{where} defers {package} without saying why")
        elif package not in loads(a.target):
            wrong.append(f"{where} defers {a.target}, which does not load {package}")
    assert not wrong, "\n".join(wrong)


def test_the_graph_sees_relative_and_function_level_imports():
    # The walker itself: a test of the test, on a fixed snippet, so a regression in the
    # resolver cannot make the cycle test pass vacuously.
    modules = {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"}
    tree = ast.parse(
        "from . import b\n"
        "from .sub import c\n"
        "from pkg.sub import missing_name\n"
        "if TYPE_CHECKING:\n"
        "    import pkg.b\n"
        "def f():\n"
        "    import pkg.sub.c\n"
    )
    found = [
        (_resolve(node, "pkg.a", False, modules), level) for node, level in _import_nodes(tree)
    ]
    assert sorted(found) == [
        (["pkg.b"], True),
        (["pkg.sub"], True),
        (["pkg.sub.c"], False),
        (["pkg.sub.c"], True),
    ]
    assert find_cycles({"x": {"y"}, "y": {"z"}, "z": {"x"}, "w": {"x"}}) == [["x", "y", "z"]]
