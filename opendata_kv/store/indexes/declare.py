"""Index: the declaration of one secondary index (RFC 0010): which records it covers, which
fields it keeps, and what kind it is (value, unique, count, sum).

    likes_by_subject = Index("likes_by_subject", "like", [("subject", fields.string)])
    handle = Index("handle", "profile", [("handle", fields.string)], kind="unique")
    likes = Index("like_count", "like", [("subject", fields.string)], kind="count")

A field is read from the record's key fields first, then from its value (a mapping's key or an
object's attribute, on the value as the record's value codec decodes it). A record without the
field (or with None there) has no entry. `using(key, value)` replaces that lookup and may yield
several tuples of field values (one entry each, e.g. one per tag).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, overload

from opendata_kv.errors import KeyEncodeError, SchemaError
from opendata_kv.keys import Key, RecordType
from opendata_kv.keys.fields import Field
from opendata_kv.keys.record import check_field_name
from opendata_kv.store.indexes.field_values import field_of
from opendata_kv.store.indexes.kind import IndexKind
from opendata_kv.store.indexes.kinds import kind_named
from opendata_kv.store.indexes.library import callable_name, route_of
from opendata_kv.store.scan import K, Record, V

if TYPE_CHECKING:  # defaults (PEP 696): a bare `Index` is Index[Any, Any]
    from typing_extensions import TypeVar

    from opendata_kv.store.indexes.read import IndexEntry

    #: what index_scan yields and lookup returns: Record[K, V] for a value or unique index
    #: over a RecordType[K, V], IndexEntry for a count or sum index, Any for record names
    IR = TypeVar("IR", default=Any)
    #: the index's kind as a Literal ("value", "unique", "count", "sum"), so that lookup on a
    #: non-unique index and index_count/index_sum on a non-aggregate are type errors; Any
    #: when the kind is not a literal
    IK = TypeVar("IK", default=Any, covariant=True)
else:
    from typing import TypeVar

    IR = TypeVar("IR")
    IK = TypeVar("IK", covariant=True)

#: the built-in kinds, for the typed overloads; every kind (kinds.KINDS) is accepted as a str
Kind = Literal["value", "unique", "count", "sum"]
Using = Callable[[Key, Any], Iterable[Sequence[Any]]]
Amount = Callable[[Key, Any], "int | float | None"]

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}\Z")


def check_index_name(name: object) -> str:
    """`name` when it is a valid index name (lowercase letters, digits, `_.-`, 1-64)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(
            f"an index name is 1-64 characters of a-z, 0-9, '_', '.', '-' starting with a "
            f"letter or digit, got {name!r}",
            field="name",
            value=name,
        )
    return name


