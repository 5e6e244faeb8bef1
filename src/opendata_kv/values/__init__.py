"""Value codecs: msgpack per (record type, key version), chosen by the stored key's version."""
