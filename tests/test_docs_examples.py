"""Every ```python block of README.md and docs/*.md runs on its own and passes mypy --strict.

Each block is written to a module padded with blank lines so that its line numbers are the
markdown file's: a traceback or a mypy error points at the document line. Blocks run one per
process (forked from a warm interpreter by tests/example_runner.py: run as `python BLOCK.py`
would, in a temporary working directory, with a time bound); mypy checks all of them in one
invocation. A block that is not meant to run on its own is not ```python: use
```text or ```sh.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mypykit import mypy_strict

REPO = Path(__file__).resolve().parent.parent
RUN_SECONDS = 60  # per block; the slowest today takes about a second

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Example:
    """One ```python block: the document, the line of its first code line, its code."""

    doc: str  # path relative to the repository, e.g. "docs/keys.md"
    line: int
    code: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def module(self) -> str:
        """A module name unique to the block, from which `where` can be read back."""
        stem = re.sub(r"\W", "_", self.doc)
        return f"ex_{stem}_L{self.line}"

    def source(self) -> str:
        """The code, preceded by blank lines so that line numbers match the document."""
        return "\n" * (self.line - 1) + self.code


def extract(doc: str, text: str) -> list[Example]:
    """The ```python blocks of one markdown text; an unclosed fence is an error."""
    examples: list[Example] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, lang = opened.groups()
        start = i + 1
        i = start
        while i < len(lines) and not (
            lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""
        ):
            i += 1
        if i == len(lines):
            raise AssertionError(f"{doc}:{start}: the {fence}{lang} block is never closed")
        if lang.lower() in ("python", "py"):
            body = [line.removeprefix(indent) for line in lines[start:i]]
            examples.append(Example(doc, start + 1, "\n".join(body) + "\n"))
        i += 1
    return examples


#: engines of optional extras (docs/scale-out.md): a block that imports one runs, and is
#: mypy-checked, only where it is installed
ENGINES = ("dask", "distributed", "ray", "pyspark")


#: per block that starts an engine (a Dask cluster, Ray: worker processes of their own)
ENGINE_SECONDS = 300


def engines(example: Example) -> list[str]:
    """The engines `example` imports."""
    return [
        name
        for name in ENGINES
        if re.search(rf"^\s*(import|from)\s+{name}\b", example.code, re.MULTILINE)
    ]


def missing_engine(example: Example) -> str | None:
    """The first engine `example` imports that is not installed, or None."""
    for name in engines(example):
        if importlib.util.find_spec(name) is None:
            return name
    return None


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def all_examples() -> list[Example]:
    out: list[Example] = []
    for path in documents():
        out += extract(str(path.relative_to(REPO)), path.read_text(encoding="utf-8"))
    return out


EXAMPLES = all_examples()


def _env() -> dict[str, str]:
    """The test's environment with the checkout importable and no AWS_* settings leaking in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def test_the_documents_have_examples() -> None:
    docs = {e.doc for e in EXAMPLES}
    assert "README.md" in docs
    assert len(docs) >= 2, f"examples found only in {sorted(docs)}"


def test_extract_keeps_document_line_numbers() -> None:
    text = "# t\n\n```python\nx = 1\n```\n\n```sh\nls\n```\n````python\ny = 2\n````\n"
    found = extract("t.md", text)
    assert [(e.line, e.code) for e in found] == [(4, "x = 1\n"), (11, "y = 2\n")]
    assert found[0].source().splitlines()[3] == "x = 1"
    with pytest.raises(AssertionError, match=r"t\.md:2: the ```python block is never closed"):
        extract("t.md", "\n```python\nx = 1\n")


def test_a_block_needing_an_engine_not_installed_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert (
        missing_engine(Example("d.md", 1, "import os\nfrom dask.distributed import C\n")) == "dask"
    )
    assert missing_engine(Example("d.md", 1, "import rayon\nimport opendata_kv.ray\n")) is None
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # all installed
    assert missing_engine(Example("d.md", 1, "import dask\n")) is None


@pytest.fixture(scope="module")
def runner() -> Iterator[subprocess.Popen[str]]:
    """tests/example_runner.py: each block runs in a fresh process forked from it."""
    process = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "example_runner.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        assert process.stdout.readline() == "ready\n"
        yield process
    finally:
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        process.stdout.close()


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.where for e in EXAMPLES])
def test_example_runs(example: Example, tmp_path: Path, runner: subprocess.Popen[str]) -> None:
    engine = missing_engine(example)
    if engine is not None:
        pytest.skip(f"{example.where} needs {engine}, which is not installed")
    script = tmp_path / f"{example.module}.py"
    script.write_text(example.source(), encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    assert runner.stdin is not None and runner.stdout is not None
    seconds = ENGINE_SECONDS if engines(example) else RUN_SECONDS
    runner.stdin.write(f"{script}\t{work}\t{seconds}\n")
    runner.stdin.flush()
    reply = runner.stdout.readline()
    if reply == "timeout\n":
        pytest.fail(f"{example.where}: still running after {seconds} s", pytrace=False)
    assert reply.startswith("status "), f"the example runner ended: {reply!r}"
    returncode = int(reply.split()[1])
    if returncode != 0:
        stderr = Path(f"{script}.err").read_text(encoding="utf-8", errors="replace")
        trace = stderr.replace(str(script), example.doc)
        pytest.fail(f"{example.where}: the example exits {returncode}\n{trace}", pytrace=False)


def test_examples_pass_mypy_strict(tmp_path: Path, mypy_cache: Path) -> None:
    """One mypy run over every block; each error is reported as document:line."""
    by_module: dict[str, Example] = {}
    for example in EXAMPLES:
        if missing_engine(example) is not None:
            continue
        (tmp_path / f"{example.module}.py").write_text(example.source(), encoding="utf-8")
        by_module[example.module] = example
    status, output = mypy_strict(tmp_path, sorted(f"{m}.py" for m in by_module), mypy_cache)
    if status == 0:
        return
    problems = []
    for line in output.splitlines():
        module, sep, rest = line.partition(".py:")
        example = by_module.get(module) if sep else None
        problems.append(f"{example.doc}:{rest}" if example else line)
    pytest.fail("mypy --strict on the documents' examples:\n" + "\n".join(problems), pytrace=False)


_LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)]*)?\)")


def test_guide_links_resolve_and_index_lists_every_page() -> None:
    """Relative links between the documents point at files that exist, and docs/index.md
    links every page of the guide."""
    broken = []
    for path in documents():
        for target, _anchor in _LINK.findall(path.read_text(encoding="utf-8")):
            if "://" not in target and not (path.parent / target).is_file():
                broken.append(f"{path.relative_to(REPO)} -> {target}")
    assert not broken, f"links to missing files: {broken}"
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    listed = {target for target, _ in _LINK.findall(index)}
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    assert not pages - listed, f"docs/index.md does not link {sorted(pages - listed)}"
