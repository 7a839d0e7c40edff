"""Table services in their own OS process: clean, archive (and compact, cluster) in a loop until told to stop.

Run as ``python service_process.py SPEC.json``; the spec names the table, its
options, a ``stop`` file and a ``result`` file, which gets JSON counts (or the
error that ended the loop), and optionally a ``ready`` file made once the table is open.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import tidemark
from signals import write_atomically


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    table = tidemark.Table.open(spec["table"], spark=None, options=spec.get("options"))
    cleans = deleted = archived = clustered = cluster_aborts = compactions = 0
    outcome: dict[str, object]
    if spec.get("ready"):
        write_atomically(spec["ready"])
    try:
        while not Path(spec["stop"]).exists():
            result = table.clean()
            cleans += result.clean_instant is not None
            deleted += len(result.deleted_files)
            archived += len(table.archive().archived)
            if spec.get("compact"):
                compactions += table.compact() is not None
            if spec.get("cluster"):
                try:
                    clustered += table.cluster().clustered
                except tidemark.ClusteringAbortedError:  # ingestion won, as it must
                    cluster_aborts += 1
            time.sleep(spec.get("pause_s", 0.05))
        outcome = {"status": "ok", "cleans": cleans, "deleted": deleted, "archived": archived,
                   "clustered": clustered, "cluster_aborts": cluster_aborts, "compactions": compactions}
    except tidemark.TidemarkError as error:
        outcome = {"status": "error", "error": type(error).__name__, "message": str(error)}
    finally:
        table.close()
    write_atomically(spec["result"], json.dumps(outcome))


if __name__ == "__main__":
    main()
