"""The part of Go's net/url (as of Go 1.19) that URL keys depend on: Parse, String, Hostname,
Query and Values.Encode.

URL keys hash the bytes Go's `URL.String()` produces, so this module reproduces Go's rules
byte for byte rather than following RFC 3986 or Python's urllib. Go strings are bytes: the
input is UTF-8 encoded and every function here works on a "byte string", a str holding one
character per byte (latin-1). See rfcs/0005-url-keys.md for the rules and known differences.
"""

from __future__ import annotations

from dataclasses import dataclass

# Escaping modes, as in Go.
PATH = 1
PATH_SEGMENT = 2
HOST = 3
ZONE = 4
USER_PASSWORD = 5
QUERY_COMPONENT = 6
FRAGMENT = 7

_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_HOST_EXTRA = frozenset(b"!$&'()*+,;=:[]<>\"")
_UNRESERVED_MARK = frozenset(b"-_.~")
_RESERVED = frozenset(b"$&+,/:;=?@")
_HEX = frozenset("0123456789abcdefABCDEF")
_VALID_ENCODED_OK = frozenset("!$&'()*+,;=:@[]%")
_USERINFO_OK = frozenset("-._:~!$&'()*+,;=%@")
_DIGITS = frozenset("0123456789")


class GoUrlError(ValueError):
    """Go's url.Parse would return an error; the message follows Go's wording."""


def should_escape(c: int, mode: int) -> bool:
    """Whether byte `c` is percent-escaped in `mode` (Go's shouldEscape)."""
    if c in _ALNUM:
        return False
    if mode in (HOST, ZONE) and c in _HOST_EXTRA:
        return False
    if c in _UNRESERVED_MARK:
        return False
    if c in _RESERVED:
        if mode == PATH:
            return c == 0x3F  # ?
        if mode == PATH_SEGMENT:
            return c in b"/;,?"
        if mode == USER_PASSWORD:
            return c in b"@/?:"
        if mode == QUERY_COMPONENT:
            return True
        if mode == FRAGMENT:
            return False
    return not (mode == FRAGMENT and c in b"!()*")


def _escape_table(mode: int) -> dict[int, str]:
    table: dict[int, str] = {}
    for c in range(256):
        if c == 0x20 and mode == QUERY_COMPONENT:
            table[c] = "+"
        elif should_escape(c, mode):
            table[c] = f"%{c:02X}"
    return table


_ESCAPE_TABLES = {mode: _escape_table(mode) for mode in range(PATH, FRAGMENT + 1)}


def escape(s: str, mode: int) -> str:
    """Go's escape over a byte string (upper-case hex, '+' for space in query components)."""
    return s.translate(_ESCAPE_TABLES[mode])


def unescape(s: str, mode: int) -> str:
    """Go's unescape over a byte string; GoUrlError for a bad escape or host character."""
    count = 0
    i = 0
    length = len(s)
    while i < length:
        c = s[i]
        if c == "%":
            count += 1
            escape_text = s[i : i + 3]
            if i + 2 >= length or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise GoUrlError(f"invalid URL escape {_go_quote(escape_text)}")
            # In a host, %-escapes may only encode non-ASCII bytes (and %25 in a zone).
            if mode == HOST and int(s[i + 1], 16) < 8 and escape_text != "%25":
                raise GoUrlError(f"invalid URL escape {_go_quote(escape_text)}")
            if mode == ZONE:
                value = int(s[i + 1 : i + 3], 16)
                if escape_text != "%25" and value != 0x20 and should_escape(value, HOST):
                    raise GoUrlError(f"invalid URL escape {_go_quote(escape_text)}")
            i += 3
            continue
        if mode in (HOST, ZONE) and ord(c) < 0x80 and should_escape(ord(c), mode):
            raise GoUrlError(f"invalid character {_go_quote(c)} in host name")
        i += 1
    if count == 0 and not (mode == QUERY_COMPONENT and "+" in s):
        return s
    out: list[str] = []
    i = 0
    while i < length:
        c = s[i]
        if c == "%":
            out.append(chr(int(s[i + 1 : i + 3], 16)))
            i += 3
            continue
        out.append(" " if c == "+" and mode == QUERY_COMPONENT else c)
        i += 1
    return "".join(out)


