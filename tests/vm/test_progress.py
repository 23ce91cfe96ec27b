"""The command line's progress bar (vm.progress).

Returns: a bar on a terminal redraws one line in place with the count and total, and its
``close`` ends the line. Quiet: no bar for a stream that is not a terminal, has no
``isatty`` or is closed, nor with ``quiet``; a total of zero draws nothing.
"""

from __future__ import annotations

import io

from vm.progress import ProgressBar, progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_redraws_one_line_with_the_count_and_total() -> None:
    stream = Terminal()
    bar = ProgressBar("building kernels", stream, width=10)
    bar(0, 4)
    bar(2, 4)
    bar(4, 4)
    bar.close()
    text = stream.getvalue()
    frames = text.split("\r")[1:]
    assert len(frames) == 3 and text.endswith("\n") and text.count("\n") == 1
    assert frames[0].startswith("building kernels [..........] 0/4")
    assert frames[1].startswith("building kernels [#####.....] 2/4")
    assert frames[2].startswith("building kernels [##########] 4/4")


def test_a_total_of_zero_draws_nothing() -> None:
    stream = Terminal()
    bar = ProgressBar("k", stream)
    bar(0, 0)
    bar.close()
    assert stream.getvalue() == ""


def test_a_terminal_gets_a_bar_unless_quiet() -> None:
    assert isinstance(progress_bar("k", stream=Terminal()), ProgressBar)
    assert progress_bar("k", quiet=True, stream=Terminal()) is None


def test_no_bar_off_a_terminal() -> None:
    closed = io.StringIO()
    closed.close()
    assert progress_bar("k", stream=io.StringIO()) is None
    assert progress_bar("k", stream=closed) is None
    assert progress_bar("k", stream=object()) is None  # type: ignore[arg-type]
