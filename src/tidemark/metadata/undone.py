"""Data instants a rollback or restore undid (or is undoing): their metadata deltacommits stay.

A rollback of a completed instant ``x`` (alone, or as one step of a restore) is recorded in
the ``files`` partition as Hudi's metadata writer records it: a deltacommit with the
*rollback's* time that lists ``x``'s files as deleted. ``x``'s own metadata deltacommit stays
completed on the metadata timeline (its additions are undone by the later deletions, and it
may already be folded into a base file), while ``x`` is gone from the data timeline. So
:func:`tidemark.metadata.maintain.in_sync` must not take that for a crash between the two
tables: this module names the data instants undone by a completed rollback, and those a
pending rollback or restore is undoing (their files are still listed until it finishes and
records; readers ignore them, the data instant being gone).

Read only when the quick check finds a metadata deltacommit without its data instant, so
the common path never opens a rollback's metadata.
"""

from __future__ import annotations

from tidemark.format.commit_metadata import read_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.storage import Storage
from tidemark.timeline import Action, State, Timeline, instant_file_name


def _read(storage: Storage, name: str) -> dict[str, object]:
    try:
        data = storage.read_bytes(f"{TIMELINE_DIR}/{name}")
    except FileNotFoundError:
        return {}
    return read_avro(data) if data else {}


def undone_times(storage: Storage, timeline: Timeline) -> set[str]:
    """Requested times of data instants undone by a completed rollback or being undone by a
    pending rollback or restore, plus the pending rollbacks and restores themselves."""
    out: set[str] = set()
    for inst in timeline.filter(actions=[Action.ROLLBACK], states=[State.COMPLETED]):
        rec = _read(storage, inst.file_name)
        out.update(str(t) for t in rec.get("commitsRollback") or [])  # type: ignore[attr-defined]
    for inst in timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], states=[State.REQUESTED, State.INFLIGHT]):
        out.add(inst.requested_time)
        rec = _read(storage, instant_file_name(inst.requested_time, inst.action, State.REQUESTED))
        target = rec.get("instantToRollback")
        if isinstance(target, dict) and target.get("commitTime"):
            out.add(str(target["commitTime"]))
        for info in rec.get("instantsToRollback") or []:  # type: ignore[attr-defined]
            if isinstance(info, dict) and info.get("commitTime"):
                out.add(str(info["commitTime"]))
    return out
