"""The import structure of ``src/tidemark``: no cycles, and layers import downward only.

Every module is parsed with :mod:`ast`; every ``import`` counts wherever it is written
(module level, inside a function, under ``TYPE_CHECKING``). A *node* is a subpackage
(``tidemark.write``, ``tidemark.engines.spark``, ...) or a top-level module
(``tidemark.table``). ``LAYERS`` below is the one statement of the layer order, the same
as in ARCHITECTURE.md; ``KNOWN_VIOLATIONS`` lists the imports that break it today, each
with why it is there. The tests fail on any new cycle or upward import, and on an
allowlisted import that is gone (then delete its entry: the list only shrinks).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "tidemark"

# Bottom first. A module may import from its own node and from nodes listed before it.
LAYERS: tuple[str, ...] = (
    "tidemark.errors",  # the exception tree
    "tidemark.config",  # option declarations, the resolver, the settings it produces
    "tidemark.storage",  # the Storage protocol and the local file system
    "tidemark.format",  # Hudi v8 bytes: properties, commit metadata, log blocks, names, schemas
    "tidemark.timeline",  # instants and the timeline (active and archived)
    "tidemark.concurrency",  # locks, heartbeats, conflict rules at commit
    "tidemark.markers",  # markers, the marker server, early conflict detection over markers
    "tidemark.fsview",  # file groups and slices visible at a point of the timeline
    "tidemark.metadata",  # the metadata table (.hoodie/metadata): removed before tidemark changes a table
    "tidemark.merge",  # record mergers
    "tidemark.read",  # read plans and merging a file slice
    "tidemark.recovery",  # rollback, clean, savepoint/restore: the primitives the commit protocol runs
    "tidemark.write",  # the commit protocol and file-group writes
    "tidemark.services",  # table services: archive, clustering, compaction, the service runner
    "tidemark.engines",  # (the namespace package)
    "tidemark.engines.base",  # the Engine protocol Table asks (write pipelines, reader, service executors)
    "tidemark.engines.arrow",  # the write/read pipeline in-process on pyarrow
    "tidemark.engines.spark",  # the same as Spark jobs; the data source
    "tidemark.table",  # the Table API
    "tidemark",  # the package: the public names
    "tidemark.cli",  # the command
    "tidemark.__main__",  # python -m tidemark
)

# (importing module, imported module): upward imports (and the cycles they make) that are
# known and owed a fix. Each must still exist; delete an entry when its import goes away.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module
    line: int

    def where(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def _modules(src: Path = SRC) -> dict[str, Path]:
    modules = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str:
    """The module a dotted name lives in (``tidemark.x.Name`` -> ``tidemark.x``)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _imports(modules: Mapping[str, Path]) -> list[Import]:
    found = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names, line = [alias.name for alias in node.names], node.lineno
            elif isinstance(node, ast.ImportFrom):
                line = node.lineno
                if node.level:  # relative: resolve against this module's package
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    origin = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    origin = node.module or ""
                # `from pkg import sub` imports the submodule pkg.sub; `from mod import Name` imports mod.
                names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
            for name in names:
                if name == PACKAGE or name.startswith(PACKAGE + "."):
                    target = _known(name, modules)
                    if target != module:
                        found.append(Import(module, target, line))
    return found


def node_of(module: str) -> str:
    """The layer node of a module: its subpackage (two levels under engines/), or itself."""
    parts = module.split(".")
    depth = 3 if len(parts) >= 3 and parts[1] == "engines" else 2
    return ".".join(parts[:depth])


def _cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


MODULES = _modules()
IMPORTS = _imports(MODULES)
CHECKED = [i for i in IMPORTS if (i.source, i.target) not in KNOWN_VIOLATIONS]


def test_the_parser_sees_the_imports() -> None:
    """A guard against a test that passes by seeing nothing."""
    assert {"tidemark.table", "tidemark.write.commit", "tidemark.engines.spark.datasource"} <= set(MODULES)
    pairs = {(i.source, i.target) for i in IMPORTS}
    assert ("tidemark.table", "tidemark.timeline") in pairs  # module level
    assert ("tidemark.table", "tidemark.engines.arrow.engine") in pairs  # inside a function
    assert ("tidemark.table", "tidemark.merge") in pairs  # under TYPE_CHECKING
    assert ("tidemark.write.file_group", "tidemark.write.log_append") in pairs  # within a package


def test_every_node_has_a_layer() -> None:
    missing = sorted({node_of(m) for m in MODULES} - set(LAYERS))
    assert not missing, f"place these packages in LAYERS (and in ARCHITECTURE.md): {missing}"


def test_no_module_import_cycles() -> None:
    cycles = _cycles((i.source, i.target) for i in CHECKED)
    assert not cycles, "modules that import each other (directly or around a loop): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_no_package_import_cycles() -> None:
    cycles = _cycles((node_of(i.source), node_of(i.target)) for i in CHECKED if node_of(i.source) != node_of(i.target))
    assert not cycles, "packages that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_layers_import_downward_only() -> None:
    rank = {node: n for n, node in enumerate(LAYERS)}
    upward = [
        i.where()
        for i in CHECKED
        if rank.get(node_of(i.target), -1) > rank.get(node_of(i.source), len(LAYERS))
    ]
    assert not upward, (
        "upward imports (a layer may import only the layers below it; see LAYERS and ARCHITECTURE.md): "
        + "; ".join(upward)
    )


@pytest.mark.parametrize("violation", sorted(KNOWN_VIOLATIONS))
def test_known_violations_still_exist(violation: tuple[str, str]) -> None:
    """An allowlisted import that is gone must leave the list, so the list only shrinks."""
    pairs = {(i.source, i.target) for i in IMPORTS}
    assert violation in pairs, f"{violation[0]} no longer imports {violation[1]}: delete it from KNOWN_VIOLATIONS"


def test_known_violations_are_violations() -> None:
    """Nothing allowlisted that the rules would allow anyway: each entry is an upward import
    or closes a cycle of modules."""
    rank = {node: n for n, node in enumerate(LAYERS)}
    in_cycles = {m for c in _cycles((i.source, i.target) for i in IMPORTS) for m in c}
    for source, target in KNOWN_VIOLATIONS:
        upward = rank[node_of(target)] > rank[node_of(source)]
        assert upward or {source, target} <= in_cycles, (source, target)


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The machinery itself, on a made-up package: a cycle inside write/, and format -> write."""
    root = tmp_path / PACKAGE
    for rel, text in {
        "__init__.py": "",
        "format/__init__.py": "",
        "format/names.py": "def f():\n    from tidemark.write.a import X\n",
        "write/__init__.py": "",
        "write/a.py": "from tidemark.write import b\nX = 1\n",
        "write/b.py": "from . import a\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    modules = _modules(tmp_path)
    imports = _imports(modules)
    pairs = {(i.source, i.target) for i in imports}
    assert pairs == {
        ("tidemark.format.names", "tidemark.write.a"),
        ("tidemark.write.a", "tidemark.write.b"),
        ("tidemark.write.b", "tidemark.write.a"),
    }
    assert _cycles(pairs) == [["tidemark.write.a", "tidemark.write.b"]]
    rank = {node: n for n, node in enumerate(LAYERS)}
    assert rank[node_of("tidemark.write.a")] > rank[node_of("tidemark.format.names")]


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """One module, one idea: a module that grows past this is split along its ideas."""
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them along their ideas): {long}"
