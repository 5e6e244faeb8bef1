"""Values: the value codec of every (record type, key version) in a Schema.

A stored record is decoded with the codec of the RecordType its key prefix names (so records
written under v1 keep decoding after v2 exists) and, when that is not the newest version of
the record, passed through the version's upgrade function to today's model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from opendata_kv.errors import (
    SchemaError,
    UnknownVersionError,
    ValueDecodeError,
    ValueEncodeError,
    ValueLimitError,
    check_choice,
    show_bytes,
)
from opendata_kv.keys import Key, RecordType, Schema
from opendata_kv.values.codecs import MsgpackCodec, ValueCodec, with_limits
from opendata_kv.values.limits import (
    DEFAULT_LIMITS,
    MAX_STORED_VALUE_BYTES,
    DecodeLimits,
    check_stored_size,
    limited_unpackb,
    may_exceed,
)
from opendata_kv.values.specs import as_codec

UnknownPolicy = Literal["raise", "skip", "raw"]
UNKNOWN_POLICIES: tuple[UnknownPolicy, ...] = ("raise", "skip", "raw")

Upgrade = Callable[[Any], Any]
T = TypeVar("T")
KeyUpgrade = Callable[[Key], Sequence[Any]]


@dataclass(frozen=True)
class VersionCodec:
    """How one RecordType's values are stored, and how they reach the newest version."""

    record_type: RecordType
    codec: ValueCodec[Any]
    #: old value -> value in the newest version's model (None: already current, or same model)
    upgrade: Upgrade | None = None
    #: old key -> field values of the newest version's key (None: the same field values)
    upgrade_key: KeyUpgrade | None = None


def none_is_value(codec: object) -> bool:
    """Whether `codec` stores None as a value of its own: only when it says so with a true
    `none_is_value` attribute (None is otherwise what `get` returns for a missing record)."""
    return getattr(codec, "none_is_value", False) is True


def refuse_none(record_type: RecordType, codec: object, key: bytes | None = None) -> None:
    """ValueEncodeError for a None value, unless the record's codec says None is a value: a
    stored None would read back like a missing record and break upgrade functions."""
    if none_is_value(codec):
        return
    where = f" key {show_bytes(key)}" if key is not None else ""
    raise ValueEncodeError(
        f"{record_type.name} v{record_type.version}{where}: the value is None, which is "
        "never stored (get() would return it like a missing record); delete the record "
        "instead, or register a codec whose none_is_value is True",
        record=record_type.name,
        value=None,
    )


