"""URL keys: every scrape vector row and column, Go URL parsing details, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opendata_kv.errors import UrlKeyError
from opendata_kv.ids import urlkey

COLUMNS = [
    "url",
    "key_dec",
    "key_hex",
    "hostname_used",
    "checksum7",
    "neturl_string",
    "neturl_hostname",
    "neturl_key_dec",
    "neturl_key_hex",
    "cleaned_string",
    "cleaned_key_dec",
    "cleaned_key_hex",
]


def load_rows(vectors: Path) -> list[dict[str, str]]:
    path = vectors / "scrape" / "url_keys.tsv"
    assert path.is_file(), f"missing vector file {path}"
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        assert reader.fieldnames == COLUMNS
        rows = list(reader)
    assert len(rows) == 46
    return rows


def hex_key(key: int) -> str:
    return f"0x{key:016x}"


# --- vectors -----------------------------------------------------------------------------------


def test_neturl_key_of_neturl_string(vectors: Path) -> None:
    """The acceptance test: url_key(neturl_string) == neturl_key_dec for every row."""
    for row in load_rows(vectors):
        key = urlkey.url_key(row["neturl_string"])
        assert key == int(row["neturl_key_dec"]), row["url"]
        assert hex_key(key) == row["neturl_key_hex"]


def test_neturl_columns_from_raw_url(vectors: Path) -> None:
    for row in load_rows(vectors):
        url = row["url"]
        assert urlkey.normalize(url) == row["neturl_string"], url
        assert urlkey.hostname(url) == row["neturl_hostname"], url
        assert urlkey.url_key(url) == int(row["neturl_key_dec"]), url


def test_cleaned_columns(vectors: Path) -> None:
    for row in load_rows(vectors):
        url = row["url"]
        assert urlkey.clean_url(url) == row["cleaned_string"], url
        key = urlkey.url_key(url, clean=True)
        assert key == int(row["cleaned_key_dec"]), url
        assert hex_key(key) == row["cleaned_key_hex"]
        assert urlkey.url_key(row["cleaned_string"]) == key


def test_url_string_columns(vectors: Path) -> None:
    """scrape's other variant: the raw string hashed verbatim with a regexp hostname."""
    for row in load_rows(vectors):
        key = urlkey.url_string_key(row["url"])
        assert key == int(row["key_dec"]), row["url"]
        assert hex_key(key) == row["key_hex"]
        assert key >> 56 == int(row["checksum7"])
        assert key == urlkey.key_for_string(row["url"], row["hostname_used"])


def test_fold_is_xor_not_mask(vectors: Path) -> None:
    row = load_rows(vectors)[0]
    data = row["neturl_string"].encode()
    h = urlkey.fnv1a64(data)
    masked = (h & urlkey.MASK_56) | (urlkey.url_key(row["neturl_string"]) & urlkey.CHECKSUM_MASK)
    assert masked != int(row["neturl_key_dec"])
    assert urlkey.key_for_bytes(data, row["neturl_hostname"].encode()) == int(row["neturl_key_dec"])


# --- hashing -----------------------------------------------------------------------------------


def test_fnv1a64_reference_values() -> None:
    assert urlkey.fnv1a64(b"") == 0xCBF29CE484222325
    assert urlkey.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert urlkey.fnv1a64(b"foobar") == 0x85944171F73967E8


@given(st.text(max_size=80), st.text(max_size=30))
def test_top_bit_always_zero(s: str, host: str) -> None:
    try:
        key = urlkey.key_for_string(s, host)
    except UrlKeyError:
        return  # lone surrogates cannot be UTF-8 encoded
    assert 0 <= key < 1 << 63
    assert key >> 56 == sum(host.encode()) % 128


