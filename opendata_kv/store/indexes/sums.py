"""The exact total of a sum index's group (RFC 0010, "Exact sums"): integer amounts added as
integers, float amounts as integers in units of 2**-1074 (every finite float is one), so a
delete takes out exactly what its put added and a total always equals a recount.

A group's total reads as an int while none of its live amounts is a float (Python's sum of
ints), else as the correctly rounded float of the exact total of all of them. Integer amounts
and the total of a group's integer amounts stay in the signed 64-bit range; a float total
must round to a finite float.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

INT_MIN = -(1 << 63)
INT_MAX = (1 << 63) - 1
#: float amounts are kept in units of 2**-FINE: the smallest subnormal is 2**-1074
FINE = 1074


class Sum(NamedTuple):
    """A group's exact state: its live record count (`records`), the total of its integer
    amounts, how many of its amounts are floats, and their exact total in 2**-1074 units."""

    records: int
    ints: int
    floats: int
    fine: int

    def total(self) -> int | float:
        """What index_sum reports; OverflowError when it rounds past the float range."""
        if not self.floats:
            return self.ints
        return ((self.ints << FINE) + self.fine) / (1 << FINE)  # correctly rounded


ZERO = Sum(0, 0, 0, 0)


def fine_units(amount: float) -> int:
    """A finite float as an exact integer number of 2**-1074."""
    top, bottom = amount.as_integer_ratio()  # bottom is a power of two, at most 2**1074
    return top << (FINE + 1 - bottom.bit_length())


def amount_problem(amount: int | float) -> str | None:
    """Why a sum cannot take `amount` (None: it can)."""
    if isinstance(amount, float):
        return None if math.isfinite(amount) else "is not finite"
    if not INT_MIN <= amount <= INT_MAX:
        return "is an integer outside the signed 64-bit range"
    return None


def total_problem(state: Sum) -> str | None:
    """Why a group cannot hold `state` (None: it can)."""
    if not INT_MIN <= state.ints <= INT_MAX:
        return (
            f"would bring the total of its integer amounts to {state.ints}, outside the "
            "signed 64-bit range"
        )
    try:
        state.total()
    except OverflowError:
        return "would bring its total past the float range"
    return None


def add(state: Sum, sign: int, amount: int | float) -> Sum:
    """`state` with one record of `amount` added (sign 1) or taken out (sign -1)."""
    count, ints, floats, fine = state
    if amount.__class__ is int:
        return Sum(count + sign, ints + sign * amount, floats, fine)
    if isinstance(amount, float):
        return Sum(count + sign, ints, floats + sign, fine + sign * fine_units(amount))
    return Sum(count + sign, ints + sign * int(amount), floats, fine)  # an int subclass


def recount(amounts: Iterable[int | float]) -> int | float:
    """The definition a sum index's total equals: the exact total of the amounts, an int when
    none is a float, else rounded once to the nearest float (ties to even; zero is +0.0)."""
    state = ZERO
    for amount in amounts:
        state = add(state, 1, amount)
    return state.total()
