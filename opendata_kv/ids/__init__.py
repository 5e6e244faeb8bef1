"""Identifiers used as keys: AT Protocol TIDs and record keys, Gink muids, scrape URL keys.

Pure value types and codecs: no I/O, and never an import of slatedb.
"""

from opendata_kv.ids import did, muid, nsid, rkey, tid, urlkey
from opendata_kv.ids.muid import Muid, MuidGenerator
from opendata_kv.ids.tid import TidGenerator

__all__ = ["Muid", "MuidGenerator", "TidGenerator", "did", "muid", "nsid", "rkey", "tid", "urlkey"]
