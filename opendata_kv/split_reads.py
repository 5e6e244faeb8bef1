"""What every engine's read task does (opendata_kv.dask, .ray, .spark): one record type's rows
in a few key ranges, at one pinned checkpoint, as Arrow batches of one schema all tasks share.

The driver plans (`plan_reads`): it pins the store (or takes the caller's pin), cuts the
record's range into splits and fixes the Arrow schema from the record's first batch, as one
process's `to_arrow()` does. Each task (`read_batches`) opens its own reader at the checkpoint
and converts its rows with that schema, so a plain msgpack map field the first batch lacked
goes to `_extra` in every task alike (docs/arrow.md) and the partitions concatenate to what
one `to_arrow()` over the record gives. Engines never write: there is one writer.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from opendata_kv.errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    MissingExtraError,
    OpendataKvError,
)
from opendata_kv.keys import RecordType, Schema
from opendata_kv.store import KeyRange, Pinned, pinned, pinned_readers
from opendata_kv.store.arrow import RowLayout, require_pyarrow, value_columns
from opendata_kv.store.schema_arg import as_schema
from opendata_kv.values import Values

#: the default size of one task's share: the splits' own default (one split per ~64 MiB)
DEFAULT_SPLIT_BYTES = 64 << 20
#: rows the driver reads to fix a plain msgpack record's value columns: to_arrow's first batch
SAMPLE_ROWS = 1024

#: what `schema=` may be: anything Store.open takes that pickles (a Schema, RecordTypes, whose
#: `value=` classes give their codecs), a "module:attr" naming one, or a function returning one
SchemaSource = Schema | RecordType | Iterable[RecordType] | Values | str | Callable[[], Any]


def missing_extra(extra: str, error: ImportError) -> MissingExtraError:
    """The error for an engine module whose package is missing: names the extra to install
    (`field`) and the module that failed to import (`value`)."""
    module = error.name or str(error)
    return MissingExtraError(
        f"opendata_kv.{extra} needs {module}: pip install 'opendata-kv[{extra}]'",
        field=extra,
        value=module,
    )


def load_schema(source: Any) -> tuple[Schema, Values]:
    """The (Schema, Values) a `schema=` source gives, in the process that reads."""
    if isinstance(source, str):
        module_name, sep, attr = source.partition(":")
        if not sep or not module_name or not attr:
            raise InvalidArgumentError(
                f"schema {source!r}: a string must name module:attr", field="schema", value=source
            )
        found: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            found = getattr(found, part)
        source = found
    elif callable(source) and not isinstance(source, (Schema, RecordType, Values)):
        source = source()
    return as_schema(source)


def shippable_schema(source: Any) -> Any:
    """`source` as tasks receive it: checked here, on the driver, to load and to pickle (a
    Values holds msgpack packers, which do not pickle: pass its Schema with `value=` classes,
    a "module:attr" or a function that builds it instead)."""
    load_schema(source)
    if isinstance(source, Values):
        raise ArgumentTypeError(
            "schema: a Values cannot be sent to the engine's workers (its codecs do not "
            "pickle); pass the Schema (RecordType(..., value=Class) gives its codec), a "
            "'module:attr' string, or a function returning the Values",
            field="schema",
            value=source,
        )
    return source


@dataclasses.dataclass(frozen=True, repr=False)
class SplitRead:
    """One task's share: `record`'s rows in `ranges` (contiguous, sorted) at `pin`'s
    checkpoint, as batches of `arrow_schema`. Picklable: the engine ships it to a worker."""

    pin: Pinned
    schema: Any  # a schema source (see SchemaSource), loaded in the worker
    record: str
    ranges: tuple[KeyRange, ...]
    arrow_schema: Any  # a pyarrow.Schema
    reader_options: tuple[tuple[str, Any], ...] = ()

    @property
    def estimated_bytes(self) -> int:
        return sum(r.estimated_bytes for r in self.ranges)

    def __repr__(self) -> str:
        first, last = self.ranges[0], self.ranges[-1]
        end = "end" if last.end is None else last.end.hex()
        return (
            f"SplitRead({self.record} [{first.start.hex()}, {end}) in {len(self.ranges)} "
            f"range(s), ~{self.estimated_bytes} bytes, checkpoint {self.pin.checkpoint_id})"
        )


@dataclasses.dataclass(frozen=True)
class ReadPlan:
    """What the driver decided: the tasks, the shared Arrow schema and the pin they read."""

    pin: Pinned
    owned: bool  # the pin was made here (not the caller's): it expires with its lifetime
    record: RecordType  # the newest version of the record read
    record_types: tuple[RecordType, ...]  # every version a scan of it reads
    tasks: list[SplitRead]
    arrow_schema: Any
    first_row: Any  # the first and last rows' keys (None for an empty record)
    last_row: Any

    @property
    def estimated_bytes(self) -> int:
        return sum(t.estimated_bytes for t in self.tasks)


def record_name(record: str | RecordType) -> str:
    if isinstance(record, RecordType):
        return record.name
    if isinstance(record, str):
        return record
    raise ArgumentTypeError(
        f"record must be a record name or a RecordType, got {type(record).__name__}",
        field="record",
        value=record,
    )


def open_pin(
    url: str, pin: Pinned | None, lifetime: float, store_options: dict[str, Any]
) -> tuple[Pinned, bool]:
    """The caller's pin (checked to be of `url`), or a new one that expires after `lifetime`
    seconds: the engines' collections are lazy, so a pin made here cannot know the last use."""
    if pin is not None:
        if not isinstance(pin, Pinned):
            raise ArgumentTypeError(
                f"pin must be a Pinned (opendata_kv.pinned), got {type(pin).__name__}",
                field="pin",
                value=pin,
            )
        if str(url) != pin.url:
            raise InvalidArgumentError(
                f"pin is a checkpoint of {pin.url}, not of {url}", field="pin", value=pin.url
            )
        return _shippable_pin(pin), False
    made = pinned(str(url), lifetime=lifetime, **store_options)
    made.__enter__()  # released by its lifetime, not by an exit (see the docstring)
    return made, True


