"""Secondary indexes (RFC 0010): declared with `Index`, maintained with every write of their
records, read with index_scan / lookup / index_count / index_sum, built online, checked by
verify. declare.py (what an index is), layout.py (its keys), registry.py (states, lock),
maintain.py (plans the index ops of a write), maintainers.py (one per index kind),
admin.py (register, build, drop), read.py (index reads), check.py (verify)."""

from opendata_kv.store.indexes.declare import Index

__all__ = ["Index"]
