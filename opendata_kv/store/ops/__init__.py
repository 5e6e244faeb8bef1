"""Operations on a whole database, beside reads and writes: the change feed, checkpoints,
clones and migration (verification is opendata_kv.checks.verify). Each module holds one of them."""
