"""A PySpark worker whose first attempt of every file-group write dies after writing its file.

Used as ``spark.python.worker.module`` (with ``spark.python.use.daemon=false``) by
test_early_conflict.py: the retried attempt writes the file group again under
another write token, and the commit must delete the dead attempt's file.
"""

from __future__ import annotations

import os
import runpy
from typing import Any

from pyspark import TaskContext

from tidemark.write import file_group

_original = file_group.write_file_group


def _dies_on_first_attempt(spec: Any, incoming: Any, **kwargs: Any) -> Any:
    stat = _original(spec, incoming, **kwargs)
    context = TaskContext.get()
    if context is not None and context.attemptNumber() == 0:
        with open(os.path.join(os.path.dirname(spec.base_path), "attempts.log"), "a") as log:
            log.write(f"first attempt died after writing {stat.path}\n")
        raise RuntimeError("simulated executor loss after the file was written")
    return stat


file_group.write_file_group = _dies_on_first_attempt

if __name__ == "__main__":
    runpy.run_module("pyspark.worker", run_name="__main__")