class Values:
    """Value codecs for every RecordType of a schema; msgpack unless registered otherwise."""

    __slots__ = ("_codecs", "default", "get_plans", "limits", "put_encoders", "schema")

    def __init__(
        self, schema: Schema, default: Any = None, *, limits: DecodeLimits | None = None
    ) -> None:
        """`limits`: the msgpack decode caps of this store's codecs (values/limits.py), except
        codecs created with their own; None: DEFAULT_LIMITS."""
        self.schema = schema
        self.limits = DEFAULT_LIMITS if limits is None else limits
        self.default: ValueCodec[Any] = self._limited(as_codec(default))
        self._codecs: dict[bytes, VersionCodec] = {}
        #: Batch.put's per-target encoders (store/views.py put_encoders), emptied by register()
        self.put_encoders: dict[object, Any] = {}
        #: get's per-target key encoders and decoder (store/views.py get_plan), emptied by
        #: register()
        self.get_plans: dict[object, Any] = {}

    def _limited(self, codec: ValueCodec[Any]) -> ValueCodec[Any]:
        return with_limits(codec, self.limits)

    @overload
    def register(
        self,
        record_type: RecordType,
        codec: type[T],
        *,
        upgrade: Callable[[T], object] | None = None,
        upgrade_key: KeyUpgrade | None = None,
    ) -> Values: ...

    @overload
    def register(
        self,
        record_type: RecordType,
        codec: ValueCodec[T],
        *,
        upgrade: Callable[[T], object] | None = None,
        upgrade_key: KeyUpgrade | None = None,
    ) -> Values: ...

    @overload
    def register(
        self,
        record_type: RecordType,
        codec: None = None,
        *,
        upgrade: Upgrade | None = None,
        upgrade_key: KeyUpgrade | None = None,
    ) -> Values: ...

    def register(
        self,
        record_type: RecordType,
        codec: Any = None,
        *,
        upgrade: Upgrade | None = None,
        upgrade_key: KeyUpgrade | None = None,
    ) -> Values:
        """Set the codec of one RecordType version (a codec; a dataclass, TypedDict,
        msgspec.Struct or pydantic model type; bytes or dict). mypy checks that `upgrade`
        takes what the codec decodes (`register(v1, PostV1, upgrade=to_v2)` needs
        `to_v2(old: PostV1)`)."""
        if record_type not in self.schema:
            raise SchemaError(f"{record_type.name!r} v{record_type.version} is not in the schema")
        self._codecs[record_type.head] = VersionCodec(
            record_type,
            self._limited(as_codec(codec)) if codec is not None else self.default,
            upgrade,
            upgrade_key,
        )
        self.put_encoders.clear()  # they hold the codec the record type had
        self.get_plans.clear()
        return self

    def plan(self, record_type: RecordType) -> VersionCodec:
        """The registered VersionCodec, or the default codec with no upgrade."""
        found = self._codecs.get(record_type.head)
        if found is None:
            found = VersionCodec(record_type, self.default)
            self._codecs[record_type.head] = found
        return found

    def current(self, record_type: RecordType) -> RecordType:
        """The newest registered version of the same logical record."""
        return self.schema.get(record_type.name)

    def is_current(self, record_type: RecordType) -> bool:
        return self.current(record_type) is record_type

    def encode(self, record_type: RecordType, value: Any, key: bytes | None = None) -> bytes:
        """Value bytes for a record of `record_type`; errors name the record (and key)."""
        codec = self.plan(record_type).codec
        if value is None:
            refuse_none(record_type, codec, key)
        try:
            data = check_stored_size(codec.encode(value))
        except ValueEncodeError as exc:
            where = f" key {show_bytes(key)}" if key is not None else ""
            raise ValueEncodeError(
                f"{record_type.name} v{record_type.version}{where}: {exc}",
                record=record_type.name,
                field=exc.field,
                value=exc.value,
            ) from None
        self.check_caps(record_type, data, key)
        return data

    def encoder(self, record_type: RecordType) -> Callable[[Any, bytes], bytes]:
        """`encode(record_type, value, key)` bound once per record type, for per-record paths:
        a codec's `fast_encode` (when it has one) and the caps' size gate inline; anything
        unusual (None, an error, a value a cap might refuse) goes through encode itself."""
        codec = self.plan(record_type).codec
        fast: Callable[[Any], bytes] | None = getattr(codec, "fast_encode", None)
        if fast is None or none_is_value(codec):
            return functools.partial(self.encode, record_type)
        limits = getattr(codec, "limits", None)
        capped = isinstance(limits, DecodeLimits)
        bound = MAX_STORED_VALUE_BYTES
        if isinstance(limits, DecodeLimits):  # (capped: mypy narrows only on isinstance)
            bound = min(bound, limits.uncapped_bytes, limits.max_depth)
        slow = self.encode

        def encode(value: Any, key: bytes) -> bytes:
            if value is None:
                return slow(record_type, value, key)  # raises: None is no value here
            try:
                data = fast(value)
            except Exception:
                return slow(record_type, value, key)  # raises the error naming the record
            if len(data) > bound:  # long enough that the size cap or a decode cap may apply
                if len(data) > MAX_STORED_VALUE_BYTES:
                    return slow(record_type, value, key)  # raises, naming the record
                if capped:
                    self.check_caps(record_type, data, key)
            return data

        return encode

    def packing(self, record_type: RecordType) -> tuple[int, int] | None:
        """(max_len, max_depth) under which msgpack bytes of a value of `record_type` are stored
        as encoded, with no further check (encode would pass them: no cap can refuse bytes no
        longer than uncapped_bytes that nest fewer than max_depth containers); None when the
        codec is not the plain msgpack one (its own encode decides)."""
        codec = self.plan(record_type).codec
        if codec.__class__ is not MsgpackCodec:
            return None
        limits = getattr(codec, "limits", None)
        if not isinstance(limits, DecodeLimits):
            return None
        return min(limits.uncapped_bytes, MAX_STORED_VALUE_BYTES), limits.max_depth

    def decoder(self, record_type: RecordType) -> Callable[[bytes, bytes], Any]:
        """`decode(record_type, key, data)` (upgrade on) bound once per record type as
        `decode(data, key)`, for per-record reads: a codec's `fast_decode` when it has one and
        no upgrade applies; a failure is redone through decode itself, for the error naming
        the key."""
        plan = self.plan(record_type)
        fast: Callable[[bytes], Any] | None = getattr(plan.codec, "fast_decode", None)
        slow = self.decode
        if fast is None or plan.upgrade is not None:
            return lambda data, key: slow(record_type, key, data)

        def decode(data: bytes, key: bytes) -> Any:
            try:
                return fast(data)
            except Exception:
                return slow(record_type, key, data)  # raises the error naming the key

        return decode

    def check_caps(self, record_type: RecordType, data: bytes, key: bytes | None) -> None:
        """ValueLimitError (the error get would raise, naming the record and key) when the
        codec's decode caps would refuse `data`: a value get cannot read is never stored.
        Only values that could reach a cap are decoded (limits.may_exceed); bytes that are no
        msgpack value at all are left to put_raw's caller (get reports them)."""
        limits = getattr(self.plan(record_type).codec, "limits", None)
        if not isinstance(limits, DecodeLimits) or not may_exceed(data, limits):
            return
        try:
            limited_unpackb(data, limits)
        except ValueLimitError as exc:
            where = f" key {show_bytes(key)}" if key is not None else ""
            refused = ValueLimitError(
                f"{record_type.name} v{record_type.version}{where}: put refused, as get would "
                f"refuse the value: {exc}; nothing was written",
                cap=exc.cap,
                limit=exc.limit,
            )
            refused.record = record_type.name
            refused.value = key
            raise refused from None
        except Exception:  # not a msgpack value: put_raw stores it, get reports it
            return

    def decode(
        self, record_type: RecordType, key: bytes, data: bytes, *, upgrade: bool = True
    ) -> Any:
        """The value stored under `key`, upgraded to the newest model unless upgrade=False.

        Raises ValueDecodeError naming the key when the bytes do not decode (or upgrade).
        """
        plan = self.plan(record_type)
        try:
            value = plan.codec.decode(data)
        except ValueDecodeError as exc:
            message = (
                f"{record_type.name} v{record_type.version} key {show_bytes(key)}: value "
                f"does not decode with {plan.codec.name}: {exc}"
            )
            if isinstance(exc, ValueLimitError):  # keep the class and the cap's facts
                raise ValueLimitError(message, cap=exc.cap, limit=exc.limit) from None
            raise ValueDecodeError(
                message, record=record_type.name, field=exc.field, value=data
            ) from None
        if upgrade and plan.upgrade is not None:
            try:
                value = plan.upgrade(value)
            except Exception as exc:
                raise ValueDecodeError(
                    f"{record_type.name} v{record_type.version} key {show_bytes(key)}: "
                    f"upgrade to the current version failed: {type(exc).__name__}: {exc}"
                ) from exc
        return value

    def unknown(self, key: bytes) -> UnknownVersionError:
        """The error for a stored key whose prefix no RecordType in the schema owns."""
        try:
            self.schema.record_type_of(key)
        except Exception as exc:
            return UnknownVersionError(f"no value codec for {exc}")
        return UnknownVersionError(f"no value codec for key {show_bytes(key)}")

    def upgraded_key(self, key: Key) -> bytes:
        """The newest version's key bytes for an old key (for migrations)."""
        old = key.record_type
        target = self.current(old)
        plan = self.plan(old)
        values = plan.upgrade_key(key) if plan.upgrade_key is not None else tuple(key)
        return target.encode(*values)


def check_policy(policy: object) -> UnknownPolicy:
    """Validate an unknown-version policy name."""
    return check_choice(policy, UNKNOWN_POLICIES, "on_unknown")
