"""Generated kernel modules import the runtime modules they call and no other
(``vm.kernels.codegen``).

Returns group: a dense layer's module imports ``products`` and the helpers, a depthwise
convolution's ``convolution`` and ``depthwise``, a max pool's ``pool_loops``; :func:`library_calls`
names each library function the code calls, outside comments.
"""

from __future__ import annotations

from vm.kernels import codegen
from vm.kernels.description import parse_description


def _source(op: str, shapes: list[list[int]], attrs: dict) -> str:
    rank = len(shapes[0])
    description = {
        "inputs": [["float32", len(s)] for s in shapes],
        "outputs": [["float32", rank]],
        "nodes": [
            {
                "op": op,
                "args": list(range(len(shapes))),
                "attrs": attrs,
                "outputs": [["float32", rank]],
            }
        ],
        "results": [len(shapes)],
    }
    return codegen.generate(parse_description(description), "test")


def _imports(source: str) -> set[str]:
    return {line.split()[3] for line in source.splitlines() if line.startswith("from vm.kernels")}


def test_a_module_imports_only_the_library_modules_it_calls() -> None:
    dense = _source("nn.dense", [[1, 8], [8, 8]], {})
    assert _imports(dense) == {"products", "helpers"}
    assert ("products", "product_into") in codegen.library_calls(dense)
    depthwise = _source("nn.conv2d", [[1, 4, 9, 9], [4, 1, 3, 3]], {"groups": 4})
    assert {"convolution", "depthwise", "helpers"} <= _imports(depthwise)
    assert "pool_loops" not in _imports(depthwise)
    pool = _source("nn.max_pool2d", [[1, 4, 9, 9]], {"pool_size": [3, 3]})
    assert "pool_loops" in _imports(pool) and "products" not in _imports(pool)
    assert ("pool_loops", "max_pool2d_float") in codegen.library_calls(pool)
    compile(dense, "dense.py", "exec")


def test_library_calls_skip_comments() -> None:
    source = "\n".join(
        [
            "# products.product_into(x)",
            "    h.expect(a, b, 'c')",
            "    y = np.h.x + dwc.image_groups(x)",
        ]
    )
    assert codegen.library_calls(source) == {("helpers", "expect"), ("depthwise", "image_groups")}
