"""Object storage: where a database lives and the objects around it; no typed record, no rows.

location   a URL or path turned into a slatedb ObjectStore and a DB path; describe()
objects    the names, listing and manifest facts of a SlateDB database's objects
s3http     a minimal SigV4 S3 client for what the binding cannot do (probe, sidecars)
sidecar    the few small objects opendata_kv keeps beside a database (identity, markers)
deadline   the caller's time budget carried down to every wait, and daemon-thread calls
"""
