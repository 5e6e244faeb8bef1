"""Fail on any import cycle between the modules of a package (default: opendata_kv).

    python tools/check_cycles.py [--allow NAME ...] [ROOT]

Every module is parsed with ast; an import counts wherever it stands (function-local imports
too, since they close a cycle at call time) except under `if TYPE_CHECKING:`, which never
runs. `from a import b` is an import of a.b when a.b is a module, else of a; a package's
__init__ is not counted as imported by its submodules' imports (as import-linter counts).
The strongly connected components of more than one module are the cycles: each is printed
with its modules and the imports between them (the lines that close it), and the exit
status is 1. A cycle may be allowed only by naming an entry of KNOWN with --allow, and only
when its modules are exactly that entry's; an allowed entry that no longer occurs fails too,
so the list cannot go stale.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: cycles that are known and tolerated for now: name -> (exactly its modules, why)
KNOWN: dict[str, tuple[frozenset[str], str]] = {}  # none: every cycle fails CI


@dataclass(frozen=True)
class Edge:
    """One import of `target` by `source`, at `path:line`."""

    source: str
    target: str
    path: Path
    line: int
    text: str
    local: bool  # inside a function: runs at call time, not at import


def modules_of(root: Path) -> dict[str, Path]:
    """Every module under the package directory `root`, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, local: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """The import statements under `node`, skipping `if TYPE_CHECKING:` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, local
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _imports_in(other, local)
        else:
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            yield from _imports(child, inner)


def _imports_in(node: ast.stmt, local: bool) -> Iterator[tuple[ast.stmt, bool]]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, local
    else:
        yield from _imports(node, local)


def _segment(lines: list[str], node: ast.stmt) -> str:
    """The source text of `node` from the module's lines, as ast.get_source_segment gives it
    (which splits the whole module again on every call: 87% of this tool's time)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset
    if first == last:
        return lines[first].encode()[start:end].decode()
    head = lines[first].encode()[start:].decode()
    return "\n".join([head, *lines[first + 1 : last], lines[last].encode()[:end].decode()])


def edges_of(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    """The imports of module `name` that name another module of the package."""
    source = path.read_text(encoding="utf-8")
    lines = re.split(r"\r\n|\r|\n", source)  # the line ends Python's parser counts
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: list[Edge] = []
    for node, local in _imports(ast.parse(source, filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else base)
        text = " ".join(_segment(lines, node).split())
        for target in dict.fromkeys(targets):
            if target in modules and target != name:
                edges.append(Edge(name, target, path, node.lineno, text, local))
    return edges


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def check(root: Path, allow: list[str], out: list[str]) -> bool:
    """True when every cycle under `root` is an allowed KNOWN entry and every allowed entry
    occurs; what is wrong is appended to `out`."""
    modules = modules_of(root)
    edges = [edge for name, path in modules.items() for edge in edges_of(name, path, modules)]
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for edge in edges:
        graph[edge.source].add(edge.target)
    allowed = {KNOWN[name][0]: name for name in allow}
    ok = True
    seen: set[frozenset[str]] = set()
    for component in sorted(cycles(graph), key=sorted):
        seen.add(component)
        if component in allowed:
            continue
        ok = False
        out.append(f"import cycle between {len(component)} modules:")
        out.extend(f"    {module}" for module in sorted(component))
        out.append("  closed by these imports:")
        for edge in sorted(edges, key=lambda e: (e.source, e.line)):
            if edge.source in component and edge.target in component:
                where = " (function-local)" if edge.local else ""
                out.append(f"    {edge.path}:{edge.line}: {edge.text}{where}")
    for component, name in sorted(allowed.items(), key=lambda item: item[1]):
        if component not in seen:
            ok = False
            out.append(f"KNOWN cycle {name!r} no longer occurs: remove it from KNOWN and --allow")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).parents[1] / "opendata_kv"
    parser.add_argument("root", nargs="?", type=Path, default=default, help="a package dir")
    parser.add_argument(
        "--allow", action="append", default=[], choices=sorted(KNOWN), help="a KNOWN cycle"
    )
    args = parser.parse_args(argv)
    out: list[str] = []
    ok = check(args.root, args.allow, out)
    allowed = ", ".join(args.allow) or "none"
    print("\n".join(out) if out else f"no import cycles in {args.root} (allowed: {allowed})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
