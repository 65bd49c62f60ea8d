"""Deep tree walks without Python recursion: a walk is a generator that yields the sub-walks to
finish before it continues (else-if chains, call chains and loop nests can be thousands deep)."""
from __future__ import annotations


def run(walk) -> None:
    stack = [walk]
    while stack:
        try:
            sub = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if sub is not None:
            stack.append(sub)
