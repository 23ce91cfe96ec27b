"""Profiles: per-kernel and per-VM-operation times of one run, as TVM's ``profiling.Report``.

Runtime layer (``vm``); standard library only.

``VirtualMachine.profile`` runs a function with a :class:`Recorder` decoded into
the kernels and the costly VM operations, then builds a :class:`Report`. Rows are
aggregated by name and argument shapes. The report prints as TVM's table (name
left-aligned, numbers right-aligned, two spaces between columns, a ``Sum`` row, a
``Total`` row per device, then the configuration), as CSV, and as TVM's JSON shape
(``{"calls": [...], "device_metrics": {...}, "configuration": {...}}`` with typed
values such as ``{"microseconds": 12.5}``), which :meth:`Report.from_json` reads back.
"""

from __future__ import annotations

import csv
import io
import json
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
    """Accumulates (count, nanoseconds) per (name, argument shapes) during a profiled run."""

    def __init__(self) -> None:
        self.totals: dict[tuple[str, str], list[int]] = {}

    def record(self, name: str, shapes: str, elapsed_ns: int) -> None:
        """Add one call of ``name`` with ``shapes`` that took ``elapsed_ns``."""
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
    """

    def __init__(
        self,
        calls: Sequence[Mapping[str, Any]],
        device_metrics: Mapping[str, Mapping[str, Any]],
        configuration: Mapping[str, Any],
    ) -> None:
        self.calls = [dict(call) for call in calls]
        self.device_metrics = {name: dict(m) for name, m in device_metrics.items()}
        self.configuration = dict(configuration)

    @classmethod
    def from_recorder(
        cls, recorder: Recorder, total_ns: int, configuration: Mapping[str, Any]
    ) -> Report:
        """The report of one profiled run that took ``total_ns`` in all."""
        total_us = total_ns / 1e3
        calls = []
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
        return cls(calls, {DEVICE: {DURATION: total_us, COUNT: 1}}, configuration)

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
