"""profile() and vm.Report: rows per kernel and VM operation, table, CSV and JSON."""

from __future__ import annotations

import csv
import io
import itertools
import json

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import kernel_programs, nat, nat_programs
from vm.profiling import Report


@pytest.fixture(scope="module")
def report():
    machine = vm.VirtualMachine(kernel_programs())
    x = np.ones((10, 10), np.float32)
    return machine.profile("twice", x)


def rows_by_name(report):
    return {call["Name"]: call for call in report.calls}


def test_rows_for_kernels_and_vm_operations(report):
    rows = rows_by_name(report)
    assert set(rows) == {"vm_mod_fused_add", "VM::AllocStorage", "VM::AllocTensor"}
    kernel = rows["vm_mod_fused_add"]
    assert kernel["Count"] == 2
    assert kernel["Argument Shapes"] == "float32[10, 10], float32[10, 10], float32[10, 10]"
    assert rows["VM::AllocTensor"]["Argument Shapes"] == "float32[10, 10]"
    assert rows["VM::AllocStorage"]["Argument Shapes"] == "uint8[400]"
    assert all(call["Duration (us)"] > 0 for call in report.calls)


def test_rows_are_sorted_by_duration_and_percent_is_of_the_whole_run(report):
    durations = [call["Duration (us)"] for call in report.calls]
    assert durations == sorted(durations, reverse=True)
    total = report.device_metrics["cpu0"]["Duration (us)"]
    for call in report.calls:
        assert call["Percent"] == pytest.approx(100 * call["Duration (us)"] / total)
    assert sum(call["Percent"] for call in report.calls) < 100


def test_the_table_has_tvm_s_columns_a_sum_row_and_the_configuration(report):
    lines = report.table().splitlines()
    assert lines[0].split("  ")[0] == "Name"
    for column in ("Duration (us)", "Percent", "Count", "Argument Shapes"):
        assert column in lines[0]
    assert lines[1].startswith("vm_mod_fused_add") or lines[1].startswith("VM::")
    assert "----------" in lines
    sum_row = next(line for line in lines if line.startswith("Sum"))
    assert sum_row.split()[-1] == "6"  # per function: one storage, one tensor, one kernel
    assert any(line.startswith("Total") for line in lines)
    assert "Configuration" in lines and "Executor: VM" in lines and "Function: twice" in lines


def test_table_columns_line_up(report):
    lines = report.table().splitlines()
    header, first = lines[0], lines[1]
    # Numbers are right-aligned under their headers.
    end = header.index("Duration (us)") + len("Duration (us)")
    assert first[end - 1].isdigit() and first[end] == " "


def test_csv_has_a_header_and_one_line_per_row(report):
    parsed = list(csv.reader(io.StringIO(report.csv())))
    assert parsed[0] == ["Name", "Duration (us)", "Percent", "Count", "Argument Shapes"]
    assert len(parsed) == 1 + len(report.calls)
    kernel = next(row for row in parsed if row[0] == "vm_mod_fused_add")
    assert kernel[3] == "2" and kernel[4].count("float32[10, 10]") == 3


def test_json_uses_tvm_s_typed_values_and_reads_back(report):
    document = json.loads(report.json())
    assert set(document) == {"calls", "device_metrics", "configuration"}
    call = document["calls"][0]
    assert set(call["Duration (us)"]) == {"microseconds"}
    assert set(call["Percent"]) == {"percent"}
    assert set(call["Count"]) == {"count"}
    assert set(call["Name"]) == {"string"}
    assert document["configuration"]["Executor"] == {"string": "VM"}
    again = Report.from_json(report.json())
    assert again.calls == report.calls
    assert again.device_metrics == report.device_metrics
    assert again.configuration == report.configuration


def test_aggregation_merges_rows_with_the_same_name_and_shapes():
    report = Report(
        [
            {
                "Name": "k",
                "Duration (us)": 1.0,
                "Percent": 10.0,
                "Count": 1,
                "Argument Shapes": "a",
            },
            {
                "Name": "k",
                "Duration (us)": 2.0,
                "Percent": 20.0,
                "Count": 1,
                "Argument Shapes": "a",
            },
            {
                "Name": "k",
                "Duration (us)": 5.0,
                "Percent": 50.0,
                "Count": 1,
                "Argument Shapes": "b",
            },
        ],
        {"cpu0": {"Duration (us)": 10.0, "Count": 1}},
        {},
    )
    rows = report.table().splitlines()
    assert rows[1].split()[:4] == ["k", "5.00", "50.00", "1"]
    assert rows[2].split()[:4] == ["k", "3.00", "30.00", "2"]
    assert rows[4].split() == ["Sum", "8.00", "80.00", "3"]
    unaggregated = report.table(aggregate=False, sort=False, col_sums=False).splitlines()
    assert [line.split()[1] for line in unaggregated[1:4]] == ["1.00", "2.00", "5.00"]
    assert not any(line.startswith("Sum") for line in unaggregated)


