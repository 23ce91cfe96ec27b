"""Smoke run of the memory-planning report on a tiny ResNet: it prints both peaks and
planning does not make them worse."""

from __future__ import annotations

from benchmarks import bench_memory, models


def test_tiny_resnet_peak_is_reduced_by_planning() -> None:
    mod, params = models.resnet18_module(models.resnet18_weights(width=2, num_classes=5), image=16)
    fused = bench_memory.measure("resnet18", mod, params)
    unfused = bench_memory.measure("resnet18", mod, params, ("FuseOps",))
    for row in (fused, unfused):
        assert 0 < row.planned < row.unplanned
    # Without fusion every batch-norm step keeps its own output: more to reuse.
    assert unfused.outputs > fused.outputs and unfused.ratio > fused.ratio


def test_report_prints_a_row_per_pipeline(capsys) -> None:  # type: ignore[no-untyped-def]
    assert bench_memory.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "default (fused)" in out and "FuseOps disabled" in out and "resnet18" in out
