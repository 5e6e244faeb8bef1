"""URL keys as efixler/scrape computes them: a 63-bit integer for a web page URL.

key = (sum of the hostname's bytes mod 128) << 56 | fold56(fnv1a64(url string)), where
fold56(h) = (h >> 56) ^ (h & 0x00FFFFFFFFFFFFFF). Bit 63 is always 0. The URL string and the
hostname are what Go's net/url produces (`URL.String()`, `URL.Hostname()`), reproduced by
`_gourl`. See rfcs/0005-url-keys.md.
"""

from __future__ import annotations

import re

from opendata_kv.errors import UrlKeyError, show_text
from opendata_kv.ids import _gourl

FNV64_OFFSET = 0xCBF29CE484222325
FNV64_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1
MASK_56 = (1 << 56) - 1
CHECKSUM_MASK = 127 << 56

#: Query parameters clean_url removes (compared after unescaping, case-sensitive).
TRACKING_PARAMS = (
    "utm_source",
    "utm_medium",
    "utm_campaign",
    "utm_term",
    "utm_content",
    "utm_brand",
)

# scrape's URLString.Hostname(): the text after http(s):// up to the first '/', verbatim.
_STRING_HOST = re.compile(rb"^https?://([^/]+)")


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of `data`."""
    h = FNV64_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV64_PRIME) & _MASK64
    return h


def key_for_bytes(url: bytes, hostname: bytes) -> int:
    """scrape's Key over the exact bytes of a URL string and of its hostname."""
    checksum = (sum(hostname) << 56) & CHECKSUM_MASK
    h = fnv1a64(url)
    return checksum | ((h >> 56) ^ (h & MASK_56))


def key_for_string(s: str, hostname: str) -> int:
    """scrape's Key for a URL string already in final form and the hostname to checksum."""
    return key_for_bytes(_utf8(s, "URL"), _utf8(hostname, "hostname"))


def url_key(url: str, *, clean: bool = False) -> int:
    """The key scrape stores `url` under: Key(url.Parse(url)), or Key(CleanURL(...)) if clean.

    The URL is first parsed and re-serialised the way Go does, so equivalent spellings
    (`HTTPS://x/a b`, `https://x/a%20b`) share one key.
    """
    parsed = _parse(url)
    if clean:
        _clean(parsed)
    return key_for_bytes(_go_bytes(parsed.string()), _go_bytes(parsed.hostname()))


def url_string_key(url: str) -> int:
    """scrape's Key(URLString(url)): hashes `url` verbatim, hostname from `^https?://([^/]+)`.

    This variant keeps case, userinfo and :port in the checksummed host; `url_key` is the one
    used for pages fetched through net/url.
    """
    raw = _utf8(url, "URL")
    match = _STRING_HOST.match(raw)
    return key_for_bytes(raw, match.group(1) if match else b"")


def normalize(url: str) -> str:
    """Go's url.Parse(url).String(): the exact string url_key hashes."""
    return _to_str(_parse(url).string())


def hostname(url: str) -> str:
    """Go's url.Parse(url).Hostname(): host without port or IPv6 brackets, case kept."""
    return _to_str(_parse(url).hostname())


def clean_url(url: str) -> str:
    """scrape's CleanURL(url.Parse(url)).String().

    Drops the utm_* tracking parameters, re-encodes the rest of the query sorted by key (pairs
    Go cannot parse, such as ones containing ';' or a bad %-escape, are dropped) and drops
    the fragment.
    """
    parsed = _parse(url)
    _clean(parsed)
    return _to_str(parsed.string())


def _clean(parsed: _gourl.GoURL) -> None:
    values = _gourl.parse_query(parsed.raw_query)
    for name in TRACKING_PARAMS:
        values.pop(name, None)
    parsed.raw_query = _gourl.encode_values(values)
    parsed.fragment = ""
    parsed.raw_fragment = ""


def _parse(url: str) -> _gourl.GoURL:
    try:
        return _gourl.parse(_go_bytes_from(url))
    except _gourl.GoUrlError as exc:
        raise UrlKeyError(f"URL {_shown(url)} does not parse: {exc}") from None


def _go_bytes_from(url: str) -> str:
    """The UTF-8 bytes of `url` as a byte string (one character per byte)."""
    return _utf8(url, "URL").decode("latin-1")


def _go_bytes(byte_string: str) -> bytes:
    return byte_string.encode("latin-1")


def _to_str(byte_string: str) -> str:
    # Output is ASCII escapes plus slices of the (valid UTF-8) input cut at ASCII delimiters,
    # so it always decodes.
    return byte_string.encode("latin-1").decode("utf-8")


def _utf8(s: str, what: str) -> bytes:
    if not isinstance(s, str):
        raise UrlKeyError(f"{what} must be a str, got {type(s).__name__}")
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = s[exc.start : exc.end]
        raise UrlKeyError(
            f"{what} {_shown(s)} is not encodable as UTF-8: {bad!r} at position {exc.start}"
        ) from None


def _shown(s: str) -> str:
    return show_text(s, 160)  # URLs are long: keep more of them than of other input
