"""Stored index definitions read back without the declaration (what the index commands, dump
and verify rely on): every key field codec an index may use is found again by the name its
definition stores; a definition naming no function rebuilds an Index that describes itself
the same; one naming a function is refused, naming the index and the function."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from indexkit import ALL, by_handle, by_tag, covered, likes, per_tag, tags

from opendata_kv import Index, fields
from opendata_kv.errors import IndexStateError, SchemaError, StoreDataError
from opendata_kv.keys.codec_names import codec_name, field_named
from opendata_kv.keys.codecs import _PUBLIC
from opendata_kv.keys.fields import Field
from opendata_kv.store.indexes.stored import index_from_definition, resolve

PLAIN = st.sampled_from(sorted(_PUBLIC.values(), key=lambda f: f.kind))
RKEYS = st.sampled_from(["any", "tid", "nsid", "literal:self"]).map(fields.rkey)
LEAVES = st.one_of(PLAIN, RKEYS, st.integers(1, 64).map(fields.fixed))

CODECS = st.one_of(LEAVES, LEAVES.filter(lambda f: not f.trailing).map(fields.desc))


@given(CODECS)
def test_every_codec_is_found_by_its_stored_name(codec: Field) -> None:
    found = field_named(codec_name(codec))
    assert found == codec and found.kind == codec.kind
    assert codec_name(found) == codec_name(codec)


@given(
    st.one_of(
        st.text(max_size=30),
        st.text(max_size=12).map(lambda t: f"desc({t})"),
        st.text(max_size=12).map(lambda t: f"fixed({t})"),
        st.text(max_size=12).map(lambda t: f"rkey({t})"),
    )
)
@example("rkey(any)")
@example("desc(desc(u8))")
@example("fixed(007)")
@example("fixed(²)")  # a digit to str.isdigit, not to int()
def test_any_other_name_is_a_schema_error_or_a_codec_named_so(name: str) -> None:
    try:
        found = field_named(name)
    except SchemaError as exc:
        assert repr(name) in str(exc) and exc.value == name
    else:
        assert field_named(codec_name(found)) == found  # a name for it that round-trips


def test_typed_codecs_are_not_found_by_name() -> None:
    typed = fields.typed("kind", {1: fields.u8, 2: fields.string})
    with pytest.raises(SchemaError, match="no field codec is named"):
        field_named(codec_name(typed))


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), CODECS.filter(lambda f: not f.trailing)),
        min_size=1,
        max_size=3,
        unique_by=lambda p: p[0],
    ),
    st.sampled_from(["value", "unique", "count"]),
    st.integers(1, 9),
)
def test_a_definition_without_functions_rebuilds_its_index(
    pairs: list[tuple[str, Field]], kind: str, version: int
) -> None:
    index = Index("ix", ["r1", "r2"], pairs, kind=kind, version=version)  # type: ignore[arg-type]
    assert index_from_definition(index.describe()).describe() == index.describe()


def test_the_test_indexes_rebuild_or_name_their_function() -> None:
    for index in (by_tag, by_handle, per_tag, likes, covered):
        assert index_from_definition(index.describe()).describe() == index.describe()
    with pytest.raises(IndexStateError, match=r"'tags'.*using=indexkit.each_tag"):
        index_from_definition(tags.describe())
    counted = Index("n", "post", [("a", fields.string)], kind="sum", amount=lambda k, v: 1)
    with pytest.raises(IndexStateError, match="amount=test_index_definitions"):
        index_from_definition(counted.describe())


def test_a_damaged_definition_is_a_store_data_error_naming_the_index() -> None:
    broken = dict(by_tag.describe(), fields=[["tag", "no-such-codec"]])
    with pytest.raises(StoreDataError, match="'by_tag'"):
        index_from_definition(broken)
    with pytest.raises(StoreDataError, match="'by_tag'"):
        index_from_definition(dict(by_tag.describe(), kind="sideways"))


def test_resolve_prefers_the_declaration_and_says_why_one_is_unusable() -> None:
    stored = {i.name: {"definition": i.describe()} for i in ALL}
    plain = resolve(stored, [])
    assert sorted(plain.usable) == ["by_handle", "by_tag", "likes", "per_tag"]
    assert "using=indexkit.each_tag" in plain.unusable["tags"]
    declared = resolve(stored, ALL)
    assert declared.usable["tags"] is tags and not declared.unusable
    other = Index("by_tag", "post", [("tag", fields.string)])
    assert "declared as" in resolve(stored, [other]).unusable["by_tag"]