def _go_quote(s: str) -> str:
    """Roughly Go's strconv.Quote, enough for error messages."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class Userinfo:
    """Go's url.Userinfo: a username and an optional password (both unescaped)."""

    username: str
    password: str = ""
    password_set: bool = False

    def string(self) -> str:
        """Go's Userinfo.String."""
        text = escape(self.username, USER_PASSWORD)
        if self.password_set:
            text += ":" + escape(self.password, USER_PASSWORD)
        return text


@dataclass
class GoURL:
    """Go's url.URL fields, each a byte string."""

    scheme: str = ""
    opaque: str = ""
    user: Userinfo | None = None
    host: str = ""
    path: str = ""
    raw_path: str = ""
    omit_host: bool = False
    force_query: bool = False
    raw_query: str = ""
    fragment: str = ""
    raw_fragment: str = ""

    def set_path(self, p: str) -> None:
        """Go's setPath: Path unescaped, RawPath kept only when it differs from the default."""
        self.path = unescape(p, PATH)
        self.raw_path = "" if escape(self.path, PATH) == p else p

    def escaped_path(self) -> str:
        """Go's EscapedPath."""
        if _raw_form_holds(self.raw_path, self.path, PATH):
            return self.raw_path
        if self.path == "*":
            return "*"
        return escape(self.path, PATH)

    def set_fragment(self, f: str) -> None:
        """Go's setFragment."""
        self.fragment = unescape(f, FRAGMENT)
        self.raw_fragment = "" if escape(self.fragment, FRAGMENT) == f else f

    def escaped_fragment(self) -> str:
        """Go's EscapedFragment."""
        if _raw_form_holds(self.raw_fragment, self.fragment, FRAGMENT):
            return self.raw_fragment
        return escape(self.fragment, FRAGMENT)

    def string(self) -> str:
        """Go's URL.String."""
        parts: list[str] = []
        if self.scheme:
            parts.append(self.scheme + ":")
        if self.opaque:
            parts.append(self.opaque)
        else:
            if (self.scheme or self.host or self.user is not None) and not (
                self.omit_host and not self.host and self.user is None
            ):
                if self.host or self.path or self.user is not None:
                    parts.append("//")
                if self.user is not None:
                    parts.append(self.user.string() + "@")
                if self.host:
                    parts.append(escape(self.host, HOST))
            path = self.escaped_path()
            if path and path[0] != "/" and self.host:
                parts.append("/")
            if not parts and ":" in path.partition("/")[0]:
                parts.append("./")
            parts.append(path)
        if self.force_query or self.raw_query:
            parts.append("?" + self.raw_query)
        if self.fragment:
            parts.append("#" + self.escaped_fragment())
        return "".join(parts)

    def hostname(self) -> str:
        """Go's Hostname: Host without a valid :port and without IPv6 brackets."""
        host = self.host
        colon = host.rfind(":")
        if colon != -1 and _valid_optional_port(host[colon:]):
            host = host[:colon]
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return host


def _valid_encoded(s: str, mode: int) -> bool:
    return all(c in _VALID_ENCODED_OK or not should_escape(ord(c), mode) for c in s)


def _raw_form_holds(raw: str, value: str, mode: int) -> bool:
    """Go's test in EscapedPath/EscapedFragment: the kept raw form is validly encoded and
    unescapes to the current value, so it may be printed as is."""
    if not raw or not _valid_encoded(raw, mode):
        return False
    try:
        return unescape(raw, mode) == value
    except GoUrlError:
        return False


