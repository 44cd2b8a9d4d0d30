"""Shapley attribution: how much of a change each of a few switches explains, independent of order.

Why Shapley: the three factors (overlap window, heterogeneous links, variance) interact — a wider
overlap window hides more of a slow link — so a chain of counterfactuals credits whichever switch is
flipped first. The Shapley value averages each switch's marginal effect over every order of flipping;
the parts always sum to the whole change (v(all) - v(none)), and no order is privileged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import combinations
from math import factorial


def shapley(players: Sequence[Hashable], value: Callable[[frozenset], float]) -> dict:
    """phi_i = sum over S not containing i of |S|!(n-|S|-1)!/n! (v(S + i) - v(S)); `value` is called once
    per subset of `players`."""
    n = len(players)
    cache: dict[frozenset, float] = {}

    def v(subset: frozenset) -> float:
        if subset not in cache:
            cache[subset] = float(value(subset))
        return cache[subset]

    out = {}
    for i in players:
        others = [p for p in players if p != i]
        total = 0.0
        for size in range(n):
            weight = factorial(size) * factorial(n - size - 1) / factorial(n)
            for subset in combinations(others, size):
                s = frozenset(subset)
                total += weight * (v(s | {i}) - v(s))
        out[i] = total
    return out
