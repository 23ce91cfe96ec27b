"""The ``NC{n}n`` weight layout of ``nn.contrib_dense_pack``: its name and its panel width.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); standard library only, so the
compiler's operator definitions, the kernel rules and the shape functions all read layout names the
same way.

A ``(units, in_features)`` weight in ``NC{n}n`` is ``(ceil(units / n), in_features, n)``:
element ``[p, k, j]`` is weight row ``p * n + j``, column ``k``, rows past ``units`` zero.
"""

from __future__ import annotations

import re

#: The panel width whose float32 products run in register tiles (``vm.kernels.runtime.packed``).
PANEL = 32
#: The layout ``AlterOpLayout`` gives constant dense weights.
LAYOUT = f"NC{PANEL}n"

_NAME = re.compile(r"NC([1-9][0-9]*)n")


def panel_width(layout: object) -> int | None:
    """The ``n`` of an ``NC{n}n`` layout name, or None for anything else.

    Parameters
    ----------
    layout : object
        The attribute value, normally a string such as ``"NC32n"``.

    Returns
    -------
    int or None
        The panel width.
    """
    found = _NAME.fullmatch(layout) if isinstance(layout, str) else None
    return None if found is None else int(found.group(1))


def unsupported(name: str, layout: object) -> str:
    """The message for an attribute ``name`` whose ``layout`` is not ``NC{n}n``."""
    return (
        f"attribute {name}={layout!r} is not supported; only 'NC<n>n' layouts (panels of n "
        "output features, such as 'NC32n') are"
    )