def _valid_optional_port(port: str) -> bool:
    if not port:
        return True
    return port[0] == ":" and all(c in _DIGITS for c in port[1:])


def _valid_userinfo(s: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in _USERINFO_OK) for c in s)


def _get_scheme(raw: str) -> tuple[str, str]:
    for i, c in enumerate(raw):
        if "a" <= c <= "z" or "A" <= c <= "Z":
            continue
        if "0" <= c <= "9" or c in "+-.":
            if i == 0:
                return "", raw
            continue
        if c == ":":
            if i == 0:
                raise GoUrlError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return "", raw
    return "", raw


def _parse_host(host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise GoUrlError("missing ']' in host")
        colon_port = host[close + 1 :]
        if not _valid_optional_port(colon_port):
            raise GoUrlError(f"invalid port {_go_quote(colon_port)} after host")
        zone = host[:close].find("%25")
        if zone >= 0:
            return (
                unescape(host[:zone], HOST)
                + unescape(host[zone:close], ZONE)
                + unescape(host[close:], HOST)
            )
    else:
        colon = host.rfind(":")
        if colon != -1 and not _valid_optional_port(host[colon:]):
            raise GoUrlError(f"invalid port {_go_quote(host[colon:])} after host")
    return unescape(host, HOST)


def _parse_authority(authority: str) -> tuple[Userinfo | None, str]:
    at = authority.rfind("@")
    host = _parse_host(authority if at < 0 else authority[at + 1 :])
    if at < 0:
        return None, host
    userinfo = authority[:at]
    if not _valid_userinfo(userinfo):
        raise GoUrlError("net/url: invalid userinfo")
    if ":" not in userinfo:
        return Userinfo(unescape(userinfo, USER_PASSWORD)), host
    username, _, password = userinfo.partition(":")
    return (
        Userinfo(unescape(username, USER_PASSWORD), unescape(password, USER_PASSWORD), True),
        host,
    )


def _parse(raw: str) -> GoURL:
    if any(c < " " or c == "\x7f" for c in raw):
        raise GoUrlError("net/url: invalid control character in URL")
    url = GoURL()
    if raw == "*":
        url.path = "*"
        return url
    scheme, rest = _get_scheme(raw)
    url.scheme = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        url.force_query = True
        rest = rest[:-1]
    else:
        rest, _, url.raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if url.scheme:
            url.opaque = rest
            return url
        if ":" in rest.partition("/")[0]:
            raise GoUrlError("first path segment in URL cannot contain colon")
    if (url.scheme or not rest.startswith("///")) and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        url.user, url.host = _parse_authority(authority)
        rest = slash + path
    elif url.scheme and rest.startswith("/"):
        url.omit_host = True
    url.set_path(rest)
    return url


def parse(raw: str) -> GoURL:
    """Go's url.Parse over a byte string; GoUrlError where Go returns an error."""
    before, hash_sign, fragment = raw.partition("#")
    url = _parse(before)
    if hash_sign and fragment:
        url.set_fragment(fragment)
    return url


def parse_query(query: str) -> dict[str, list[str]]:
    """Go's ParseQuery, keeping what parses: pairs with ';' or a bad escape are dropped."""
    values: dict[str, list[str]] = {}
    while query:
        pair, _, query = query.partition("&")
        if ";" in pair or not pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key = unescape(key, QUERY_COMPONENT)
            value = unescape(value, QUERY_COMPONENT)
        except GoUrlError:
            continue
        values.setdefault(key, []).append(value)
    return values


def encode_values(values: dict[str, list[str]]) -> str:
    """Go's Values.Encode: keys sorted bytewise, each key's values in their original order."""
    parts: list[str] = []
    for key in sorted(values):
        escaped_key = escape(key, QUERY_COMPONENT)
        parts.extend(f"{escaped_key}={escape(v, QUERY_COMPONENT)}" for v in values[key])
    return "&".join(parts)
