"""Identifiers used as keys: AT Protocol TIDs and record keys, Gink muids, scrape URL keys.

Pure value types and codecs: no I/O, and never an import of slatedb.
"""
