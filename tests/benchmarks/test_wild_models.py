"""The wild-model catalogue and its targets (returns, invalid): names are unique, only
importable sources are offered, an unknown name is refused naming the known ones, and issue
15's targets are judged from a run's ratios."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import bench_wild, wild_models


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


def test_targets_judge_each_model_its_own_limit_and_the_median() -> None:
    ratios = {"resnet50": 1.1, "mobilenet_v2": 1.2, "gpt2": 0.9}
    lines = bench_wild.judge_targets(ratios, failed=["bert_base"])
    assert lines == [
        "bert_base: failed: MISSED",
        "resnet50: 1.10x (target <= 1.00x): MISSED",
        "mobilenet_v2: 1.20x (target <= 1.25x): met",
        "gpt2: 0.90x (target <= 1.00x): met",
        "median over 3 models: 1.10x (target <= 1.00x): MISSED",
    ]
    assert bench_wild.judge_targets({}) == ["no model ran: the median is not judged"]
