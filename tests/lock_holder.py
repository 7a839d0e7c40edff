"""A lock provider in its own OS process, for the object-store lock tests.

Run as ``python lock_holder.py SPEC.json``. The spec names the lock (``settings``: LockSettings
fields, ``table``, ``storage_options``) and a ``mode``:

* ``loop``: wait for the file ``barrier``, then ``iterations`` times: acquire, append
  ``enter <me>`` and ``exit <me>`` to ``log`` with a short sleep between, release. Two holders
  inside at once show up as interleaved lines.
* ``hold``: acquire, write ``ready`` (JSON: owner id), hold for ``hold_s`` seconds (forever when
  absent: the test kills it), then check the fence and write ``result`` (JSON: held or the error).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from signals import write_atomically
from tidemark.concurrency.locks.base import LockSettings
from tidemark.concurrency.locks.registry import create_lock_provider
from tidemark.storage.location import open_storage


def provider_of(spec: dict[str, Any]) -> Any:
    storage = open_storage(spec["table"], spec["storage_options"]) if spec.get("storage_options") else None
    return create_lock_provider(LockSettings(**spec["settings"]), spec["table"], storage)


def loop(spec: dict[str, Any], provider: Any) -> None:
    me = f"{os.getpid()}"
    while not Path(spec["barrier"]).exists():
        time.sleep(0.005)
    rng = random.Random(os.getpid())
    for _ in range(spec["iterations"]):
        assert provider.try_acquire(120), "could not acquire within 120 s"
        with open(spec["log"], "a") as log:
            log.write(f"enter {me}\n")
            log.flush()
            time.sleep(rng.uniform(0, 0.01))
            log.write(f"exit {me}\n")
        provider.release()


def hold(spec: dict[str, Any], provider: Any) -> None:
    assert provider.try_acquire(120), "could not acquire within 120 s"
    write_atomically(spec["ready"], json.dumps({"owner": provider.owner_id}))
    if spec.get("hold_s") is None:
        while True:
            time.sleep(1)
    time.sleep(spec["hold_s"])
    try:
        provider.assert_held()
        outcome: dict[str, Any] = {"held": True}
    except Exception as error:  # noqa: BLE001 - reported to the test
        outcome = {"held": False, "error": type(error).__name__, "message": str(error)}
    provider.release()
    write_atomically(spec["result"], json.dumps(outcome))


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    provider = provider_of(spec)
    try:
        (loop if spec["mode"] == "loop" else hold)(spec, provider)
    finally:
        provider.close()


if __name__ == "__main__":
    main()
