"""Operations on a whole database, beside reads and writes: the change feed, checkpoints,
clones, migration and verification. Each module holds one of them."""
