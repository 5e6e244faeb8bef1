"""Binding byte-copy speed-up: placeholder until the measured implementation lands."""


def install() -> bool:
    """Nothing applied yet."""
    return False
