"""Version 6 tables (Hudi 0.14/0.15): read as they are, refused for writes, upgraded to version 8.

The three real version 6 tables (shared/reference/hudi-format/real-tables) are copied and
checked against hudi-rs (which reads version 6 and version 8) before, during and after the
upgrade. The crash tests kill a real upgrading process (SIGKILL) at each step of the
upgrade, check the table is whole (hudi-rs and tidemark read the original rows), then run
the upgrade again and check it finished.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from test_real_tables_roundtrip import REAL_TABLES, V6_TABLES, copy_real_table, model
from tidemark.cli.main import main as cli_main
from tidemark.format.log_file import BlockType, HeaderKey, LogBlock, encode_avro_records, encode_block
from tidemark.format.properties import load_properties
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.timeline.layout_v1 import UPGRADE_MARKER, parse_v1_file_name

AVRO_MAGIC = b"Obj\x01"


def _key(table: tidemark.Table) -> str:
    return table.config.record_key_fields[0]


def _rows(table: tidemark.Table) -> dict[Any, dict[str, Any]]:
    return model(table.read(), _key(table))


def _hudi_rs(table: tidemark.Table) -> dict[Any, dict[str, Any]]:
    return model(hudi_rs_read(table.path), _key(table))


def _props(path: str) -> dict[str, str]:
    props = load_properties(LocalStorage(path).read_bytes)
    assert props is not None
    return props


def _v1_instant_files(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, ".hoodie")) if parse_v1_file_name(n))


def _tree(path: str) -> dict[str, int]:
    out = {}
    for root, _dirs, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = os.stat(full).st_mtime_ns
    return out


@pytest.mark.parametrize("name", V6_TABLES)
def test_a_version_6_table_is_read_as_hudi_rs_reads_it(tmp_path: Path, name: str) -> None:
    path = copy_real_table(name, tmp_path)
    table = tidemark.Table.open(path, spark=None)
    assert table.config.table_version == 6
    rows = _rows(table)
    assert len(rows) >= 4 and rows == _hudi_rs(table)
    instants = table.timeline()
    assert instants and all(i.is_completed for i in instants)
    for inst in instants:
        # The completion time is the instant file's modification time, as Hudi 1.x reads it.
        mtime = os.stat(os.path.join(path, ".hoodie", f"{inst.requested_time}.{inst.action.value}")).st_mtime
        assert inst.completion_time is not None and inst.completion_time >= inst.requested_time
        assert abs(tidemark.timeline.parse_instant_time(inst.completion_time).timestamp() - mtime) < 1
    # v6 commit metadata is JSON: it is read (the schema comes from it).
    assert table.schema is not None and _key(table) in table.schema.names
    # Time travel to the first commit, as hudi-rs does it.
    first = instants[0].requested_time
    assert model(table.read(as_of=first), _key(table)) == model(hudi_rs_read(path, as_of=first), _key(table))


@pytest.mark.parametrize("name", V6_TABLES)
def test_writing_a_version_6_table_is_refused_and_names_the_upgrade(tmp_path: Path, name: str) -> None:
    path = copy_real_table(name, tmp_path)
    table = tidemark.Table.open(path, spark=None)
    rows = table.read()
    before = _tree(path)
    user = rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])
    for attempt in (lambda: table.upsert(user.slice(0, 1)), lambda: table.delete(user.slice(0, 1)),
                    table.clean, table.archive):
        with pytest.raises(tidemark.TableUpgradeRequiredError) as info:
            attempt()
        assert "tidemark upgrade" in str(info.value) and "Table.upgrade()" in str(info.value)
        assert isinstance(info.value, tidemark.UnsupportedTableError)
    assert _tree(path) == before  # nothing changed


@pytest.mark.parametrize("name", V6_TABLES)
def test_upgrade_writes_the_version_8_layout_as_hudi_does(tmp_path: Path, name: str) -> None:
    path = copy_real_table(name, tmp_path)
    table = tidemark.Table.open(path, spark=None)
    rows = _rows(table)
    old = table.timeline()
    result = table.upgrade()
    assert (result.from_version, result.to_version, result.instants, result.resumed) == (6, 8, len(old), False)
    props = _props(path)
    assert props["hoodie.table.version"] == "8"
    assert props["hoodie.timeline.layout.version"] == "2"
    assert props["hoodie.timeline.path"] == "timeline"
    assert props["hoodie.table.initial.version"] == "6"
    assert props["hoodie.table.keygenerator.type"] in ("SIMPLE", "NON_PARTITION")
    expected_mode = "EVENT_TIME_ORDERING" if props["hoodie.table.type"] == "MERGE_ON_READ" else "COMMIT_TIME_ORDERING"
    assert props["hoodie.record.merge.mode"] == expected_mode
    assert "hoodie.record.merge.strategy.id" in props
    # Completed instants: <t>_<completion>.<action> with the completion times read before, Avro content.
    names = set(os.listdir(os.path.join(path, ".hoodie", "timeline")))
    for inst in old:
        completed = f"{inst.requested_time}_{inst.completion_time}.{inst.action.value}"
        assert completed in names
        data = Path(path, ".hoodie", "timeline", completed).read_bytes()
        assert data.startswith(AVRO_MAGIC)
    assert _v1_instant_files(path) == [] and not os.path.exists(os.path.join(path, UPGRADE_MARKER))
    assert table.timeline() == old
    assert _rows(table) == rows == _hudi_rs(table)
    first = old[0].requested_time  # time travel: version 6 logs count from the deltacommit that wrote them
    assert model(table.read(as_of=first), _key(table)) == model(hudi_rs_read(path, as_of=first), _key(table))
    # Again: nothing to do.
    assert not table.upgrade().upgraded and table.timeline() == old


def test_the_upgraded_table_is_written_by_both_readers_terms(tmp_path: Path) -> None:
    # Merge-on-read with Hudi 0.x logs (named after their base instant): a tidemark log lands on top.
    path = copy_real_table("v6_trips_8i1u", tmp_path)
    table = tidemark.Table.open(path, spark=None)
    table.upgrade()
    rows = table.read()
    user = rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])
    sf = user.filter(pa.compute.equal(user.column("city"), "san_francisco")).slice(0, 1)
    update = sf.set_column(sf.schema.get_field_index("fare"), "fare", pa.array([1234.5]))
    update = update.set_column(0, "ts", pa.array([sf.column("ts")[0].as_py() + 1], pa.int64()))
    table.upsert(update)
    expected = _rows(table)
    assert expected[sf.column("uuid")[0].as_py()]["fare"] == 1234.5
    assert _hudi_rs(table) == expected
    table.compact()
    assert _rows(table) == expected == _hudi_rs(table)


def test_upgrade_refuses_a_table_with_pending_instants(tmp_path: Path) -> None:
    path = copy_real_table("v6_nonpartitioned", tmp_path)
    Path(path, ".hoodie", "20991231000000000.commit.requested").write_bytes(b"")
    before = _tree(path)
    with pytest.raises(tidemark.UnsupportedTableError, match="pending"):
        tidemark.Table.open(path, spark=None).upgrade()
    assert _tree(path) == before


def test_the_cli_upgrades(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = copy_real_table("v6_simplekeygen_nonhivestyle", tmp_path)
    assert cli_main(["upgrade", path]) == 0
    assert "from table version 6 to 8" in capsys.readouterr().out
    assert _props(path)["hoodie.table.version"] == "8"
    assert cli_main(["upgrade", path]) == 0
    assert "already table version 8" in capsys.readouterr().out
    assert cli_main(["upgrade", str(tmp_path / "nothing")]) == 2


# -- the archived timeline -------------------------------------------------------------------

def _archive_first_commit(path: str) -> str:
    """Do what Hudi 0.x archival does to the first commit: its instant files leave .hoodie/ for an
    archive log (.hoodie/archived/.commits_.archive.1_<token>) of HoodieArchivedMetaEntry records,
    the commit metadata as an Avro record of the HoodieCommitMetadata schema a real commit has."""
    hoodie = Path(path, ".hoodie")
    first = min(n.split(".")[0] for n in os.listdir(hoodie) if parse_v1_file_name(n))
    commit = json.loads((hoodie / f"{first}.commit").read_bytes())
    mtime = os.stat(hoodie / f"{first}.commit").st_mtime
    commit_schema = json.loads((REAL_TABLES.parent / "HoodieCommitMetadata.avsc").read_text())
    entry_schema = {
        "type": "record", "name": "HoodieArchivedMetaEntry", "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": "hoodieCommitMetadata", "type": ["null", commit_schema], "default": None},
            {"name": "commitTime", "type": ["null", "string"], "default": None},
            {"name": "actionType", "type": ["null", "string"], "default": None},
            {"name": "version", "type": ["int", "null"], "default": 1},
            {"name": "actionState", "type": ["null", "string"], "default": None},
            {"name": "stateTransitionTime", "type": ["null", "string"], "default": None},
        ],
    }
    stats = {p: [{k: v for k, v in s.items() if k != "runtimeStats"} for s in lst]
             for p, lst in commit["partitionToWriteStats"].items()}
    completion = tidemark.timeline.instant_time.format_instant_time(
        __import__("datetime").datetime.fromtimestamp(mtime, __import__("datetime").UTC))
    entry = {
        "hoodieCommitMetadata": {"partitionToWriteStats": stats, "compacted": False,
                                 "extraMetadata": commit["extraMetadata"], "version": 1,
                                 "operationType": commit["operationType"]},
        "commitTime": first, "actionType": "commit", "version": 1, "actionState": "COMPLETED",
        "stateTransitionTime": completion,
    }
    schema_json = json.dumps(entry_schema)
    content = encode_avro_records(schema_json, [entry])
    block = LogBlock(BlockType.AVRO_DATA, ((HeaderKey.INSTANT_TIME, first), (HeaderKey.SCHEMA, schema_json)), content)
    (hoodie / "archived" / ".commits_.archive.1_1-0-1").write_bytes(encode_block(block))
    for name in os.listdir(hoodie):
        if name.startswith(first + "."):
            os.unlink(hoodie / name)
    return first


def test_the_archived_timeline_moves_to_the_lsm_history(tmp_path: Path) -> None:
    path = copy_real_table("v6_nonpartitioned", tmp_path)
    rows = _rows(tidemark.Table.open(path, spark=None))
    first = _archive_first_commit(path)
    table = tidemark.Table.open(path, spark=None)
    assert [i.requested_time for i in table.timeline()] != [] and first not in {
        i.requested_time for i in table.timeline()}
    assert _rows(table) == rows == _hudi_rs(table)  # the archived commit's files still count
    result = table.upgrade()
    assert result.archived == 1
    everything = Timeline.load(table.storage).with_history()
    archived = [i for i in everything.instants if i.requested_time == first]
    assert archived and archived[0].is_completed
    meta = everything.commit_metadata(archived[0])
    assert meta.operation == "UPSERT" and meta.write_stats
    assert os.path.exists(os.path.join(path, ".hoodie", "timeline", "history", "_version_"))
    assert _rows(table) == rows == _hudi_rs(table)
    # A second run archives nothing twice.
    table.upgrade()
    assert len([i for i in Timeline.load(table.storage).with_history().instants if i.requested_time == first]) == 1


# -- crash safety -----------------------------------------------------------------------------

_KILLER = """
import os, signal, sys
from tidemark.storage import local
import tidemark

