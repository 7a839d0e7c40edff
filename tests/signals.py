"""Cross-process signal files of the test suite, written and awaited without races.

A process that signals another writes the file under a temporary name and renames
it into place (``os.replace`` is atomic on POSIX), so a reader that sees the file
sees all of its content: never an empty or half-written file. Every signal,
barrier and result file the tests poll goes through these two functions.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterable
from pathlib import Path


def write_atomically(path: str | os.PathLike[str], text: str = "") -> None:
    """Make ``path`` appear with ``text`` as its whole content, in one step."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # one per writer thread
    tmp.write_text(text)
    os.replace(tmp, target)


def wait_for_file(
    path: str | os.PathLike[str],
    *,
    processes: Iterable[subprocess.Popen[bytes]] = (),
    timeout: float = 60,
    what: str | None = None,
) -> str:
    """Wait until ``path`` exists and return its content.

    Fails fast if one of ``processes`` exits before the file appeared (it never will),
    and after ``timeout`` seconds. The file must have been written with
    :func:`write_atomically`, so its content is complete once it exists.
    """
    target = Path(path)
    watched = list(processes)
    label = what or target.name
    deadline = time.monotonic() + timeout
    while not target.exists():
        dead = [p.returncode for p in watched if p.poll() is not None]
        if dead and not target.exists():
            raise AssertionError(f"a process exited ({dead}) before it wrote {label}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {label}")
        time.sleep(0.01)
    return target.read_text()
