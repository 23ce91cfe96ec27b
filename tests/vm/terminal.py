"""Run a command line in a child process whose stderr is a pseudo-terminal (a test helper).

The progress bar is drawn only on a terminal; a pty makes the child's ``isatty()`` true
while the test still reads everything it wrote.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_on_terminal(argv: list[str], timeout: float = 300) -> tuple[int, str, str]:
    """Run ``python *argv`` from the repository root with stderr on a pty.

    Returns the exit status, stdout (a pipe) and what was written to the terminal.
    """
    controller, child_end = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        process = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=child_end,
        )
    finally:
        os.close(child_end)
    chunks = []
    try:
        # Read until the child's end closes (EIO on Linux); the child blocks if the pty
        # buffer fills, so it is drained while the child runs, not after.
        while True:
            try:
                data = os.read(controller, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        stdout = process.stdout.read() if process.stdout else b""
        code = process.wait(timeout=timeout)
    finally:
        os.close(controller)
        if process.stdout:
            process.stdout.close()
    return code, stdout.decode(), b"".join(chunks).decode(errors="replace")
