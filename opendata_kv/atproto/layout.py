"""Where a Jetstream consumer keeps its state, beside the records it writes: one RecordType
(0xF by default) keyed by (section, name).

    ("cursor", consumer name)   {"cursor": time_us, "at_cursor": n, counts...}  (IngestState)
    ("identity", did)           {"handle", "seq", "time", "time_us"}            latest identity
    ("account", did)            {"active", "status", "seq", "time", "time_us"}  latest account

Each is written in the same atomic batch as the records of the events it follows.
"""

from __future__ import annotations

from opendata_kv.collections import Layout
from opendata_kv.keys import RecordType, fields

#: Default record type nibble of the consumer state (one of the nibbles left to users: pick
#: another with JetstreamLayout(n) when yours use it).
STATE_TYPE = 0xF


class JetstreamLayout(Layout):
    """The consumer state's RecordType: (section, name) -> msgpack map."""

    kind = "Jetstream"

    def __init__(
        self,
        record_type: int = STATE_TYPE,
        *,
        version: int = 1,
        keyspace: bytes = b"",
        name: str = "jetstream_state",
    ) -> None:
        self.state = RecordType(
            name,
            record_type,
            [("section", fields.string), ("name", fields.string)],
            version=version,
            keyspace=keyspace,
        )
        self._owned_values = (self.state,)

    @property
    def record_types(self) -> tuple[RecordType, ...]:
        return (self.state,)


#: The default layout (record type 0xF, version 1, no keyspace).
JETSTREAM = JetstreamLayout()