def _shippable_pin(pin: Pinned) -> Pinned:
    """`pin` without the schema it may carry for its own readers (a Values does not pickle,
    and the tasks load theirs from `schema=`): what the tasks receive."""
    if "schema" not in pin.options and "values" not in pin.options:
        return pin
    shipped = copy.copy(pin)
    shipped.options = {k: v for k, v in pin.options.items() if k not in ("schema", "values")}
    return shipped


def plan_reads(
    url: str,
    record: str | RecordType,
    schema: Any,
    *,
    split_bytes: int,
    pin: Pinned | None,
    lifetime: float,
    store_options: dict[str, Any],
    reader_options: dict[str, Any],
) -> ReadPlan:
    """Pin, split and fix the schema, on the driver (reads the record's first batch and its
    first and last keys; writes nothing but the checkpoint it may create)."""
    if not isinstance(split_bytes, int) or isinstance(split_bytes, bool) or split_bytes < 1:
        raise InvalidArgumentError(
            f"split_bytes must be a positive int, got {split_bytes!r}",
            field="split_bytes",
            value=split_bytes,
        )
    ship = shippable_schema(schema)
    loaded, values = load_schema(ship)
    name = record_name(record)
    versions = tuple(loaded.versions(name))
    the_pin, owned = open_pin(url, pin, lifetime, store_options)
    with the_pin.open_reader(schema=loaded, values=values, **reader_options) as reader:
        ranges = reader.splits(name, target_bytes=split_bytes)
        sample = [r.value for r in reader.scan(name, limit=SAMPLE_ROWS)]
        first = reader.scan(name, limit=1).to_list()
        last = reader.scan(name, limit=1, reverse=True).to_list()
    layout = RowLayout(list(versions), values, sample)
    tasks = [
        SplitRead(the_pin, ship, name, (r,), layout.schema, tuple(sorted(reader_options.items())))
        for r in ranges
    ]
    return ReadPlan(
        the_pin,
        owned,
        loaded.get(name),
        versions,
        tasks,
        layout.schema,
        first[0].key if first else None,
        last[0].key if last else None,
    )


