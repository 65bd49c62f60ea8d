"""Control structure of one function: CFG, natural loops (dominators + back edges), branch regions.

A *region* is a set of blocks that becomes one LOOP or BRANCH vertex: a loop is its natural-loop
body (header included); a branch is the set of blocks reachable from some but not all successors of
its conditional terminator (its arms), staying inside the innermost loop of that terminator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from scalgraph.static.ir import Function, successors

LOOP, BRANCH = "loop", "branch"


@dataclass
class Region:
    kind: str                 # LOOP or BRANCH
    head: int                 # block index: loop header, or the block ending in the branch
    blocks: frozenset[int]    # loop body (with header) / branch arms (without head)
    parent: int = -1          # index of the enclosing region, -1 = function level
    depth: int = 0            # loop nesting depth of the region itself (loops count, branches don't)


@dataclass
class ControlFlow:
    succs: list[list[int]]
    reachable: set[int]
    regions: list[Region] = field(default_factory=list)
    block_region: list[int] = field(default_factory=list)   # innermost region of each block, -1 = top
    exceptional: set[int] = field(default_factory=set)      # reached only by unwinding (landing pads...)
    order: list[int] = field(default_factory=list)           # position of each block in execution order
    branch_of_block: dict[int, int] = field(default_factory=dict)   # head block -> its BRANCH region


def analyse(fn: Function) -> ControlFlow:
    index = {b.label: i for i, b in enumerate(fn.blocks)}
    succs = [[index[s] for s in successors(b) if s in index] for b in fn.blocks]
    idom = immediate_dominators(succs, 0) if fn.blocks else {}
    reachable = set(idom) | ({0} if fn.blocks else set())
    loops = _natural_loops(succs, idom, reachable)
    innermost_loop = _innermost(loops, len(fn.blocks))
    conditional = [bool(b.instrs) and b.instrs[-1].opcode in ("br", "switch") for b in fn.blocks]
    branches = _branches(succs, reachable, loops, innermost_loop, conditional)
    regions = [Region(LOOP, h, frozenset(body)) for h, body in loops] + branches
    cf = ControlFlow(succs, reachable, regions)
    cf.exceptional = reachable - _normal_reach(fn, succs)
    cf.order = _execution_order(succs)
    _nest(cf, len(fn.blocks))
    cf.branch_of_block = {r.head: i for i, r in enumerate(regions) if r.kind == BRANCH}
    return cf


def _execution_order(succs: list[list[int]]) -> list[int]:
    """Reverse post-order (successors taken first-to-last, so a then-arm precedes its else-arm):
    every block comes after the blocks that lead to it, back edges aside.  Optimised code is not
    laid out in execution order, so vertices are ordered by this, not by the layout."""
    n = len(succs)
    post: list[int] = []
    seen = [False] * n
    if n:
        seen[0] = True
        stack = [(0, iter(reversed(succs[0])))]
        while stack:
            b, it = stack[-1]
            nxt = next((s for s in it if not seen[s]), None)
            if nxt is None:
                post.append(b)
                stack.pop()
            else:
                seen[nxt] = True
                stack.append((nxt, iter(reversed(succs[nxt]))))
    pos = [n + i for i in range(n)]                 # unreachable blocks last, in layout order
    for i, b in enumerate(reversed(post)):
        pos[b] = i
    return pos


def _normal_reach(fn: Function, succs: list[list[int]]) -> set[int]:
    """Blocks reachable from the entry without taking an invoke's unwind edge."""
    seen: set[int] = set()
    stack = [0] if fn.blocks else []
    while stack:
        b = stack.pop()
        if b in seen:
            continue
        seen.add(b)
        ss = succs[b]
        if fn.blocks[b].instrs and fn.blocks[b].instrs[-1].opcode == "invoke":
            ss = ss[:1]
        stack.extend(ss)
    return seen


def _dominance_test(idom: dict[int, int], root: int):
    """dominates(a, b) in O(1): pre/post numbers of the dominator tree."""
    kids: dict[int, list[int]] = {}
    for b, p in idom.items():
        if b != p:
            kids.setdefault(p, []).append(b)
    pre: dict[int, int] = {}
    post: dict[int, int] = {}
    clock = 0
    stack = [(root, False)]
    while stack:
        b, done = stack.pop()
        if done:
            post[b] = clock
            clock += 1
            continue
        pre[b] = clock
        clock += 1
        stack.append((b, True))
        stack.extend((k, False) for k in kids.get(b, ()))

    def dominates(a: int, b: int) -> bool:
        return a in pre and b in pre and pre[a] <= pre[b] and post[b] <= post[a]
    return dominates


