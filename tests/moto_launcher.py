"""moto's S3 server for the tests (conftest.MotoServer runs this file as `python FILE -H HOST -p
PORT`), with two of its per-request costs computed once instead of on every request.

Profiled over S3 GET/HEAD/PUT/list requests, moto's dispatch listed its own package directory
(~175 os.listdir + isdir calls, twice a request) to tell a service name from a host, and its
ListObjectsV2 serializer parsed every object's timestamp with dateutil again on every listing.
Both are pure functions of static inputs: the directory listing is kept once, the timestamp
parse cached by its input. Nothing a response says changes; where moto no longer has either
function the server runs as it is.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any


def _patch() -> None:
    from moto import backends
    from moto.core import serialize

    listing = getattr(backends, "list_of_moto_modules", None)
    if listing is not None:
        modules = tuple(listing())

        def list_of_moto_modules() -> Iterable[str]:
            return modules

        backends.list_of_moto_modules = list_of_moto_modules
    parse: Callable[[Any], Any] | None = getattr(serialize, "parse_to_aware_datetime", None)
    if parse is not None:
        cached = functools.lru_cache(maxsize=1 << 16)(parse)

        def parse_to_aware_datetime(value: Any) -> Any:
            try:
                return cached(value)  # a str or a datetime: both immutable, both hashable
            except TypeError:  # unhashable: parsed as moto would
                return parse(value)

        setattr(serialize, "parse_to_aware_datetime", parse_to_aware_datetime)  # noqa: B010


if __name__ == "__main__":
    _patch()
    from moto.server import main

    main(sys.argv[1:])
