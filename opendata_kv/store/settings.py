"""slatedb Settings from a mapping, checked: unknown names refused, partial groups merged.

slatedb's Settings.set(name, json) ignores a name it does not know (a typo silently keeps the
default) and replaces a whole group with what it is given (so a partial
`garbage_collector_options` fails for a missing field). `slatedb_settings` instead checks every
name, at every depth, against slatedb's own defaults (Settings.default().to_json_string()), says
which known name is closest to an unknown one, and merges a partial group over the defaults.
docs/store.md lists what can be set.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from opendata_kv.errors import InvalidArgumentError
from opendata_kv.native.errors import translating
from opendata_kv.native.slatedb import Settings

#: what opendata_kv opens a writer with where slatedb's default differs (the caller's
#: `settings` go over these, a group merged name by name); chosen by measurement for footprint,
#: docs/performance.md ("Footprint") has the table and tools/bench.py footprint re-measures it
#: Lz4: a settled store of AT Protocol records took 1.02x rocksdict's bytes (2.57x with no codec,
#: 0.68x with Zstd) at 100k and 1M records, its gets and scans 1.03x and 1.01x the CPU of no
#: codec (Zstd's gets 1.16x). WAL retention and compaction stay slatedb's: the WAL's min_age is
#: the change feed's window (docs/operations.md), and they keep bytes only until the
#: collector's next pass.
LIBRARY_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType({"compression_codec": "Lz4"})


def defaults() -> dict[str, Any]:
    """slatedb's default settings as JSON-able Python."""
    found: dict[str, Any] = json.loads(Settings.default().to_json_string())
    return found


def effective_defaults() -> dict[str, Any]:
    """The settings a writer opens with when given none: slatedb's defaults with
    LIBRARY_DEFAULTS merged over them."""
    return merged(LIBRARY_DEFAULTS, defaults())


def _closest(name: str, known: list[str]) -> str:
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f" (did you mean {near[0]!r}?)" if near else ""


def merged(given: Mapping[str, Any], base: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    """`given` over `base`, recursively for groups; InvalidArgumentError naming an unknown name
    (its full dotted path) and the closest known one."""
    if not isinstance(given, Mapping):
        raise InvalidArgumentError(
            f"settings{'.' + path if path else ''} must be a mapping of names to values, got "
            f"{type(given).__name__} {given!r}",
            field=path or "settings",
            value=given,
        )
    out = dict(base)
    for name, value in given.items():
        full = f"{path}.{name}" if path else str(name)
        if not isinstance(name, str) or name not in base:
            known = sorted(base)
            raise InvalidArgumentError(
                f"unknown slatedb setting {full!r}{_closest(str(name), known)}; known names"
                f"{' in ' + path if path else ''}: {', '.join(known)}",
                field=full,
                value=value,
            )
        default = base[name]
        if isinstance(default, dict) and default and isinstance(value, Mapping):
            out[name] = merged(value, default, full)
        else:
            out[name] = value
    return out


def _checked(name: str, value: Any, base: Mapping[str, Any]) -> Any:
    """`value` for the setting `name` (dotted for a nested one, as slatedb's Settings.set
    takes it: "compactor_options.poll_interval"), with a group merged over its default."""
    parts = name.split(".")
    node: Any = base
    for depth, part in enumerate(parts):
        path = ".".join(parts[:depth])
        if not isinstance(node, Mapping) or (node and part not in node):
            known = sorted(node) if isinstance(node, Mapping) else []
            near = _closest(part, known)
            raise InvalidArgumentError(
                f"unknown slatedb setting {name!r}{near}; known names"
                f"{' in ' + path if path else ''}: {', '.join(known)}",
                field=name,
                value=value,
            )
        node = node.get(part) if node else None
    if isinstance(node, dict) and node and isinstance(value, Mapping):
        return merged(value, node, name)
    return value


def slatedb_settings(settings: Mapping[str, Any] | None) -> Any:
    """slatedb Settings: slatedb's defaults, then LIBRARY_DEFAULTS, then `settings` merged over
    them (see the module doc)."""
    result = Settings.default()
    base = effective_defaults()
    chosen = [(name, base[name], base[name]) for name in LIBRARY_DEFAULTS]
    chosen += [
        (name, given, _checked(str(name), given, base)) for name, given in (settings or {}).items()
    ]
    for name, given, value in chosen:
        try:
            with translating(f"setting {name}={given!r}"):
                result.set(name, json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"setting {name}={given!r} is not JSON-able: {exc}", field=name, value=given
            ) from exc
    return result