path, op, target, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
real = getattr(local.LocalStorage, op)
seen = [0]

def patched(self, rel, *args, **kwargs):
    if target in rel:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)  # a real crash, mid-upgrade
    return real(self, rel, *args, **kwargs)

setattr(local.LocalStorage, op, patched)
tidemark.Table.open(path, spark=None).upgrade()
"""

# (table, storage call, path fragment, which call dies): the steps of the upgrade, in order.
KILL_POINTS = [
    ("v6_nonpartitioned", "write_atomic", "upgrade_from_layout_v1", 1),  # before anything
    ("v6_nonpartitioned", "write_atomic", ".hoodie/timeline/2", 2),  # some instant files written
    ("v6_nonpartitioned", "write_atomic", "timeline/history/", 1),  # the archive half moved
    ("v6_nonpartitioned", "write_atomic", "hoodie.properties", 1),  # everything but the switch
    ("v6_nonpartitioned", "delete", ".hoodie/2", 2),  # switched; old instant files half removed
    ("v6_nonpartitioned", "delete", "upgrade_from_layout_v1", 1),  # only the marker left
    ("v6_trips_8i1u", "write_atomic", "legacy_log_names", 1),  # merge-on-read: instants moved
    ("v6_trips_8i1u", "delete", ".hoodie/2", 3),  # merge-on-read: switched, half cleaned
]


@pytest.mark.parametrize(("name", "op", "target", "nth"), KILL_POINTS)
def test_an_upgrade_killed_midway_leaves_a_whole_table_and_finishes_when_run_again(
    tmp_path: Path, name: str, op: str, target: str, nth: int
) -> None:
    path = copy_real_table(name, tmp_path)
    table = tidemark.Table.open(path, spark=None)
    rows = _rows(table)
    instants = table.timeline()
    if name == "v6_nonpartitioned":
        _archive_first_commit(path)
    src = str(Path(tidemark.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _KILLER, path, op, target, str(nth)], env=env,
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    # Whole at the crash: both readers see the original rows.
    half = tidemark.Table.open(path, spark=None)
    assert _rows(half) == rows == _hudi_rs(half)
    switched = _props(path)["hoodie.table.version"] == "8"
    assert switched == (op == "delete")
    if not switched:  # still version 6: still refused for writes, with the way out named
        with pytest.raises(tidemark.TableUpgradeRequiredError):
            half.upsert(half.read().slice(0, 1).drop_columns([c for c in half.read().column_names
                                                               if c.startswith("_hoodie_")]))
    result = half.upgrade()
    assert result.resumed or target == "upgrade_from_layout_v1" and op == "write_atomic"
    assert _props(path)["hoodie.table.version"] == "8"
    assert _v1_instant_files(path) == [] and not os.path.exists(os.path.join(path, UPGRADE_MARKER))
    done = tidemark.Table.open(path, spark=None)
    assert [(i.requested_time, i.completion_time) for i in done.timeline(include_archived=True)] == [
        (i.requested_time, i.completion_time) for i in instants]
    assert _rows(done) == rows == _hudi_rs(done)
    user = done.read().drop_columns([c for c in done.read().column_names if c.startswith("_hoodie_")])
    done.upsert(user.slice(0, 1))  # the same row again: a write that changes no value
    assert _rows(done) == rows == _hudi_rs(done)


def test_a_version_6_metadata_table_is_deleted_by_the_upgrade(tmp_path: Path) -> None:
    # A v6 metadata table is not upgraded in place (Hudi's upgrade deletes one that is behind):
    # after the switch no reader may list files through it.
    path = copy_real_table("v6_simplekeygen_nonhivestyle", tmp_path)
    props_file = Path(path, ".hoodie", "hoodie.properties")
    props_file.write_text(props_file.read_text() + "hoodie.table.metadata.partitions=files\n")
    Path(path, ".hoodie", "metadata", ".hoodie").mkdir(parents=True)
    Path(path, ".hoodie", "metadata", ".hoodie", "hoodie.properties").write_text("hoodie.table.version=6\n")
    table = tidemark.Table.open(path, spark=None)
    rows = _rows(table)
    table.upgrade()
    assert "hoodie.table.metadata.partitions" not in _props(path)
    assert not Path(path, ".hoodie", "metadata").exists()
    assert _rows(table) == rows == _hudi_rs(table)
