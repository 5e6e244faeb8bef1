"""Damage checks: what slatedb 0.17 does not notice, found before an open and by verify.

    integrity      the open-time checks (local listing, WAL gaps, short SSTs) and Problem
    remote_checks  the same for a store the binding cannot list (s3://), by reading
    verify         every object of a database read and checked; a VerifyReport (read-only)

Below the typed store and above object storage: nothing here reads a typed record.
"""
