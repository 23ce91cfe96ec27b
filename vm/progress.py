"""The command line's progress bar: one line on a terminal, redrawn in place.

Runtime layer (``vm``), used by :mod:`vm.cli` and ``compiler.cli``. The runtime reports
progress through callbacks (:func:`vm.prebuild.build_kernels`) and never prints;
this module turns such a callback into a bar. Nothing is drawn when the stream is not a
terminal, so piped or redirected output and log files stay free of carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

#: Erase from the cursor to the end of the line (ANSI), so a shorter redraw leaves no tail.
_CLEAR_TO_END = "\x1b[K"


class ProgressBar:
    """``bar(done, total)`` draws ``label [#####.....] done/total  1.2 s`` on ``stream``.

    Parameters
    ----------
    label : str
        What is counted, printed before the bar.
    stream : text stream
        Where to draw (a terminal).
    width : int
        The number of cells of the bar.
    """

    def __init__(self, label: str, stream: TextIO, width: int = 30) -> None:
        self.label = label
        self.stream = stream
        self.width = width
        self.drawn = False
        self._start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if total <= 0:
            return
        filled = self.width * min(done, total) // total
        bar = "#" * filled + "." * (self.width - filled)
        seconds = time.perf_counter() - self._start
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}  {seconds:.1f} s{_CLEAR_TO_END}")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """End the bar's line, leaving its last state on screen."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def progress_bar(
    label: str, quiet: bool = False, stream: TextIO | None = None
) -> ProgressBar | None:
    """A :class:`ProgressBar` on ``stream`` (default stderr), or None when it should be quiet.

    Parameters
    ----------
    label : str
        What is counted.
    quiet : bool
        True for the ``-q/--quiet`` flag: no bar.
    stream : text stream, optional
        Where to draw; default ``sys.stderr``. No bar unless it is a terminal.

    Returns
    -------
    ProgressBar or None
        None when ``quiet`` or when ``stream`` is not a terminal.
    """
    stream = sys.stderr if stream is None else stream
    if quiet or stream is None:
        return None
    try:
        on_terminal = stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        on_terminal = False
    return ProgressBar(label, stream) if on_terminal else None
