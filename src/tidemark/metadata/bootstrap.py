"""Bootstrapping a metadata table for an existing table that has none, when a writer asks.

Hudi's metadata writer initialises a missing metadata table from a listing of the data table
whenever it is enabled, but only when no instant other than the writer's own is pending on
the data timeline (a pending write's files are in the folders but not committed; a pending
clean, compaction or clustering is about to change them): otherwise it skips and tries again
at the next write. tidemark does the same, with two differences:

* only for a writer that passes ``hoodie.metadata.enable=true`` explicitly
  (``WriteConfig.metadata_bootstrap``). A new table gets one by default (write/table_setup.py),
  but a table without one (created with ``false``, written by a Hudi writer with it off, or
  one tidemark removed because another writer left it out of sync) keeps none on the default:
  a bootstrap walks every partition folder (one LIST each on an object store) and would be
  retried at every write while any instant is pending;
* before the writer starts its own instant (so "no pending instant at all" is the condition),
  under the table lock, which every instant is started under: no write, clean, compaction or
  clustering can be requested between the check and the ``files`` declaration.

The listing is the partition folders' data files (base and log files named as Hudi names
them) and partitions (every folder with a partition metafile): with nothing pending, every
such file belongs to a completed instant (a failed write's files were rolled back with it),
which is what Hudi lists at the latest completed instant. The metadata table is written
whole (:func:`~tidemark.metadata.create.write_metadata_table`, its deltacommit completing
after every data instant) and ``files`` declared last, so a crash in between leaves a folder
no reader trusts, which the next writer removes (:mod:`tidemark.metadata.maintain`).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from tidemark.concurrency.writer_settings import read_properties
from tidemark.format.log_file import parse_log_file_name
from tidemark.format.names import PARTITION_METAFILE, parse_base_file_name
from tidemark.metadata.create import declare_files, write_metadata_table
from tidemark.metadata.disable import metadata_table_present
from tidemark.storage import Storage
from tidemark.timeline import Timeline

log = logging.getLogger(__name__)


def pending_instants(timeline: Timeline) -> list[str]:
    """The pending instants that stop a bootstrap ("<time> <action> <state>")."""
    return [f"{i.requested_time} {i.action.value} {i.state.value}" for i in timeline.pending]


def table_listing(storage: Storage) -> dict[str, dict[str, int]]:
    """Data partition ("" if not partitioned) -> data file name -> size, from the folders."""
    listing: dict[str, dict[str, int]] = {}
    for info in storage.walk_files(""):
        partition = info.path.rsplit("/", 1)[0] if "/" in info.path else ""
        if info.name == PARTITION_METAFILE or info.name.startswith(f"{PARTITION_METAFILE}."):
            listing.setdefault(partition, {})
        elif parse_base_file_name(info.name) is not None or parse_log_file_name(info.name) is not None:
            listing.setdefault(partition, {})[info.name] = info.size
    return listing


def bootstrap_if_possible(storage: Storage, lock: Any) -> bool:
    """Create the metadata table (``files`` partition) of a table that has none, unless an
    instant is pending; takes the table lock unless held. Returns whether the table has a
    metadata table now (one it had already, or this bootstrap's); logs what it did."""
    if metadata_table_present(storage):
        return True
    # Checked once without the lock so a table with a pending instant costs no lock round trip.
    pending = pending_instants(Timeline.load(storage))
    if pending:
        return _skipped(storage, pending)
    with contextlib.nullcontext() if lock.held else lock.hold("bootstrap the metadata table"):
        if metadata_table_present(storage):
            return True
        timeline = Timeline.load(storage)
        pending = pending_instants(timeline)
        if pending:
            return _skipped(storage, pending)
        name = read_properties(storage).get("hoodie.table.name") or "table"
        listing = table_listing(storage)
        write_metadata_table(storage, name, listing, completed_after=timeline.max_time())
        declare_files(storage)
    files = sum(len(f) for f in listing.values())
    log.warning("%s: metadata table (.hoodie/metadata) bootstrapped from the folders (%d partition(s), %d file(s))",
                storage.base_path, len(listing), files)
    return True


def _skipped(storage: Storage, pending: list[str]) -> bool:
    shown = ", ".join(pending[:3]) + (" ..." if len(pending) > 3 else "")
    log.warning("%s: metadata table (.hoodie/metadata) not bootstrapped yet: instants are pending (%s); "
                "a later write tries again", storage.base_path, shown)
    return False
