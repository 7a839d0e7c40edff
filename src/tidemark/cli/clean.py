"""``tidemark clean``: roll back failed writes (never a live one), then clean old file versions."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.text import Text

from tidemark.cli import rollback as rollback_cmd
from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    count,
    option_pairs,
    readable_time,
    storage_options,
    with_recorded_writer_settings,
    working,
)
from tidemark.cli.timeline import Liveness, describe, liveness, policy_of
from tidemark.concurrency.heartbeat import now_ms
from tidemark.config import validate_keys
from tidemark.recovery.clean import CleanResult
from tidemark.recovery.rollback import RollbackResult
from tidemark.services.archive import ArchiveResult
from tidemark.storage.failures import storage_failures_typed
from tidemark.table import Table
from tidemark.timeline import Instant, Timeline

CONCURRENCY_MODE = "hoodie.write.concurrency.mode"

DESCRIPTION = """\
Clean the Hudi table at PATH, in two steps:

1. roll back its failed writes: pending writes (state requested or inflight)
   whose writer is dead. Their data files are deleted and a rollback instant
   records each one; readers never saw them;
2. delete the old file versions that the cleaning policy lets go, and record a
   clean instant (<t>.clean.requested holds the plan, <t>_<c>.clean what was
   deleted). The plan is made under the table lock; the files are deleted
   outside it, while writers keep writing. Never deleted: the latest version
   of each file group; versions that time travel to the retained commits (or
   hours) needs; the version a pending write may be merging against; files of
   a savepoint (`tidemark savepoint`).

   --policy commits       keep what the last N commits need (N = --retain,
                          default hoodie.clean.commits.retained = 10): time
                          travel to any of them keeps working (Hudi's default)
   --policy file-versions keep the last N versions of each file group
                          (default hoodie.clean.fileversions.retained = 3)
   --policy hours         keep what the last N hours need (default
                          hoodie.clean.hours.retained = 24)

   Writers also clean inline after their commits (hoodie.clean.automatic,
   on by default) with the policy of their own options. Give this command
   the same cleaning options as the writers (--policy/--retain, or
   hoodie.clean.* with --options): it keeps only what its own policy says.
   --archive also archives the timeline: instants beyond
   hoodie.keep.max.commits move to .hoodie/timeline/history/.

A write is dead when its heartbeat expired. Every multi-writer write keeps a
heartbeat file (.hoodie/.heartbeat/<instant>) fresh while it runs; once the
file is older than hoodie.client.heartbeat.interval_in_ms x
hoodie.client.heartbeat.tolerable.misses (default 60000 x 2 = 2 min), its
writer is taken for dead. A write whose heartbeat is alive is never touched:
it belongs to a writer that is still running, in this process or any other.
A pending write without a heartbeat file (a single-writer write) counts as
dead once it was requested longer ago than the expiry. This is Hudi's LAZY
failed-writes cleaning (hoodie.clean.failed.writes.policy=LAZY), which every
multi-writer write also runs before it starts; `tidemark clean` runs it by
hand, for example after a crash when no further write is coming.

The rollbacks happen under the table lock, the writers' own: the table records
the mode and lock of its writers (`tidemark concurrency PATH`) and this command
uses them; other lock settings given with --options are refused. A table that
records none is cleaned under the filesystem lock. (The in_process lock is
only ever held inside one process: while a writer process uses it on the
table, this command is refused.) Pass the writers' heartbeat options too, if
they are not the defaults: a shorter expiry than the writers' could take a
slow but live writer for dead.

--all-pending drops the heartbeat check: every pending write is taken for
dead and rolled back (single-writer semantics, like the EAGER policy). Only
use it when you know that no writer is running. You are asked to confirm
unless --yes is given or stdin is not a terminal.

--failed-writes-only skips step 2 (the command's behaviour before cleaning
existed).

`tidemark timeline PATH` shows each pending write's heartbeat.
"""

EPILOG = """\
examples:
  tidemark clean /data/trips
      roll back the writes whose heartbeat expired (default expiry: 2 min)
  tidemark clean /data/trips --options hoodie.client.heartbeat.interval_in_ms=2000
      the writers beat every 2 s: a write is dead after 4 s without a beat
  tidemark clean /data/trips --options hoodie.write.lock.provider=zookeeper \\
        hoodie.write.lock.zookeeper.url=zk1 hoodie.write.lock.zookeeper.port=2181
      the writers lock with ZooKeeper: clean takes the same lock
  tidemark clean /data/trips --all-pending --yes
      every writer is stopped: roll back every pending write, live heartbeat or not
  tidemark clean /data/trips --policy commits --retain 5
      keep only what time travel to the last 5 commits needs
  tidemark clean /data/trips --policy file-versions --retain 1 --archive
      keep one version per file group, then archive the timeline
"""

POLICIES = {
    "commits": ("KEEP_LATEST_COMMITS", "hoodie.clean.commits.retained"),
    "file-versions": ("KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained"),
    "hours": ("KEEP_LATEST_BY_HOURS", "hoodie.clean.hours.retained"),
}
SHOWN_FILES = 20  # deleted files listed one by one (all of them with --list)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "clean",
        help="roll back failed writes (never a live one), then delete old file versions",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    add_options_argument(parser, "e.g. the writers' lock and heartbeat settings")
    parser.add_argument(
        "--all-pending", action="store_true", dest="all_pending",
        help="take every pending write for dead, even one with a live heartbeat "
        "(only when no writer is running)",
    )
    parser.add_argument(
        "-y", "--yes", action="store_true",
        help="with --all-pending: do not ask for confirmation",
    )
    parser.add_argument(
        "--policy", choices=sorted(POLICIES), default=None,
        help="what to keep (default: hoodie.clean.policy, i.e. commits)",
    )
    parser.add_argument(
        "--retain", metavar="N", type=_positive, default=None,
        help="how many commits / versions / hours the policy keeps",
    )
    parser.add_argument(
        "--failed-writes-only", action="store_true", dest="failed_writes_only",
        help="only roll back failed writes; delete no file versions",
    )
    parser.add_argument("--archive", action="store_true", help="also archive the timeline afterwards")
    parser.add_argument("--list", action="store_true", dest="list_all", help="list every deleted file")
    parser.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value}")
    return value


def _policy_options(args: argparse.Namespace) -> dict[str, str]:
    """--policy / --retain as the option keys they stand for."""
    out: dict[str, str] = {}
    name = args.policy
    if name is not None:
        out["hoodie.clean.policy"] = POLICIES[name][0]
    if args.retain is not None:
        out[POLICIES[name or "commits"][1]] = str(args.retain)
        if (name or "commits") == "commits":
            # Archival must keep more commits than cleaning retains (Hudi's rule): follow --retain.
            out.setdefault("hoodie.keep.min.commits", str(max(20, args.retain + 1)))
            out.setdefault("hoodie.keep.max.commits", str(max(30, args.retain + 11)))
    return out


def _describe_pending(table: Table, timeline: Timeline, instant: Instant, beat: Liveness | None) -> str:
    row = describe(table, timeline, instant)
    operation = f" {row.operation}" if row.operation else ""
    heartbeat = f", heartbeat {beat.text}" if beat else ""
    return (
        f"{instant.action.value}{operation} {instant.requested_time} "
        f"({readable_time(instant.requested_time)} UTC), {instant.state.value}{heartbeat}"
    )


def _print_result(ui: Ui, result: RollbackResult) -> None:
    undone = result.rolled_back
    deleted = result.deleted_files
    ui.out.print(
        f"{ui.check} rolled back {undone.action.value} {undone.requested_time} "
        f"({undone.state.value}): deleted {count(len(deleted))} data file(s); "
        f"rollback instant {result.rollback_instant.requested_time}"
    )
    for path in deleted:
        ui.out.print(f"  deleted {escape(path)}", soft_wrap=True)


def _why_left(beat: Liveness | None, expiry: str) -> str:
    if beat is None or beat.status == "none":
        return f"no heartbeat, requested less than {expiry} ago"
    if beat.status == "alive":
        return "its writer is alive"
    return "its heartbeat expired just now; run clean again"


def _print_clean(ui: Ui, result: CleanResult, *, list_all: bool) -> None:
    if result.clean_instant is None:
        ui.out.print(f"no file versions cleaned ({escape(result.skipped or 'nothing to clean')})")
        return
    deleted = result.deleted_files
    window = (
        f"; versions needed from {result.earliest_to_retain} "
        f"({readable_time(result.earliest_to_retain)} UTC) on are kept"
        if result.earliest_to_retain else ""
    )
    ui.out.print(
        f"{ui.check} cleaned {count(len(deleted))} old file version(s){window}; "
        f"clean instant {result.clean_instant.requested_time}",
        soft_wrap=True,
    )
    shown = deleted if list_all else deleted[:SHOWN_FILES]
    for path in shown:
        ui.out.print(f"  deleted {escape(path)}", soft_wrap=True)
    if len(deleted) > len(shown):
        ui.out.print(f"  ... and {count(len(deleted) - len(shown))} more (--list shows them all)")
    if result.kept_for_savepoints:
        ui.out.print(f"  kept {count(len(result.kept_for_savepoints))} planned file(s): a savepoint needs them")
    for finished in result.finished:
        ui.out.print(f"  also finished clean {finished.requested_time}, left pending by a cleaner that died")


def _print_archive(ui: Ui, result: ArchiveResult) -> None:
    if not result.archived:
        ui.out.print(f"nothing archived ({escape(result.skipped or '')})")
        return
    first, last = result.archived[0], result.archived[-1]
    ui.out.print(
        f"{ui.check} archived {count(len(result.archived))} instant(s), {first.requested_time} .. "
        f"{last.requested_time}, into .hoodie/timeline/history (manifest {result.manifest_version})"
    )


def _rollback_all_pending(table: Table) -> list[RollbackResult]:
    """Every pending write, live heartbeat or not; under the writers' lock when the table has one."""
    if not table.write_config.multi_writer:
        return table.rollback_failed_writes(force=True)
    table._check_writer()  # the writers' own settings, or refused before anything is rolled back
    protocol = table._protocol()
    with storage_failures_typed(table.storage, "rollback of failed writes"), \
            protocol.lock.hold("roll back every pending write"):
        return list(protocol.rollback_failed_writes(force=True))


def run(args: argparse.Namespace, ui: Ui) -> int:
    # --policy / --retain win over --options, given under Hudi 0.x's names or 1.x's (validate_keys
    # puts each under its option's key, refusing one given under both with two values).
    given = {**validate_keys(option_pairs(args.options)), **_policy_options(args)}
    options = with_recorded_writer_settings(args.path, given, storage_options(args))
    # The mode decides what clean means: heartbeat-checked (multi-writer) or everything. A table
    # that records its writers' settings is cleaned with them (their lock), --all-pending too.
    recorded = options.get(CONCURRENCY_MODE, "single_writer") != "single_writer"
    mode = "single_writer" if args.all_pending else "optimistic_concurrency_control"
    if recorded:
        mode = options[CONCURRENCY_MODE]
    with Table.open(args.path, storage_options=storage_options(args), spark=None,
                    options={**options, CONCURRENCY_MODE: mode}) as table:
        policy = policy_of(table)
        expiry = f"{policy.expiry_ms / 1000:g} s"
        timeline = Timeline.load(table.storage)
        now = now_ms()
        writes = [(i, beat) for i in timeline.pending if (beat := liveness(table.storage, i, policy, now))]
        if writes:
            ui.out.print(
                f"{len(writes)} pending write(s); a heartbeat expires after {expiry} "
                "(hoodie.client.heartbeat.interval_in_ms x tolerable.misses):"
            )
        else:
            ui.out.print("no pending writes")
        for instant, beat in writes:
            ui.out.print("  " + escape(_describe_pending(table, timeline, instant, beat)), soft_wrap=True)

        if args.all_pending:
            alive = [i for i, beat in writes if beat.status == "alive"]
            if alive:
                ui.err.print(
                    f"[yellow]warning:[/] {len(alive)} of them {'has' if len(alive) == 1 else 'have'} "
                    "a live heartbeat: a writer may still be running; --all-pending rolls them back anyway",
                    soft_wrap=True,
                )
            ask = bool(writes) and not args.yes and rollback_cmd.stdin_is_interactive()
            if ask and not rollback_cmd.confirm(ui, f"Roll back all {len(writes)} pending write(s)?"):
                ui.out.print("aborted; nothing was changed")
                return 1
            results = _rollback_all_pending(table)
            with working(ui, "cleaning"):
                cleaned = None if args.failed_writes_only else table.clean()
        elif args.failed_writes_only:
            results = table.rollback_failed_writes()  # multi-writer mode: expired heartbeats only
            cleaned = None
        else:
            with working(ui, "cleaning"):
                cleaned = table.clean()  # rollbacks under the lock, re-checking each heartbeat
            results = list(cleaned.rolled_back)

        for result in results:
            _print_result(ui, result)
        still = {i.requested_time: i for i in Timeline.load(table.storage).pending}
        left = [(still[i.requested_time], beat) for i, beat in writes if i.requested_time in still]
        if writes and not results:
            ui.out.print("nothing rolled back")
        for instant, _ in left:
            beat = liveness(table.storage, instant, policy)
            described = _describe_pending(table, timeline, instant, beat)
            ui.out.print(Text(f"left alone: {described} ({_why_left(beat, expiry)})"), soft_wrap=True)
        if cleaned is not None:
            _print_clean(ui, cleaned, list_all=args.list_all)
        if args.archive:
            with working(ui, "archiving the timeline"):
                archived = table.archive()
            _print_archive(ui, archived)
    return 0
