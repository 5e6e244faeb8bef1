"""The key layer: the 2-byte record prefix, order-preserving field codecs, RecordType, Schema."""
