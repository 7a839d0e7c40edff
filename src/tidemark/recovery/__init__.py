"""Rollback, clean and savepoint/restore: the primitives below the commit protocol.

The commit protocol (:mod:`tidemark.write.commit`) runs them before every write to roll
back dead writers and to finish the rollbacks, cleans and restores a crash interrupted;
``Table`` and the table services run them by hand under the table lock. They depend only
on the layers below (timeline, markers, file-system view, concurrency), never on write/.
"""
