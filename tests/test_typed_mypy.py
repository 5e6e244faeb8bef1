"""Type-level tests of typed records (issue 30): one mypy --strict run over tests/typing/,
whose snippets mark each line mypy must reveal (`# R: <part of the revealed type>`) or flag
(`# E: <error code>`), any other error failing the test; and over docs/typed.md's mistakes
example, whose errors must be those the page shows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from mypykit import mypy_strict

SNIPPETS = Path(__file__).resolve().parent / "typing"
TYPED_DOC = SNIPPETS.parent.parent / "docs" / "typed.md"
MARK = re.compile(r"\S  # ([RE]): (.+?)\s*$")
LINE = re.compile(r"^(?P<file>[\w.]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*)$")


def _expected() -> dict[tuple[str, int], tuple[str, str]]:
    """(file, line) -> ("R" or "E", what) for every marked line of the snippets."""
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for path in sorted(SNIPPETS.glob("*.py")):
        for number, text in enumerate(path.read_text().splitlines(), 1):
            found = MARK.search(text)
            if found:
                out[path.name, number] = (found[1], found[2])
    return out


def _doc_block(marker: str) -> str:
    """The fenced block after `<!-- typed-mistakes: MARKER -->` in docs/typed.md."""
    text = TYPED_DOC.read_text()
    after = text.split(f"<!-- typed-mistakes: {marker} -->", 1)[1]
    return after.split("```text\n", 1)[1].split("```\n", 1)[0]


def test_typed_records_type_check_as_declared(tmp_path: Path, mypy_cache: Path) -> None:
    for path in SNIPPETS.glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "mistakes.py").write_text(_doc_block("code"))
    files = sorted(p.name for p in tmp_path.glob("*.py"))
    _, out = mypy_strict(tmp_path, files, mypy_cache)
    shown = _doc_block("mypy").splitlines()
    said = [line for line in out.splitlines() if line.startswith("mistakes.py:")]
    assert [line for line in said if ": error: " in line] == shown  # the page leaves out notes
    reported: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for line in out.splitlines():
        parsed = LINE.match(line)
        if parsed:
            where = (parsed["file"], int(parsed["line"]))
            reported.setdefault(where, []).append((parsed["kind"], parsed["text"]))
    expected = _expected()
    assert sum(kind == "E" for kind, _ in expected.values()) >= 8
    problems: list[str] = []
    for (name, number), (kind, what) in expected.items():
        got = reported.get((name, number), [])
        if kind == "R":
            revealed = [t for k, t in got if k == "note" and t.startswith("Revealed type is")]
            if not any(what.strip('"') in t for t in revealed):
                problems.append(f"{name}:{number}: expected a revealed type with {what!r}: {got}")
        elif not any(k == "error" and t.endswith(f"[{what}]") for k, t in got):
            problems.append(f"{name}:{number}: expected an error [{what}]: {got}")
    for (name, number), got in reported.items():
        errors = [t for k, t in got if k == "error"]
        if errors and name != "mistakes.py" and expected.get((name, number), ("", ""))[0] != "E":
            problems.append(f"{name}:{number}: unexpected error {errors}")
    assert not problems, "\n".join(problems) + "\n\nmypy said:\n" + out