def immediate_dominators(succs: list[list[int]], start: int) -> dict[int, int]:
    """Immediate dominator of each node reachable from `start` (the start itself left out), by
    Cooper, Harvey and Kennedy's iterative algorithm ("A Simple, Fast Dominance Algorithm", 2001),
    the one networkx uses.  Written here because importing networkx cost 0.3 s of CPU per compiled
    file, more than the whole static pass of a typical source file."""
    post: list[int] = []                          # post-order of a depth-first walk, iterative
    seen = {start}
    stack = [(start, iter(succs[start]))]
    while stack:
        b, it = stack[-1]
        nxt = next((s for s in it if s not in seen), None)
        if nxt is None:
            post.append(b)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(succs[nxt])))
    number = {b: i for i, b in enumerate(post)}
    preds: dict[int, list[int]] = {b: [] for b in post}
    for u in post:
        for v in succs[u]:
            preds[v].append(u)
    idom = {start: start}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while number[a] < number[b]:
                a = idom[a]
            while number[b] < number[a]:
                b = idom[b]
        return a

    changed = True
    while changed:
        changed = False
        for b in reversed(post):
            if b == start:
                continue
            new = -1
            for p in preds[b]:
                if p in idom:
                    new = p if new < 0 else intersect(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    del idom[start]
    return idom


def _natural_loops(succs: list[list[int]], idom: dict[int, int], reachable: set[int]
                   ) -> list[tuple[int, set[int]]]:
    bodies: dict[int, set[int]] = {}
    dominates = _dominance_test(idom, 0)
    preds: list[list[int]] = [[] for _ in succs]
    for u, ss in enumerate(succs):
        for v in ss:
            preds[v].append(u)
    for u, h in ((u, h) for u, ss in enumerate(succs) for h in ss):
        if u in reachable and dominates(h, u):
            body = bodies.setdefault(h, {h})
            stack = [u]
            while stack:
                x = stack.pop()
                if x in body:
                    continue
                body.add(x)
                stack.extend(p for p in preds[x] if p in reachable)
    return sorted(bodies.items())


def _innermost(loops: list[tuple[int, set[int]]], nblocks: int) -> list[int]:
    """Index (into loops) of the innermost loop of each block, -1 outside loops."""
    out = [-1] * nblocks
    size = [len(body) for _, body in loops]
    for li, (_, body) in enumerate(loops):
        for b in body:
            if out[b] < 0 or size[li] < size[out[b]]:
                out[b] = li
    return out


def _branches(succs, reachable, loops, innermost_loop, conditional) -> list[Region]:
    ipdom = _post_dominators(succs, reachable)
    out: list[Region] = []
    for b, ss in enumerate(succs):
        if b not in reachable or len(ss) < 2 or not conditional[b]:   # invoke's unwind edge is no branch
            continue
        li = innermost_loop[b]
        if li >= 0:
            header, body = loops[li]
            # an edge leaving the loop or going back to its header is loop control, not a branch
            if any(s not in body or s == header for s in ss):
                continue
            inside = body
        else:
            header, inside = -1, None
        join = ipdom.get(b, -1)
        if join >= 0:                   # the arms end where the paths meet again
            arms = set().union(*(_reach(s, succs, inside, (header, b, join)) for s in ss))
        else:                           # no common exit (an arm loops forever or returns early)
            reach = [_reach(s, succs, inside, (header, b)) for s in ss]
            arms = set().union(*reach) - set.intersection(*reach)
        if arms:
            out.append(Region(BRANCH, b, frozenset(arms)))
    return out


def _post_dominators(succs, reachable) -> dict[int, int]:
    """Immediate post-dominator of each block (-1 = only the virtual exit)."""
    exit_node = len(succs)
    rev: list[list[int]] = [[] for _ in range(exit_node + 1)]      # the reversed CFG, from the exit
    for u in sorted(reachable):
        if not succs[u]:
            rev[exit_node].append(u)
        for v in dict.fromkeys(succs[u]):
            rev[v].append(u)
    ipdom = immediate_dominators(rev, exit_node)
    return {b: (-1 if p == exit_node else p) for b, p in ipdom.items()}


def _reach(start: int, succs, inside, stops: tuple) -> set[int]:
    seen: set[int] = set()
    stack = [start]
    while stack:
        x = stack.pop()
        if x in seen or x in stops or (inside is not None and x not in inside):
            continue
        seen.add(x)
        stack.extend(succs[x])
    return seen


def _nest(cf: ControlFlow, nblocks: int) -> None:
    """Innermost region of each block, and parent of each region = the next larger region holding
    its head (regions of structured code nest; ties: a loop lies inside a branch of equal size)."""
    regs = cf.regions
    order = sorted(range(len(regs)), key=lambda i: (-len(regs[i].blocks), regs[i].kind == LOOP, i))
    holders: list[list[int]] = [[] for _ in range(nblocks)]     # regions holding each block, outer first
    for j in order:
        for b in regs[j].blocks:
            holders[b].append(j)
    cf.block_region = [h[-1] if h else -1 for h in holders]
    for i, r in enumerate(regs):
        around = holders[r.head]
        if r.kind == LOOP:              # the header's regions: ..., parent, the loop itself, [inner ones]
            k = around.index(i)
            r.parent = around[k - 1] if k > 0 else -1
        else:
            r.parent = around[-1] if around else -1
    done = [False] * len(regs)
    for i in order:                     # loop depth = number of enclosing loops, the region's own included
        r, p = regs[i], regs[i].parent
        if p >= 0 and done[p]:          # parents come first in `order` (they are larger)
            r.depth = regs[p].depth + (r.kind == LOOP)
        else:
            d = 1 if r.kind == LOOP else 0
            while p >= 0:
                d += regs[p].kind == LOOP
                p = regs[p].parent
            r.depth = d
        done[i] = True