def test_durations_print_with_thousands_separators():
    report = Report([{"Name": "k", "Duration (us)": 1234567.891, "Count": 1234}], {}, {})
    assert "1,234,567.89" in report.table() and "1,234" in report.table()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "must be JSON text"),
        ("[]", 'a "calls" list'),
        ('{"calls": [{"Name": "k"}]}', "must be one typed value"),
        ('{"calls": [{"Name": {"colour": "red"}}]}', "unknown value type 'colour'"),
        ('{"calls": [{"Count": {"count": "x"}}]}', "is not a count value"),
    ],
)
def test_from_json_rejects_other_documents(text, message):
    with pytest.raises(ValueError, match=message):
        Report.from_json(text)


def test_profiling_a_program_without_kernels_and_deep_recursion():
    machine = vm.VirtualMachine(nat_programs())
    report = machine.profile("main", nat(5000))
    counts = {c["Argument Shapes"]: c["Count"] for c in report.calls if c["Name"] == "VM::AllocADT"}
    assert counts == {"0 fields": 1, "1 fields": 5000}


def test_profile_uses_the_inputs_set():
    machine = vm.VirtualMachine(nat_programs())
    machine.set_input("main", nat(2))
    calls = machine.profile("main").calls
    assert sum(c["Count"] for c in calls if c["Name"] == "VM::AllocADT") == 3


# ---- chrome trace and plot ------------------------------------------------------------------


def kernel_calls(report):
    return sum(call["Count"] for call in report.calls if not call["Name"].startswith("VM::"))


def test_returns_chrome_trace_with_one_complete_event_per_call(report, tmp_path):
    path = tmp_path / "trace.json"
    report.to_chrome_trace(path)
    document = json.loads(path.read_text())
    assert set(document) >= {"traceEvents"}
    events = document["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    metadata = [e for e in events if e["ph"] == "M"]
    assert {e["name"] for e in metadata} == {"process_name", "thread_name"}
    assert len(complete) + len(metadata) == len(events)
    for event in complete:
        assert set(event) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert isinstance(event["ts"], float) and event["ts"] >= 0
        assert isinstance(event["dur"], float) and event["dur"] > 0
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert event["cat"] == ("vm" if event["name"].startswith("VM::") else "kernel")
    kernels = [e for e in complete if e["cat"] == "kernel"]
    assert len(kernels) == kernel_calls(report) == 2
    assert len(complete) == sum(call["Count"] for call in report.calls)
    assert kernels[0]["args"]["Argument Shapes"] == (
        "float32[10, 10], float32[10, 10], float32[10, 10]"
    )


def test_returns_chrome_trace_events_in_order_without_overlap(report):
    complete = [e for e in report.chrome_trace()["traceEvents"] if e["ph"] == "X"]
    for before, after in itertools.pairwise(complete):
        assert before["ts"] + before["dur"] <= after["ts"] + 1e-3
    total = report.device_metrics["cpu0"]["Duration (us)"]
    durations = sum(e["dur"] for e in complete)
    assert durations == pytest.approx(sum(c["Duration (us)"] for c in report.calls))
    assert durations <= total


def test_returns_chrome_trace_of_the_graph_executor():
    from tests.vm.test_graph_executor import X, Y, module

    document = module().profile(x=X, y=Y).chrome_trace()
    complete = [e for e in document["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in complete] == ["vm_mod_add"] * 3
    assert all(
        e["args"]["Argument Shapes"] == "float32[4], float32[4], float32[4]" for e in complete
    )
    process = next(e for e in document["traceEvents"] if e["name"] == "process_name")
    assert process["args"]["name"] == "relayvm Graph"


def test_traps_chrome_trace_of_a_report_read_back_from_json(report, tmp_path):
    restored = Report.from_json(report.json())
    with pytest.raises(ValueError, match="no timeline"):
        restored.to_chrome_trace(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_returns_operator_times_summed_over_shapes():
    report = Report(
        [
            {"Name": "k", "Duration (us)": 3.0, "Count": 1, "Argument Shapes": "a"},
            {"Name": "k", "Duration (us)": 4.0, "Count": 2, "Argument Shapes": "b"},
            {"Name": "VM::AllocTensor", "Duration (us)": 1.0, "Count": 5},
        ],
        {"cpu0": {"Duration (us)": 10.0, "Count": 1}},
        {},
    )
    assert report.operator_times() == [("k", 7.0, 3), ("VM::AllocTensor", 1.0, 5)]


def test_returns_a_png_plot_of_operator_time(report, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    path = tmp_path / "profile.png"
    report.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 500
    # Something besides the white background was drawn.
    assert (pixels[..., :3] < 0.5).any()


def test_returns_a_plot_with_the_tail_folded_into_other(tmp_path):
    pytest.importorskip("matplotlib")
    calls = [{"Name": f"op{i}", "Duration (us)": float(i + 1), "Count": 1} for i in range(30)]
    report = Report(calls, {"cpu0": {"Duration (us)": 1000.0, "Count": 1}}, {})
    report.plot(tmp_path / "p.svg", top=5)
    svg = (tmp_path / "p.svg").read_text()
    assert "other (25 ops)" in svg and "op29" in svg and "op3" not in svg.replace("op30", "")


def test_invalid_plot_arguments(report, tmp_path):
    with pytest.raises(ValueError, match="top must be at least 1"):
        report.plot(tmp_path / "p.png", top=0)
    with pytest.raises(ValueError, match="no rows"):
        Report([], {}, {}).plot(tmp_path / "p.png")


def test_traps_plot_without_matplotlib_names_the_install(report, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        report.plot(tmp_path / "p.png")
