"""tools/check_cycles.py: finds import cycles (function-local imports too, TYPE_CHECKING
ones not), allows only exactly a KNOWN cycle, and fails when a KNOWN entry went stale."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

TOOL = Path(__file__).resolve().parents[1] / "tools" / "check_cycles.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_cycles", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_cycles"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


check_cycles = _tool()


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "fakepkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=60
    )


PLANTED = {
    # a -> b at import time, b -> a only when f() runs: still a cycle
    "a.py": "from fakepkg import b\n\nX = 1\n",
    "b.py": "def f() -> int:\n    from fakepkg.a import X\n\n    return X\n",
    # c -> d only for the type checker: not a cycle, though d -> c is real
    "c.py": (
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from fakepkg.d import D\nelse:\n    import json\n\nC = 1\n"
    ),
    "d.py": "from fakepkg.c import C\n\nD = C\n",
    # relative imports resolve inside a subpackage: e -> f, f -> e in a method
    "sub/__init__.py": "",
    "sub/e.py": "from .f import G\n",
    "sub/f.py": "G = 1\n\n\nclass H:\n    def m(self) -> None:\n        from . import e\n",
}


def test_planted_cycles_are_reported_with_the_imports_that_close_them(tmp_path: Path) -> None:
    package = _package(tmp_path, PLANTED)
    result = _run(str(package))
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert out.count("import cycle between 2 modules:") == 2
    assert "    fakepkg.a\n    fakepkg.b\n" in out
    assert f"{package / 'a.py'}:1: from fakepkg import b\n" in out
    assert f"{package / 'b.py'}:2: from fakepkg.a import X (function-local)\n" in out
    assert "    fakepkg.sub.e\n    fakepkg.sub.f\n" in out
    assert f"{package / 'sub' / 'f.py'}:6: from . import e (function-local)\n" in out
    assert "fakepkg.c" not in out and "fakepkg.d" not in out


def test_an_import_under_type_checking_is_no_cycle(tmp_path: Path) -> None:
    package = _package(tmp_path, {k: v for k, v in PLANTED.items() if k in ("c.py", "d.py")})
    result = _run(str(package))
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("no import cycles in ")


#: a KNOWN entry for the tests of the mechanism (opendata_kv itself has none left)
SUB_CYCLE = {"sub-cycle": (frozenset({"fakepkg.sub.e", "fakepkg.sub.f"}), "planted")}


def test_a_known_entry_that_no_longer_occurs_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_cycles, "KNOWN", SUB_CYCLE)
    package = _package(tmp_path, {"d.py": "D = 1\n"})
    out: list[str] = []
    assert not check_cycles.check(package, ["sub-cycle"], out)
    assert "KNOWN cycle 'sub-cycle' no longer occurs" in "\n".join(out)


def test_allowing_a_known_entry_does_not_allow_another_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(check_cycles, "KNOWN", SUB_CYCLE)
    package = _package(tmp_path, PLANTED)
    out: list[str] = []
    assert not check_cycles.check(package, ["sub-cycle"], out)
    text = "\n".join(out)
    assert "fakepkg.a" in text and "fakepkg.sub.e" not in text


def test_opendata_kv_has_no_known_cycle_and_ci_allows_none() -> None:
    assert check_cycles.KNOWN == {}
    ci = (TOOL.parents[1] / ".ci" / "run").read_text()
    assert "--allow" not in ci


def test_opendata_kv_has_only_the_cycles_ci_allows() -> None:
    ci = (TOOL.parents[1] / ".ci" / "run").read_text()
    line = next(ln for ln in ci.splitlines() if "check_cycles.py" in ln and ln[0] != "#")
    allowed = line.split("check_cycles.py", 1)[1].split()
    result = _run(*allowed)
    assert result.returncode == 0, result.stdout


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20))
def test_cycles_are_the_mutually_reachable_groups(pairs: list[tuple[int, int]]) -> None:
    graph: dict[str, set[str]] = {str(n): set() for n in range(8)}
    for a, b in pairs:
        graph[str(a)].add(str(b))

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {n: reach(n) for n in graph}
    groups = {
        frozenset({n} | {m for m in graph if m in reachable[n] and n in reachable[m]})
        for n in graph
    }
    expected = {group for group in groups if len(group) > 1}
    assert set(check_cycles.cycles(graph)) == expected