def regroup(task: SplitRead, ranges: Sequence[KeyRange]) -> SplitRead:
    """`task` reading `ranges` instead (an engine that merges or re-cuts splits)."""
    return dataclasses.replace(task, ranges=tuple(ranges))


# --- in the worker ------------------------------------------------------------------------------


def _stand_in_values(arrow_schema: Any) -> list[Any]:
    """A one-value sample from which RowLayout infers exactly `arrow_schema`'s value columns
    (for plain msgpack maps: the columns the driver's first batch gave)."""
    pa = require_pyarrow()
    by_name = {f.name: f.type for f in arrow_schema}

    def example(arrow_type: Any) -> Any:
        if pa.types.is_list(arrow_type):
            return [example(arrow_type.value_type)]
        for check, value in (
            (pa.types.is_boolean, False),
            (pa.types.is_int64, 0),
            (pa.types.is_float64, 0.0),
            (pa.types.is_string, ""),
            (pa.types.is_binary, b""),
        ):
            if check(arrow_type):
                return value
        raise OpendataKvError(f"a value column of type {arrow_type} has no stand-in")

    value: dict[str, Any] = {}
    for name, column, is_json in value_columns(arrow_schema):
        value[name] = None if is_json else example(by_name[column])
    return [value]


def task_layout(task: SplitRead, schema: Schema, values: Values) -> RowLayout:
    """The RowLayout whose schema is the task's (checked: a mismatch is an error, never rows
    in another shape than the driver promised)."""
    versions = schema.versions(task.record)
    layout = RowLayout(versions, values, _stand_in_values(task.arrow_schema))
    if not layout.schema.equals(task.arrow_schema, check_metadata=True):
        raise OpendataKvError(
            f"{task.record}: the worker's Arrow schema {layout.schema} differs from the "
            f"driver's {task.arrow_schema} (the schema given differs between them?)",
            record=task.record,
        )
    return layout


def read_batches(task: SplitRead, columns: Sequence[str] | None = None) -> Iterator[Any]:
    """The task's rows as pyarrow.RecordBatches of its schema (only `columns`, in that order,
    when given), read a scan batch at a time from a reader at the pinned checkpoint."""
    schema, values = load_schema(task.schema)
    layout = task_layout(task, schema, values)
    names = None if columns is None else list(columns)
    if names is not None:
        missing = [n for n in names if n not in task.arrow_schema.names]
        if missing:
            raise InvalidArgumentError(
                f"{task.record}: no column {missing[0]!r}; the columns are "
                f"{task.arrow_schema.names}",
                record=task.record,
                field="columns",
                value=missing[0],
            )
    with _reader(task, schema, values) as reader:
        for key_range in task.ranges:
            scan = reader.scan(task.record, range=key_range)
            while chunk := scan.next_chunk():
                batch = layout.batch(chunk)
                yield batch if names is None else batch.select(names)


def _reader(task: SplitRead, schema: Schema, values: Values) -> Any:
    """A reader at the task's checkpoint: the one an earlier task of this process left open
    for the same store, checkpoint, schema and options (store/pinned_readers.py), else a new
    one. A pinned version never changes, so a kept reader reads what a new one would."""

    def open_reader() -> Any:
        return task.pin.open_reader(schema=schema, values=values, **dict(task.reader_options))

    pin = task.pin
    try:
        key = pickle.dumps(
            (pin.url, pin.checkpoint_id, pin.options, task.schema, task.reader_options)
        )
    except Exception:  # options that do not pickle here: a reader of its own, closed after
        return contextlib.closing(open_reader())
    return pinned_readers.borrow(key, pin.checkpoint_id, pin.lifetime, open_reader)


def projected_schema(arrow_schema: Any, columns: Sequence[str] | None) -> Any:
    """`arrow_schema` narrowed to `columns` (all when None); unknown names are refused."""
    if columns is None:
        return arrow_schema
    for name in columns:
        if name not in arrow_schema.names:
            raise InvalidArgumentError(
                f"no column {name!r}; the columns are {arrow_schema.names}",
                field="columns",
                value=name,
            )
    pa = require_pyarrow()
    return pa.schema([arrow_schema.field(n) for n in columns])
