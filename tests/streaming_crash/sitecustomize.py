"""Test hook for tests/streaming_process.py: crash the whole streaming process group once, right
after a tidemark commit is published and before Spark records the micro-batch in its checkpoint.

Loaded (as ``sitecustomize``) by every Python process of the streaming run, including Spark's
commit worker, when this folder is on PYTHONPATH and TIDEMARK_CRASH_AFTER_PUBLISH names a flag
file: the first process to publish creates the flag and SIGKILLs its process group.
"""

import os

_FLAG = os.environ.get("TIDEMARK_CRASH_AFTER_PUBLISH")
if _FLAG:
    import signal

    from tidemark.write import commit as _commit

    _complete = _commit.CommitProtocol.complete

    def _complete_then_crash(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        instant = _complete(self, *args, **kwargs)
        try:
            os.close(os.open(_FLAG, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return instant
        os.killpg(os.getpgid(0), signal.SIGKILL)
        return instant  # not reached

    _commit.CommitProtocol.complete = _complete_then_crash  # type: ignore[method-assign]
