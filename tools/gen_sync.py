"""Write the sync faces, opendata_kv/store/sync.py and opendata_kv/collections/sync.py, from
their async classes.

The async classes are the one definition. This script reads them (their source, with ast) and
FACES / COLLECTION_FACES below, the one table of what each sync class wraps and which runner
each public method uses; it writes every sync method with the async one's signature, overloads
and docstring. Whatever has no async twin (the runners, the iterators, `db[key]`, `with`) is
hand-written in the sync_support.py beside each. A public async method the table does not name
stops the script, so a new operation cannot go without its sync twin.

    python tools/gen_sync.py          # write the files
    python tools/gen_sync.py --check  # exit 1 when a file on disk differs (CI)

The output is put through `ruff check --select I --fix` and `ruff format`, so it is formatted
as the project's configuration says.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import difflib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUPPORT = "opendata_kv.store.sync_support"

# --- the table -----------------------------------------------------------------------------------
#
# A runner says how a sync method runs its async twin:
#   now          `run_inline(twin(...))`: driven inline, every wait a native call (calls.sync)
#   loop         `run_on_loop(twin(...))`: on a private event loop (native.driver.run), for what
#                uses asyncio itself (timeouts, sleeps, polling)
#   now|loop:A   `run_on_loop` when argument A is an AsyncIterable, else `run_inline`
#   call         the twin is a plain method: called as it is
#   call:NAME    the twin's sync counterpart NAME is called instead (a faster path)
#   wrap         the twin returns an async object, wrapped in its sync class (WRAPS)
#   enter        the twin is an async context manager, entered for a `with` block (ENTERS)
#   get          a property read through
#   init         __init__: the sync object holds a new async one, made from the same arguments
#   hand         hand-written in a base class of sync_support (checked to exist there)


#: the sync_support function each of the runners `now` and `loop` calls
RUNNER_FUNCTIONS = {"now": "run_inline", "loop": "run_on_loop"}


@dataclass(frozen=True)
class Face:
    name: str  # the sync class
    sources: tuple[str, ...]  # "module:Class": the async classes whose public methods it has
    bases: tuple[str, ...]
    holder: str  # where a sync object keeps its async twin
    doc: str
    runners: dict[str, str]
    attrs: dict[str, str] = field(default_factory=dict)  # class-level annotations


FACES = (
    Face(
        "SyncView",
        ("opendata_kv.store.views:ReadView",),
        ("ViewMapping",),
        "self._view",
        "Blocking reads (get, get_many, exists, scans, count) over an async ReadView, and the\n"
        "mapping conveniences: `view[key]` (KeyError when missing), `key in view`.",
        {
            "get_raw": "now",
            "get": "call:_get_now",
            "exists": "now",
            "get_many": "call:_get_many_now",
            "get_with_expiry": "now",
            "get_many_with_expiry": "now",
            "distinct": "now",
            "scan": "wrap",
            "scan_all": "wrap",
            "count": "now",
        },
    ),
    Face(
        "SyncSnapshot",
        ("opendata_kv.store.batch:Snapshot",),
        ("SyncView",),
        "self._view",
        "A consistent, read-only, point-in-time view (SyncStore.snapshot).",
        {},
        {"_view": "Snapshot"},
    ),
    Face(
        "SyncTransaction",
        ("opendata_kv.store.batch:Transaction",),
        ("SyncView",),
        "self._view",
        "Blocking reads and writes inside a transaction (SyncStore.transaction).",
        {"put": "now", "delete": "now", "commit": "now", "rollback": "now"},
        {"_view": "Transaction"},
    ),
    Face(
        "SyncBatch",
        ("opendata_kv.store.batch:Batch",),
        ("BatchHolder",),
        "self.batch",
        "Writes collected in memory, applied atomically on leaving `with db.batch() as b:` (or\n"
        "by SyncStore.write).",
        {
            "put": "call",
            "put_all": "call",
            "put_item": "call",
            "put_encoded": "call",
            "columns": "call",
            "create": "call",
            "creates": "call",
            "delete": "call",
            "delete_range": "now",
            "put_raw": "call",
            "delete_raw": "call",
            "queue": "call",
            "indexed_ops": "call",
            "replacing": "call",
            "key_fields": "call",
            "tracked": "call",
            "write_batch": "call",
            "ops": "get",
        },
        {"batch": "Batch"},
    ),
    Face(
        "SyncStoreReader",
        ("opendata_kv.store.reader:StoreReader", "opendata_kv.store.indexes.read:IndexReads"),
        ("SyncView", "ReaderContext"),
        "self.store",
        "A read-only SyncStore (SyncStore.open_reader): reads, scans, the change feed and\n"
        "checkpoints; no write methods.",
        {
            "changes": "wrap",
            "change_batches": "wrap",
            "clone": "loop",
            "closed": "get",
            "check_open": "call",
            "checkpoint": "loop",
            "checkpoints": "loop",
            "splits": "loop",
            "refresh_checkpoint": "loop",
            "delete_checkpoint": "loop",
            "close": "now",
            "index_scan": "wrap",
            "lookup": "now",
            "index_count": "now",
            "index_sum": "now",
            "index_info": "now",
            "check_indexes": "now",
        },
        {"_view": "StoreReader", "store": "StoreReader"},
    ),
    Face(
        "SyncStore",
        ("opendata_kv.store.writer:Store",),
        ("SyncStoreReader",),
        "self.store",
        'Blocking Store: `with SyncStore.open("./data", schema) as db: db.put(...)`.',
        {
            "open": "wrap",
            "open_reader": "wrap",
            "put": "now",
            "delete": "now",
            "delete_many": "now",
            "delete_range": "now",
            "purge_expired": "now",
            "read_before_write": "now",
            "put_raw": "now",
            "flush": "now",
            "put_many": "now|loop:records",
            "batch": "enter",
            "write": "now",
            "transaction": "enter",
            "snapshot": "enter",
            "migrate": "now",
            "build_index": "now",
            "rebuild_index": "now",
            "drop_index": "now",
            "record_cache": "get",
        },
        {"_view": "Store", "store": "Store"},
    ),
    Face(
        "SyncScan",
        ("opendata_kv.store.scan:Scan",),
        ("ScanIteration[R]",),
        "self.scan",
        "A blocking iterator over a Scan (`for record in db.scan(...)`).",
        {
            "cursor": "get",
            "position": "get",
            "next_chunk": "now",
            "has_more": "now",
            "to_list": "now",
            "to_arrow": "call",
            "undecoded": "hand",
            "keys": "hand",
            "values": "hand",
            "count": "now",
            "seek": "now",
        },
    ),
    Face(
        "SyncIndexScan",
        ("opendata_kv.store.indexes.read:IndexScan",),
        ("IndexScanIteration[IT]",),
        "self.scan",
        "A blocking iterator over an IndexScan (`for record in db.index_scan(...)`).",
        {
            "cursor": "get",
            "position": "get",
            "next_chunk": "now",
            "has_more": "now",
            "to_list": "now",
            "to_arrow": "call",
        },
    ),
)

COLLECTION_FACES = (
    Face(
        "SyncRecordCollection",
        ("opendata_kv.collections.records:RecordCollection",),
        ("CollectionFace", "Generic[SyncStoreT]"),
        "self.collection",
        "RecordCollection for a SyncStore: the same methods, blocking.",
        {
            "__init__": "init",
            "backlinks": "get",
            "key_type": "call",
            "prepared": "call",
            "create": "now",
            "put": "now",
            "put_many": "now|loop:records",
            "create_many": "now|loop:records",
            "delete": "now",
            "get": "now",
            "exists": "now",
            "list": "now",
            "scan": "wrap",
            "collections": "now",
            "repos": "now",
            "count": "now",
            "likes": "now",
            "reposts": "now",
            "followers": "now",
            "like_count": "now",
            "repost_count": "now",
            "follower_count": "now",
            "backlink_page": "now",
            "backlink_count": "now",
            "top": "now",
            "distinct_likers": "now",
            "distinct_linkers": "now",
            "typed": "wrap",
        },
        {"collection": "RecordCollection[Any]"},
    ),
    Face(
        "SyncTypedRecords",
        ("opendata_kv.collections.typed_records:TypedRecords",),
        ("TypedFace", "Generic[ValueT, SyncStoreT]"),
        "self.collection",
        "A typed view of one collection NSID for a SyncStore (SyncRecordCollection.typed): the\n"
        "same methods, blocking.",
        {
            "get": "now",
            "exists": "now",
            "list": "now",
            "scan": "wrap",
            "count": "now",
            "backlink_page": "now",
            "create": "now",
            "put": "now",
            "put_many": "now|loop:records",
            "create_many": "now|loop:records",
            "delete": "now",
        },
        {"collection": "TypedRecords[Any, Any]"},
    ),
    Face(
        "SyncChangeLog",
        ("opendata_kv.collections.changelog:ChangeLog",),
        ("CollectionFace", "Generic[SyncStoreT]"),
        "self.collection",
        "ChangeLog for a SyncStore: the same methods, blocking.",
        {
            "__init__": "init",
            "medallion": "get",
            "transaction": "enter",
            "put": "now",
            "write": "now",
            "get": "now",
            "scan": "wrap",
            "sentinels": "wrap",
            "by_medallion": "wrap",
            "medallions": "now",
            "count": "now",
        },
        {"collection": "ChangeLog[Any]"},
    ),
    Face(
        "SyncPageStore",
        ("opendata_kv.collections.pages:PageStore",),
        ("CollectionFace", "Generic[SyncStoreT]"),
        "self.collection",
        "PageStore for a SyncStore: the same methods, blocking.",
        {
            "__init__": "init",
            "save": "now",
            "delete": "now",
            "purge_expired": "now",
            "fetch": "now",
            "expired": "wrap",
            "scan": "wrap",
        },
        {"collection": "PageStore[Any]"},
    ),
)

#: async classes and the sync classes that stand for them in signatures
RENAMES = {
    "Batch": "SyncBatch",
    "IndexScan": "SyncIndexScan",
    "Scan": "SyncScan",
    "Snapshot": "SyncSnapshot",
    "Store": "SyncStore",
    "StoreReader": "SyncStoreReader",
    "Transaction": "SyncTransaction",
    "Results": "SyncResults",
    # a collection's store type (write methods take `self: RecordCollection[Store]`)
    "StoreT": "SyncStoreT",
    "RecordCollection": "SyncRecordCollection",
    "ChangeLog": "SyncChangeLog",
    "PageStore": "SyncPageStore",
    "TypedRecords": "SyncTypedRecords",
}
#: `wrap`: what the async return type (by its head) becomes; {arg}: its first type argument
WRAPS = {
    "Scan": "SyncScan[Any]({call})",
    "IndexScan": "SyncIndexScan[Any]({call})",
    "AsyncGenerator": "SyncChanges({call}, self.store)",
    "Opening": "{arg}(run_on_loop(_await({call})))",
    "Results": "SyncResults({call})",
    "TypedRecords": "SyncTypedRecords({call})",
}
#: `enter`: how the object a context manager yields is wrapped, by the async return type
ENTERS = {"_BatchContext": "SyncBatch._of", "AsyncIterator": "{arg}"}
#: a parameter of a sync class is passed to the twin as its async object
UNWRAP = {"SyncBatch": "{}.batch", "SyncStore": "{}.store", "SyncStoreT": "{}.store"}
#: names the renames bring in that no async source imports
EXTRA_IMPORTS = {"AbstractContextManager": "contextlib", "Iterator": "collections.abc"}
#: docstring phrases of the async face and what the sync face says instead
UNASYNC = (("async with ", "with "), ("async for ", "for "), ("await ", ""))

HEADER = """\
# Generated by tools/gen_sync.py from the async classes it names and its FACES table: do not
# edit. Change the async source or the table, then run `python tools/gen_sync.py`; CI runs it
# with --check.
"""


@dataclass(frozen=True)
class Target:
    """One generated module: its path, docstring, hand-written support modules and faces."""

    path: str
    doc: str
    supports: tuple[str, ...]
    faces: tuple[Face, ...]
    reexports: tuple[str, ...] = ()  # hand-written classes the module exports too


TARGETS = (
    Target(
        "opendata_kv/store/sync.py",
        "The sync face: SyncStore and its objects, blocking, for code without an event loop.\n\n"
        "Every method runs its async twin on the calling thread, through the runner\n"
        "tools/gen_sync.py's table names (see opendata_kv/store/sync_support.py, which holds\n"
        "the runners and the hand-written iterators). tests/test_store_sync_face.py compares\n"
        "the signatures.",
        (SUPPORT,),
        FACES,
        ("SyncChanges",),
    ),
    Target(
        "opendata_kv/collections/sync.py",
        "The collections' sync face: RecordCollection, ChangeLog and PageStore over a\n"
        "SyncStore, blocking.\n\n"
        '    with SyncStore.open("./data", default_schema()) as db:\n'
        "        SyncRecordCollection(db).like_count(uri)\n\n"
        "Every method runs its async twin on the calling thread (tools/gen_sync.py; the\n"
        "hand-written part is opendata_kv/collections/sync_support.py).",
        ("opendata_kv.collections.sync_support", SUPPORT),
        COLLECTION_FACES,
        ("SyncResults",),
    ),
)


class Error(Exception):
    """The table and the async source disagree."""


# --- reading the async source -------------------------------------------------------------------


@dataclass
class Source:
    module: str
    tree: ast.Module
    text: str

    @staticmethod
    def load(module: str) -> Source:
        path = ROOT / (module.replace(".", "/") + ".py")
        text = path.read_text()
        return Source(module, ast.parse(text), text)

    def cls(self, name: str) -> ast.ClassDef:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
        raise Error(f"{self.module} has no class {name}")

    def origins(self) -> dict[str, tuple[str, str, bool]]:
        """name -> (module, name there or "" for `import module`, imported only for type
        checking) of every name the module binds at its top level."""
        out: dict[str, tuple[str, str, bool]] = {}

        def imports(nodes: list[ast.stmt], typing_only: bool) -> None:
            for node in nodes:
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        out.setdefault(
                            alias.asname or alias.name, (node.module, alias.name, typing_only)
                        )
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        out.setdefault(alias.asname or alias.name, (alias.name, "", typing_only))
                elif isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                    imports(node.body, True)
                elif isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.setdefault(node.name, (self.module, node.name, False))
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            out.setdefault(target.id, (self.module, target.id, False))

        imports(self.tree.body, False)
        return out


def _members(source: Source, cls: ast.ClassDef) -> dict[str, list[ast.FunctionDef]]:
    """The public methods of `cls` by name (and __init__), each its overloads then its
    implementation."""
    out: dict[str, list[ast.FunctionDef]] = {}
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            not node.name.startswith("_") or node.name == "__init__"
        ):
            out.setdefault(node.name, []).append(node)  # type: ignore[arg-type]
    return out


def _decorators(node: ast.FunctionDef) -> list[str]:
    return [ast.unparse(d) for d in node.decorator_list]


# --- writing the sync face ----------------------------------------------------------------------


class _Annotations(ast.NodeTransformer):
    """An async annotation as the sync face says it: async classes renamed to their sync
    ones, async generators to SyncChanges, an opening to what it opens, a context manager
    to a sync one."""

    def __init__(self, context_manager: bool) -> None:
        self.context_manager = context_manager

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id == "_BatchContext":
            return ast.parse("AbstractContextManager[SyncBatch]", mode="eval").body
        return ast.Name(RENAMES.get(node.id, node.id), node.ctx)

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        head = ast.unparse(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "AsyncGenerator":
            return ast.Subscript(ast.Name("SyncChanges"), self.visit(args[0]), node.ctx)
        if head == "Opening":
            return self.visit(args[0])  # type: ignore[no-any-return]
        if head == "AsyncIterator":
            wrapper = "AbstractContextManager" if self.context_manager else "Iterator"
            return ast.Subscript(ast.Name(wrapper), self.visit(args[0]), node.ctx)
        self.generic_visit(node)
        return node


def _sync_annotation(node: ast.expr | None, context_manager: bool = False) -> str:
    if node is None:
        return ""
    copy = ast.parse(ast.unparse(node), mode="eval").body
    return ast.unparse(_Annotations(context_manager).visit(copy))


def _signature(function: ast.FunctionDef, context_manager: bool) -> tuple[str, str]:
    """(parameters, return annotation) of the sync twin of `function`."""
    args = ast.parse(f"def f({ast.unparse(function.args)}): pass").body[0].args  # type: ignore[attr-defined]
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None and arg.annotation is not None:
            arg.annotation = _Annotations(False).visit(arg.annotation)
    return ast.unparse(args), _sync_annotation(function.returns, context_manager)


def _forward(function: ast.FunctionDef) -> str:
    """The arguments passing every parameter of the sync twin on to `function`."""
    args = function.args
    out = []
    for arg in [*args.posonlyargs, *args.args]:
        if arg.arg in ("self", "cls"):
            continue
        unwrap = UNWRAP.get(_sync_annotation(arg.annotation))
        out.append(unwrap.format(arg.arg) if unwrap else arg.arg)
    if args.vararg is not None:
        out.append(f"*{args.vararg.arg}")
    out += [f"{arg.arg}={arg.arg}" for arg in args.kwonlyargs]
    if args.kwarg is not None:
        out.append(f"**{args.kwarg.arg}")
    return ", ".join(out)


def _docstring(source: Source, function: ast.FunctionDef) -> str | None:
    first = function.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)):
        return None
    if not isinstance(first.value.value, str):
        return None
    text = ast.get_source_segment(source.text, first) or ""
    for old, new in UNASYNC:
        text = text.replace(old, new)
    return text


def _head(annotation: ast.expr | None) -> tuple[str, str]:
    """(head name, first type argument as the sync face names it) of a return annotation (of
    a union's first member: `Scan[Record] | Scan[RawRecord]` is a Scan)."""
    while isinstance(annotation, ast.BinOp):
        annotation = annotation.left
    if isinstance(annotation, ast.Subscript):
        first = annotation.slice
        if isinstance(first, ast.Tuple):
            first = first.elts[0]
        return ast.unparse(annotation.value), _sync_annotation(first)
    return (ast.unparse(annotation) if annotation is not None else ""), ""


def _method(face: Face, source: Source, cls: str, name: str, nodes: list[ast.FunctionDef]) -> str:
    runner = face.runners.get(name)
    if runner is None:
        raise Error(
            f"{cls}.{name} has no runner in gen_sync.FACES[{face.name!r}]: say how the sync "
            "face runs it (now, loop, call, wrap, enter, get or hand)"
        )
    *overloads, impl = nodes
    decorators = _decorators(impl)
    context_manager = "asynccontextmanager" in decorators
    static = "staticmethod" in decorators
    out: list[str] = []
    for stub in overloads:
        params, returns = _signature(stub, False)
        out += ["    @overload", f"    def {name}({params}) -> {returns}: ...", ""]
    params, returns = _signature(impl, context_manager)
    kept = [d for d in decorators if d in ("staticmethod", "property")]
    if runner == "init":  # the sync object holds a new async one
        kept = []
    out += [f"    @{d}" for d in kept]
    out.append(f"    def {name}({params}) -> {returns}:")
    doc = _docstring(source, impl)
    body = [doc] if doc else []
    holder = cls if static else face.holder
    if overloads:  # the implementation's signature, not an overload's
        body.append(f"twin: Any = {holder}")
        holder = "twin"
    method = name
    if runner.startswith("call:"):
        method, runner = runner.split(":", 1)[1], "call"
    call = f"{holder}.{method}({_forward(impl)})"
    if runner == "init":
        body.append(f"{face.holder} = {cls}({_forward(impl)})")
    elif runner == "get":
        body.append(f"return {holder}.{name}")
    elif runner == "call":
        if returns == "None":
            body.append(call)
        elif overloads and returns != "Any":  # `twin` is Any: say what it returns
            body += [f"result: {returns} = {call}", "return result"]
        else:
            body.append(f"return {call}")
    elif runner == "wrap":
        head, arg = _head(impl.returns)
        if head not in WRAPS:
            raise Error(f"{cls}.{name} returns {head}: no entry in gen_sync.WRAPS")
        body.append("return " + WRAPS[head].format(call=call, arg=arg))
    elif runner == "enter":
        head, arg = _head(impl.returns)
        if head not in ENTERS:
            raise Error(f"{cls}.{name} returns {head}: no entry in gen_sync.ENTERS")
        wrapper = ENTERS[head].format(arg=arg)
        if wrapper not in RENAMES.values() and "." not in wrapper:
            wrapper = "_itself"  # a sync object already (ChangeLog's ChangeTransaction)
        body.append(f"return _entered({call}, {wrapper})")
    elif runner in ("now", "loop") or runner.startswith("now|loop:"):
        if runner.startswith("now|loop:"):
            chooser = runner.split(":", 1)[1]
            body.append(
                f"run = run_on_loop if isinstance({chooser}, AsyncIterable) else run_inline"
            )
            runner = "run"
        else:
            runner = RUNNER_FUNCTIONS[runner]
        if returns == "None":
            body.append(f"{runner}({call})")
        else:
            body += [f"result: {returns} = {runner}({call})", "return result"]
    else:
        raise Error(f"{face.name}.{name}: unknown runner {runner!r}")
    out += [line if line.startswith(" ") else f"        {line}" for line in body]
    return "\n".join(out) + "\n"


def _names(text: str) -> set[str]:
    """Every name the generated text loads that is not bound inside a function of it."""
    tree = ast.parse(text)
    local: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    # a parameter's name may also be an imported name (`values: Values`): keep what is loaded
    # outside function bodies, and in bodies whatever no parameter or local binds
    outside: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            parts: list[ast.AST] = list(getattr(node, "decorator_list", []))
            if isinstance(node, ast.FunctionDef):
                args = node.args
                parts += [
                    a.annotation for a in ast.walk(args) if isinstance(a, ast.arg) and a.annotation
                ]
                parts += [*args.defaults, *[d for d in args.kw_defaults if d is not None]]
                if node.returns is not None:
                    parts.append(node.returns)
            else:
                parts += [*node.bases]
            for part in parts:
                outside |= {n.id for n in ast.walk(part) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign):
            outside |= {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
    return outside | (loaded - local)


def _module(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def render(target: Target) -> str:
    """The text of `target`'s module."""
    support_names: dict[str, str] = {}
    support_members: dict[str, set[str]] = {}
    for module in target.supports:
        tree = Source.load(module).tree
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                support_names.setdefault(node.name, module)
            if isinstance(node, ast.If):  # a TypeVar defined per TYPE_CHECKING (SyncStoreT)
                for branch in (node.body, node.orelse):
                    for inner in branch:
                        if isinstance(inner, ast.Assign) and isinstance(inner.targets[0], ast.Name):
                            support_names.setdefault(inner.targets[0].id, module)
            if isinstance(node, ast.ClassDef):
                support_members[node.name] = {
                    m.name for m in node.body if isinstance(m, ast.FunctionDef)
                }
    support_names.setdefault("run_inline", SUPPORT)
    support_names.setdefault("run_on_loop", SUPPORT)
    elsewhere = {
        face.name: _module(other.path)
        for other in TARGETS
        if other.path != target.path
        for face in other.faces
    }
    origins: dict[str, tuple[str, str, bool]] = {}
    classes: list[str] = []
    generated = {face.name for face in target.faces}
    for face in target.faces:
        lines = [f"class {face.name}({', '.join(face.bases)}):", f'    """{face.doc}"""', ""]
        lines += [f"    {attr}: {kind}" for attr, kind in face.attrs.items()]
        if face.attrs:
            lines.append("")
        covered: set[str] = set()
        for spec in face.sources:
            module, cls = spec.split(":")
            source = Source.load(module)
            for name, value in source.origins().items():
                if name not in origins or (origins[name][2] and not value[2]):
                    origins[name] = value  # the first source that imports it at run time
            members = _members(source, source.cls(cls))
            for name, nodes in members.items():
                if name == "__init__" and name not in face.runners:
                    continue  # the hand-written base's constructor
                covered.add(name)
                if face.runners.get(name) == "hand":
                    base = face.bases[0].split("[")[0]
                    if name not in support_members.get(base, set()):
                        raise Error(f"{face.name}.{name} is 'hand' but {base} has no {name}")
                    continue
                lines.append(_method(face, source, cls, name, nodes))
        stale = set(face.runners) - covered
        if stale:
            raise Error(f"FACES[{face.name!r}] names {sorted(stale)}: no such async methods")
        classes.append("\n".join(lines).rstrip() + "\n")
    body = "\n\n".join(classes)
    exported = sorted(generated | set(target.reexports))
    body += "\n\n__all__ = [" + ", ".join(f'"{n}"' for n in exported) + "]\n"
    needed = _names(body) - generated - set(dir(builtins))
    runtime: dict[str, set[str]] = {}
    typing_only: dict[str, set[str]] = {}
    plain: set[str] = set()
    for name in sorted(needed | set(target.reexports)):
        if name in support_names:
            runtime.setdefault(support_names[name], set()).add(name)
        elif name in elsewhere:
            runtime.setdefault(elsewhere[name], set()).add(name)
        elif name in EXTRA_IMPORTS:
            runtime.setdefault(EXTRA_IMPORTS[name], set()).add(name)
        elif name in origins:
            module, original, only_typing = origins[name]
            if not original:  # `import os`
                plain.add(module)
                continue
            entry = name if original == name else f"{original} as {name}"
            (typing_only if only_typing else runtime).setdefault(module, set()).add(entry)
        else:
            raise Error(f"{target.path} uses {name!r}, which no async source imports")
    if typing_only:
        runtime.setdefault("typing", set()).add("TYPE_CHECKING")
    imports = ["from __future__ import annotations", ""]
    imports += [f"import {m}" for m in sorted(plain)]
    imports += [f"from {m} import {', '.join(sorted(n))}" for m, n in sorted(runtime.items())]
    if typing_only:
        imports.append("\nif TYPE_CHECKING:")
        imports += [
            f"    from {m} import {', '.join(sorted(n))}" for m, n in sorted(typing_only.items())
        ]
    doc = f'"""{target.doc}\n"""\n'
    text = HEADER + doc + "\n" + "\n".join(imports) + "\n\n\n" + body
    return _ruff(text, target.path)


def _ruff(text: str, path: str) -> str:
    """`text` with its imports sorted and formatted as the project's ruff configuration says."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        raise Error("ruff is not installed (pip install '.[dev]')")
    stdin = ["--stdin-filename", path, "-"]
    for command in (
        [ruff, "check", "--quiet", "--select", "I", "--fix", "--exit-zero", *stdin],
        [ruff, "format", "--quiet", *stdin],
    ):
        text = subprocess.run(
            command, input=text, capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    options = parser.parse_args()
    stale = 0
    for target in TARGETS:
        try:
            text = render(target)
        except Error as exc:
            print(f"gen_sync: {exc}", file=sys.stderr)
            return 2
        path = ROOT / target.path
        current = path.read_text() if path.exists() else ""
        if current == text:
            continue
        if options.check:
            diff = difflib.unified_diff(
                current.splitlines(True), text.splitlines(True), "on disk", "generated"
            )
            sys.stderr.writelines(diff)
            print(
                f"gen_sync: {target.path} is not what tools/gen_sync.py writes: run it",
                file=sys.stderr,
            )
            stale = 1
        else:
            path.write_text(text)
            print(f"gen_sync: wrote {target.path}")
    return stale


if __name__ == "__main__":
    sys.exit(main())