class Index(Generic[IR, IK]):
    """One secondary index (immutable once built): see the module docstring and RFC 0010.

    `records`: record names, or a RecordType (its name): then the type checker knows what
    index_scan and lookup give (`Index[Record[PostKey, Post], Literal["unique"]]`). A literal
    `kind` is the second type argument: lookup takes only a unique index, index_count and
    index_sum only a count or sum one."""

    __slots__ = (
        "amount",
        "covering",
        "field_names",
        "fields",
        "index_kind",
        "kind",
        "name",
        "records",
        "using",
        "version",
    )

    @overload
    def __init__(
        self: Index[Record[K, V], Literal["value"]],
        name: str,
        records: RecordType[K, V, Any],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["value"] = "value",
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[Record[K, V], Literal["unique"]],
        name: str,
        records: RecordType[K, V, Any],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["unique"],
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[Any, Literal["value"]],
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["value"] = "value",
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[Any, Literal["unique"]],
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["unique"],
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[IndexEntry, Literal["count"]],
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["count"],
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[IndexEntry, Literal["sum"]],
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: Literal["sum"],
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    @overload
    def __init__(
        self: Index[Any, Any],
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: str = "value",
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None: ...

    def __init__(
        self,
        name: str,
        records: RecordType | str | Sequence[str | RecordType],
        fields: Mapping[str, Field] | Iterable[tuple[str, Field]],
        *,
        kind: str = "value",
        using: Using | None = None,
        amount: str | Amount | None = None,
        covering: bool = False,
        version: int = 1,
    ) -> None:
        self.name = check_index_name(name)
        listed = (records,) if isinstance(records, (str, RecordType)) else tuple(records)
        names = tuple(n.name if isinstance(n, RecordType) else n for n in listed)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise SchemaError(
                f"index {name!r}: records must be one or more record names, got {records!r}",
                field="records",
                value=records,
            )
        self.records: tuple[str, ...] = names
        pairs = tuple(fields.items() if isinstance(fields, Mapping) else fields)
        seen: set[str] = set()
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], Field)):
                raise SchemaError(
                    f"index {name!r}: fields must be (name, codec) pairs, got {pair!r}",
                    field="fields",
                    value=pair,
                )
            # named as record fields are: the tools print these names
            if check_field_name(f"index {name!r}", pair[0]) in seen:
                raise SchemaError(
                    f"index {name!r}: duplicate field name {pair[0]!r}", field=pair[0]
                )
            seen.add(pair[0])
            if pair[1].trailing:
                raise SchemaError(
                    f"index {name!r}: field {pair[0]!r} uses {pair[1]!r}, which may only end a "
                    "key; an index entry continues after its fields (use a terminated codec)",
                    field=pair[0],
                )
        self.fields: tuple[tuple[str, Field], ...] = pairs
        self.field_names = tuple(n for n, _ in pairs)
        #: what the kind decides (entry layout, TTL policy, maintainer, ...): kinds.py
        self.index_kind: IndexKind = kind_named(kind, name)
        self.kind: str = kind
        self.amount = amount
        if covering not in (False, True):
            raise SchemaError(
                f"index {name!r}: covering= is True or False, got {covering!r}",
                field="covering",
                value=covering,
            )
        #: entries hold a copy of the record's stored value: index_scan reads no record
        self.covering = bool(covering)
        self.using = using
        self.index_kind.check_declaration(self)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise SchemaError(f"index {name!r}: version must be an int >= 1, got {version!r}")
        self.version = version

    if not TYPE_CHECKING:

        def __class_getitem__(cls, params):
            """`Index[R]` at run time too, as before the kind parameter: the kind defaults to
            Any (typing's defaults, PEP 696, only come with Python 3.13)."""
            params = params if isinstance(params, tuple) else (params,)
            return super().__class_getitem__((*params, Any) if len(params) == 1 else params)

    def __setattr__(self, attr: str, value: Any) -> None:
        if hasattr(self, attr):
            raise AttributeError(f"Index {self.name!r} is immutable")
        object.__setattr__(self, attr, value)

    def __repr__(self) -> str:
        records, names = list(self.records), list(self.field_names)
        covering = ", covering=True" if self.covering else ""
        return f"Index({self.name!r}, {records!r}, {names!r}, kind={self.kind!r}{covering})"

    @property
    def aggregate(self) -> bool:
        """True for count and sum indexes (one entry per group, holding count and sum)."""
        return self.index_kind.aggregate

    def reads_key(self, record_type: RecordType) -> bool:
        """True when this index's entries or amount of `record_type` read its key (a key
        field, or a function of key and value); a write may skip decoding the key otherwise."""
        if self.using is not None or callable(self.amount):
            return True
        names = set(record_type.field_names)
        return any(name in names for name in self.field_names) or self.amount in names

    def entries(self, key: Key, value: Any) -> frozenset[tuple[Any, ...]]:
        """The tuples of field values this record is indexed under (empty: no entry)."""
        if self.using is not None:
            return self.checked_entries(key, self.using(key, value))
        values = tuple(field_of(key, value, name) for name in self.field_names)
        return frozenset() if None in values else frozenset((self._hashable(key, values),))

    @property
    def route(self) -> tuple[str, Any] | None:
        """(key field, value) when `using` yields nothing for records whose key's field
        holds another value (library.index_route), else None."""
        return route_of(self.using)

    def checked_entries(self, key: Key, items: Iterable[Any]) -> frozenset[tuple[Any, ...]]:
        """The entry tuples of what `using` yielded for `key`, checked: one value per field,
        hashable; a tuple holding None is no entry."""
        out = set()
        for item in items:
            values = tuple(item)
            if len(values) != len(self.fields):
                raise SchemaError(
                    f"index {self.name!r}: using() yielded {values!r}, but the index has "
                    f"{len(self.fields)} fields {list(self.field_names)}",
                    field="using",
                    value=values,
                )
            if None not in values:
                out.add(self._hashable(key, values))
        return frozenset(out)

    def _hashable(self, key: Key, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """`values`, or KeyEncodeError when one is a container no index field holds."""
        try:
            hash(values)
        except TypeError:
            raise KeyEncodeError(
                f"index {self.name!r}: the record {key!r} gives its fields "
                f"{list(self.field_names)} the values {values!r}, which no index field can "
                "hold (a list, dict or set); nothing was written",
                field=self.name,
                value=values,
            ) from None
        return values

    def amount_of(self, key: Key, value: Any) -> int | float:
        """What this record adds to its groups' sum (0 for count indexes or no amount)."""
        amount = self.amount
        if amount is None:
            return 0
        found = field_of(key, value, amount) if isinstance(amount, str) else amount(key, value)
        if found is None:
            return 0
        if isinstance(found, bool) or not isinstance(found, (int, float)):
            raise SchemaError(
                f"index {self.name!r}: the amount of {key!r} is {found!r}, not a number",
                field="amount",
                value=found,
            )
        return found

    def describe(self) -> dict[str, Any]:
        """The definition as stored in the index's metadata: what a reader that did not declare
        it needs to name and decode its entries, and what a declaration must match."""
        amount = self.amount
        described = {
            "name": self.name,
            "kind": self.kind,
            "records": list(self.records),
            "fields": [[n, f.public_name or f.kind] for n, f in self.fields],
            "using": None if self.using is None else callable_name(self.using),
            "amount": (
                amount if amount is None or isinstance(amount, str) else callable_name(amount)
            ),
            "version": self.version,
        }
        if self.covering:  # absent otherwise, so definitions stored before it still match
            described["covering"] = True
        return described