# --- Go parsing details ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.com/a b?x=1 2#frag ment", "http://Example.com/a%20b?x=1 2#frag%20ment"),
        ("http:/just/path", "http:/just/path"),
        ("http:///triple", "http:///triple"),
        ("//example.com/x", "//example.com/x"),
        ("*", "*"),
        ("this:that", "this:that"),
        ("./this:that", "./this:that"),
        ("https://u%40ser:p%3Ass@host/", "https://u%40ser:p%3Ass@host/"),
        ("https://user@host/", "https://user@host/"),
        ("https://host/a%2fb", "https://host/a%2fb"),
        ("https://host/?a=%zz", "https://host/?a=%zz"),
        ("https://host/#a%2Fb", "https://host/#a%2Fb"),
        ("https://host/#a%20b", "https://host/#a%20b"),
        ("https://[fe80::1%25en0]:8080/", "https://[fe80::1%25en0]:8080/"),
        ("mailto:caf\u00e9@example.com", "mailto:caf\u00e9@example.com"),
    ],
)
def test_normalize_follows_go(url: str, expected: str) -> None:
    assert urlkey.normalize(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://Example.COM:8443/", "Example.COM"),
        ("http://[2001:db8::1]/", "2001:db8::1"),
        ("http://host:notaport", None),
        ("https://user:pw@h/", "h"),
        ("mailto:x@y", ""),
        ("https://b%C3%BCcher.de/", "b\u00fccher.de"),
    ],
)
def test_hostname(url: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(UrlKeyError, match="invalid port"):
            urlkey.hostname(url)
    else:
        assert urlkey.hostname(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://exa mple.com/", 'invalid character " " in host name'),
        ("http://[::1/", "missing ']' in host"),
        ("http://host:80x/", 'invalid port ":80x" after host'),
        ("http://%41.com/", 'invalid URL escape "%41"'),
        ("https://example.com/%zz", 'invalid URL escape "%zz"'),
        ("https://example.com/%4", 'invalid URL escape "%4"'),
        (":nothing", "missing protocol scheme"),
        ("rel:ative/x", None),
        ("seg:ment", None),
        ("1seg:ment/x", "first path segment in URL cannot contain colon"),
        ("http://exa\nmple.com/", "invalid control character"),
        ("http://us\u00e9r@host/", "invalid userinfo"),
        ("https://host/#%zz", 'invalid URL escape "%zz"'),
    ],
)
def test_bad_urls(url: str, reason: str | None) -> None:
    if reason is None:
        # Looks odd but parses in Go: a scheme followed by opaque data.
        assert urlkey.normalize(url) == url
        return
    with pytest.raises(UrlKeyError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        urlkey.url_key(url)
    with pytest.raises(UrlKeyError):
        urlkey.clean_url(url)


def test_non_str_and_unencodable() -> None:
    with pytest.raises(UrlKeyError, match="must be a str"):
        urlkey.url_key(b"https://example.com/")  # type: ignore[arg-type]
    with pytest.raises(UrlKeyError, match="UTF-8"):
        urlkey.url_key("https://example.com/\ud800")


# --- cleaning ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://h/?b=2&a=1&b=1", "https://h/?a=1&b=2&b=1"),
        ("https://h/?%75tm_source=x&k=v", "https://h/?k=v"),
        ("https://h/?utm_brand=x&utm_content=y&utm_term=z", "https://h/"),
        ("https://h/?Utm_Source=x", "https://h/?Utm_Source=x"),
        ("https://h/?a=%zz&b=ok", "https://h/?b=ok"),
        ("https://h/?a=1;b=2&c=3", "https://h/?c=3"),
        ("https://h/?&&a&", "https://h/?a="),
        ("https://h/?q=a+b%2Bc%20d&z=~*'", "https://h/?q=a+b%2Bc+d&z=~%2A%27"),
        ("https://h/?%C3%A9=%E2%82%AC&e=1", "https://h/?e=1&%C3%A9=%E2%82%AC"),
        ("https://h/p#frag", "https://h/p"),
    ],
)
def test_clean_url(url: str, expected: str) -> None:
    assert urlkey.clean_url(url) == expected
    assert urlkey.url_key(url, clean=True) == urlkey.url_key(expected)


hosts = st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9.-]{0,20}(:[0-9]{1,5})?", fullmatch=True)
paths = st.lists(st.text(min_size=0, max_size=8), max_size=4).map(lambda p: "/" + "/".join(p))
queries = st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6)), max_size=4)


@given(st.sampled_from(["http", "https", "HTTPS"]), hosts, paths, queries)
def test_normalize_and_clean_are_stable(
    scheme: str, host: str, path: str, query: list[tuple[str, str]]
) -> None:
    path = path.replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    url = f"{scheme}://{host}{path}"
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query).replace("#", "%23")
    try:
        once = urlkey.normalize(url)
    except UrlKeyError:
        return  # control characters and bad escapes are Go parse errors
    assert urlkey.normalize(once) == once
    assert urlkey.url_key(once) == urlkey.url_key(url)
    cleaned = urlkey.clean_url(url)
    assert urlkey.clean_url(cleaned) == cleaned
    assert "utm_source=" not in cleaned
