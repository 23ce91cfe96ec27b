"""The wild-model catalogue (returns, invalid): names are unique, only importable sources are
offered, an unknown name is refused naming the known ones."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import wild_models


def test_every_model_has_a_unique_name_and_a_known_source() -> None:
    names = [m.name for m in wild_models.MODELS]
    assert len(names) == len(set(names))
    assert {m.source for m in wild_models.MODELS} <= {"transformers", "torchvision"}


def test_only_models_whose_library_imports_are_available() -> None:
    available = wild_models.available()
    for wild in available:
        assert importlib.util.find_spec(wild.source) is not None
    if importlib.util.find_spec("torch") is None:
        assert available == []


def test_an_unknown_model_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="resnet50"):
        wild_models.by_name("lenet")
