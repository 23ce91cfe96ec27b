"""Profiles: per-kernel and per-VM-operation times of one run, as TVM's ``profiling.Report``.

Runtime layer (``vm``); standard library only.

``VirtualMachine.profile`` runs a function with a :class:`Recorder` decoded into
the kernels and the costly VM operations, then builds a :class:`Report`. Rows are
aggregated by name and argument shapes. The report prints as TVM's table (name
left-aligned, numbers right-aligned, two spaces between columns, a ``Sum`` row, a
``Total`` row per device, then the configuration), as CSV, and as TVM's JSON shape
(``{"calls": [...], "device_metrics": {...}, "configuration": {...}}`` with typed
values such as ``{"microseconds": 12.5}``), which :meth:`Report.from_json` reads back.

Besides the aggregated rows, a profiled run keeps its timeline (one event per call), which
:meth:`Report.to_chrome_trace` writes as the trace-event JSON that Perfetto and
chrome://tracing open; :meth:`Report.plot` draws per-operator time with matplotlib, an
optional dependency imported only when a plot is asked for.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

NAME = "Name"
DURATION = "Duration (us)"
PERCENT = "Percent"
COUNT = "Count"
SHAPES = "Argument Shapes"
#: The leading columns, in TVM's order; other columns follow, sorted by name.
COLUMNS = (NAME, DURATION, PERCENT, COUNT, SHAPES)
DEVICE = "cpu0"

# Column -> the JSON type tag TVM uses for its values.
_TYPED_COLUMNS = {DURATION: "microseconds", PERCENT: "percent", COUNT: "count"}
_TAGS = {"microseconds": float, "percent": float, "count": int, "ratio": float, "string": str}


class Recorder:
    """Accumulates (count, nanoseconds) per (name, argument shapes) during a profiled run.

    It also keeps the timeline: one ``(name, shapes, start_ns, elapsed_ns)`` per call,
    with ``start_ns`` relative to the recorder's creation.
    """

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str], list[int]] = {}
        self.events: list[tuple[str, str, int, int]] = []
        self._origin = time.perf_counter_ns()

    def record(self, name: str, shapes: str, elapsed_ns: int) -> None:
        """Add one call of ``name`` with ``shapes`` that took ``elapsed_ns``."""
        # Callers report right after the call ends (after formatting the shapes), so the
        # start derived from "now" is late by that formatting only, and calls, which run one
        # after another, never overlap on the timeline.
        start = time.perf_counter_ns() - elapsed_ns - self._origin
        self.events.append((name, shapes, max(start, 0), elapsed_ns))
        entry = self.totals.get((name, shapes))
        if entry is None:
            self.totals[(name, shapes)] = [1, elapsed_ns]
        else:
            entry[0] += 1
            entry[1] += elapsed_ns


class Report:
    """A profile: rows of calls, per-device totals and the run's configuration.

    Parameters
    ----------
    calls : sequence of dict
        One dict per row: ``Name`` (str), ``Duration (us)`` (float), ``Percent``
        (float), ``Count`` (int), ``Argument Shapes`` (str), and possibly more columns.
    device_metrics : dict
        Device name -> metrics of the whole run (``Duration (us)``, ``Count``).
    configuration : dict
        Settings of the run, printed after the table (``Executor``, ...).
    events : sequence of tuple, optional
        The run's timeline, one ``(name, shapes, start_ns, elapsed_ns)`` per call; empty
        for a report read back from JSON, which keeps only the aggregated rows.
    """

    def __init__(
        self,
        calls: Sequence[Mapping[str, Any]],
        device_metrics: Mapping[str, Mapping[str, Any]],
        configuration: Mapping[str, Any],
        events: Sequence[tuple[str, str, int, int]] = (),
    ) -> None:
        self.calls = [dict(call) for call in calls]
        self.device_metrics = {name: dict(m) for name, m in device_metrics.items()}
        self.configuration = dict(configuration)
        self.events = list(events)

    @classmethod
    def from_recorder(
        cls, recorder: Recorder, total_ns: int, configuration: Mapping[str, Any]
    ) -> Report:
        """The report of one profiled run that took ``total_ns`` in all."""
        total_us = total_ns / 1e3
        calls: list[dict[str, Any]] = []
        for (name, shapes), (count, elapsed_ns) in recorder.totals.items():
            duration = elapsed_ns / 1e3
            calls.append(
                {
                    NAME: name,
                    DURATION: duration,
                    PERCENT: 100.0 * duration / total_us if total_us > 0 else 0.0,
                    COUNT: count,
                    SHAPES: shapes,
                }
            )
        calls.sort(key=lambda call: -call[DURATION])
        return cls(calls, {DEVICE: {DURATION: total_us, COUNT: 1}}, configuration, recorder.events)

    # ---- views -----------------------------------------------------------------------------

    def _columns(self, rows: Sequence[Mapping[str, Any]]) -> list[str]:
        extra = sorted({key for row in rows for key in row} - set(COLUMNS))
        return [*COLUMNS, *extra]

    def _aggregated(self) -> list[dict[str, Any]]:
        groups: dict[tuple[Any, Any], dict[str, Any]] = {}
        for call in self.calls:
            key = (call.get(NAME, ""), call.get(SHAPES, ""))
            group = groups.get(key)
            if group is None:
                groups[key] = dict(call)
                continue
            for column in (DURATION, PERCENT, COUNT):
                if column in call:
                    group[column] = group.get(column, 0) + call[column]
        return list(groups.values())

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """The report as TVM's text table.

        Parameters
        ----------
        sort : bool
            Sort rows by duration, longest first.
        aggregate : bool
            Merge rows with the same name and argument shapes.
        col_sums : bool
            Add the ``Sum`` row of durations, percentages and counts.
        """
        rows = self._aggregated() if aggregate else [dict(call) for call in self.calls]
        if sort:
            rows.sort(key=lambda row: -row.get(DURATION, 0.0))
        columns = self._columns(rows)
        body = [[_cell(column, row.get(column)) for column in columns] for row in rows]
        footer: list[list[str]] = []
        if col_sums:
            sums: dict[str, Any] = {NAME: "Sum"}
            for column in (DURATION, PERCENT, COUNT):
                sums[column] = sum(row.get(column, 0) for row in rows)
            footer.append([_cell(column, sums.get(column)) for column in columns])
        for _device, metrics in self.device_metrics.items():
            total = {NAME: "Total", DURATION: metrics.get(DURATION), COUNT: metrics.get(COUNT)}
            footer.append([_cell(column, total.get(column)) for column in columns])
        widths = [
            max(len(line[i]) for line in [columns, *body, *footer]) for i in range(len(columns))
        ]

        def render(cells: Sequence[str]) -> str:
            parts = [
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(cells, widths))
            ]
            return "  ".join(parts).rstrip()

        lines = [render(columns), *(render(line) for line in body)]
        if footer:
            lines.append("-" * 10)
            lines.extend(render(line) for line in footer)
        if self.configuration:
            lines += ["", "Configuration", "-------------"]
            lines += [f"{key}: {value}" for key, value in self.configuration.items()]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Report: {len(self.calls)} rows, devices {sorted(self.device_metrics)}>"

    def csv(self) -> str:
        """The rows (as stored, not aggregated) as CSV with a header line."""
        columns = self._columns(self.calls)
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for call in self.calls:
            writer.writerow(["" if call.get(c) is None else call.get(c) for c in columns])
        return out.getvalue()

    def json(self) -> str:
        """The report in TVM's JSON shape, with typed values."""
        document = {
            "calls": [{k: _typed(k, v) for k, v in call.items()} for call in self.calls],
            "device_metrics": {
                device: {k: _typed(k, v) for k, v in metrics.items()}
                for device, metrics in self.device_metrics.items()
            },
            "configuration": {k: _typed(k, v) for k, v in self.configuration.items()},
        }
        return json.dumps(document, indent=2, sort_keys=True)

    def chrome_trace(self) -> dict[str, Any]:
        """The timeline as a trace-event document (the JSON object format).

        Each call is one complete event (``"ph": "X"``) with ``ts`` and ``dur`` in
        microseconds, ``cat`` ``"kernel"`` or ``"vm"`` (the VM's own operations), and the
        argument shapes in ``args``; metadata events name the process and thread.

        Raises
        ------
        ValueError
            If the report has no timeline (a report read back from JSON has none).
        """
        if not self.events:
            raise ValueError(
                "this profiling report has no timeline (reports read back from JSON keep only "
                "the aggregated rows); profile a run to get one"
            )
        pid, tid = os.getpid(), 0
        executor = str(self.configuration.get("Executor", "VM"))
        trace: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": pid, "tid": tid,
             "args": {"name": f"relayvm {executor}"}},
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
             "args": {"name": str(self.configuration.get("Function", "main"))}},
        ]  # fmt: skip
        for name, shapes, start_ns, elapsed_ns in self.events:
            trace.append(
                {
                    "name": name,
                    "cat": "vm" if name.startswith("VM::") else "kernel",
                    "ph": "X",
                    "ts": start_ns / 1e3,
                    "dur": elapsed_ns / 1e3,
                    "pid": pid,
                    "tid": tid,
                    "args": {SHAPES: shapes},
                }
            )
        other = {str(k): str(v) for k, v in self.configuration.items()}
        return {"traceEvents": trace, "displayTimeUnit": "ns", "otherData": other}

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the timeline to ``path`` as trace-event JSON (see :meth:`chrome_trace`).

        Open the file in https://ui.perfetto.dev or chrome://tracing.
        """
        document = self.chrome_trace()
        with open(path, "w", encoding="utf-8") as out:
            json.dump(document, out)

    def operator_times(self) -> list[tuple[str, float, int]]:
        """Per operator name: ``(name, total microseconds, calls)``, longest first."""
        totals: dict[str, list[float]] = {}
        for call in self.calls:
            entry = totals.setdefault(str(call.get(NAME, "")), [0.0, 0])
            entry[0] += float(call.get(DURATION, 0.0))
            entry[1] += int(call.get(COUNT, 0))
        rows = [(name, us, int(count)) for name, (us, count) in totals.items()]
        rows.sort(key=lambda row: -row[1])
        return rows

    def plot(self, path: str | os.PathLike[str], top: int = 20) -> None:
        """Draw per-operator time as a horizontal bar chart into ``path`` (PNG, SVG, PDF...).

        Parameters
        ----------
        path : str or path-like
            The image file; its suffix picks the format.
        top : int
            Operators drawn one bar each; the rest are summed into one ``other`` bar.

        Raises
        ------
        ImportError
            If matplotlib is not installed.
        ValueError
            If the report has no rows or ``top`` is below 1.
        """
        if top < 1:
            raise ValueError(f"top must be at least 1, got {top}")
        rows = self.operator_times()
        if not rows:
            raise ValueError("this profiling report has no rows to plot")
        figure_class = _matplotlib_figure()
        if len(rows) > top:
            rest = rows[top:]
            rows = [
                *rows[:top],
                (f"other ({len(rest)} ops)", sum(r[1] for r in rest), sum(r[2] for r in rest)),
            ]
        total = self.device_metrics.get(DEVICE, {}).get(DURATION)
        figure = figure_class(figsize=(9, 1.2 + 0.35 * len(rows)), layout="constrained")
        axes = figure.add_subplot()
        names = [name for name, _, _ in reversed(rows)]
        times = [us for _, us, _ in reversed(rows)]
        bars = axes.barh(names, times, color="tab:blue")
        labels = [
            f"{us:,.1f} us x{count}" + (f" ({100 * us / total:.1f}%)" if total else "")
            for _, us, count in reversed(rows)
        ]
        axes.bar_label(bars, labels=labels, padding=3, fontsize=8)
        axes.set_xlabel("time (us)")
        axes.margins(x=0.35)
        title = "relayvm profile: time per operator"
        if "Function" in self.configuration:
            title += (
                f" ({self.configuration.get('Executor', 'VM')}, {self.configuration['Function']})"
            )
        axes.set_title(title)
        axes.tick_params(axis="y", labelsize=8)
        figure.savefig(path, dpi=110)

    @classmethod
    def from_json(cls, text: str | bytes) -> Report:
        """Read a report written by :meth:`json` (or by TVM).

        Raises
        ------
        ValueError
            If ``text`` is not such a document (naming what is wrong).
        """
        try:
            document = json.loads(text)
        except (TypeError, ValueError) as err:
            raise ValueError(f"a profiling report must be JSON text: {err}") from None
        if not isinstance(document, dict) or not isinstance(document.get("calls"), list):
            raise ValueError('a profiling report is a JSON object with a "calls" list')
        calls = [_untyped_mapping(call, f"calls[{i}]") for i, call in enumerate(document["calls"])]
        metrics = document.get("device_metrics", {})
        if not isinstance(metrics, dict):
            raise ValueError('"device_metrics" must be an object of devices')
        devices = {
            device: _untyped_mapping(values, f"device_metrics[{device!r}]")
            for device, values in metrics.items()
        }
        configuration = _untyped_mapping(document.get("configuration", {}), "configuration")
        return cls(calls, devices, configuration)


def _matplotlib_figure() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "plotting a profile needs matplotlib: pip install matplotlib "
            "(or pip install 'relayvm[plot]')"
        ) from None
    return Figure


def _cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column == DURATION:
        return f"{value:,.2f}"
    if column == PERCENT:
        return f"{value:.2f}"
    if column == COUNT:
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _typed(column: str, value: Any) -> dict[str, Any]:
    tag = _TYPED_COLUMNS.get(column)
    if tag is None:
        if isinstance(value, (bool, str)):
            tag = "string"
            value = str(value)
        elif isinstance(value, int):
            tag = "count"
        elif isinstance(value, float):
            tag = "ratio"
        else:
            tag = "string"
            value = str(value)
    return {tag: value}


def _untyped_mapping(mapping: Any, where: str) -> dict[str, Any]:
    if not isinstance(mapping, dict):
        raise ValueError(f"{where} must be a JSON object")
    result = {}
    for key, typed in mapping.items():
        if not isinstance(typed, dict) or len(typed) != 1:
            raise ValueError(f'{where}[{key!r}] must be one typed value like {{"count": 3}}')
        ((tag, value),) = typed.items()
        kind = _TAGS.get(tag)
        if kind is None:
            raise ValueError(
                f"{where}[{key!r}] has the unknown value type {tag!r} "
                f"(known: {', '.join(sorted(_TAGS))})"
            )
        try:
            result[key] = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}[{key!r}]: {value!r} is not a {tag} value") from None
    return result
