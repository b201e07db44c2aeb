#!/usr/bin/env python3
"""Scans PTX for instructions that touch the registers of an in-flight
warpgroup MMA: between a wgmma.mma_async and the wgmma.wait_group that retires
its commit group (wait_group N leaves the newest N groups in flight), any
other instruction that writes one of its accumulator or A-fragment registers,
or reads one of its accumulators (the PTX ISA leaves both undefined). Follows
branches, loops' back edges included (a label's state is the union of the
paths reaching it, found by passes until it stops growing). Reads NVIDIA's PTX (the program cache's entry,
from its first "//") or clang's (tools/check_nvptx.py --ptx). Prints each
finding and a count; exits 0.

  tools/wgmma_hazards.py prog.ptx

Session 42 ran it on the backward's dq kernel, right and wrong forms alike
(no finding), and on the pipelined forward (tools/sweeps/session42_wgp.patch)
with and without the wait before the rescale (one finding per accumulator
register without it; none with it)."""
import re
import sys

NO_DEST = ('st.', 'bra', 'bar', 'cp.async', 'red.', 'atom', 'ret', 'wgmma.')


def union(a, b):
    """The in-flight state of two paths joined: (open set pair, [group pairs], newest last)."""
    if a is None or b is None:
        return b if a is None else a
    (ao, ag), (bo, bg) = a, b
    n = max(len(ag), len(bg))
    ag, bg = [(set(), set())] * (n - len(ag)) + ag, [(set(), set())] * (n - len(bg)) + bg
    return ((ao[0] | bo[0], ao[1] | bo[1]), [(x[0] | y[0], x[1] | y[1]) for x, y in zip(ag, bg)])


def key(st):
    if st is None:
        return None
    (o, g) = st
    return (frozenset(o[0]), frozenset(o[1]), tuple((frozenset(a), frozenset(b)) for a, b in g))


def scan(lines):
    """Passes over the program until every label's state (the union of the
    paths reaching it, loop back edges included) stops growing."""
    at_label, n, found = {}, 0, {}
    for _ in range(20):
        state, n, changed = ((set(), set()), []), 0, False
        for ln, line in enumerate(lines, 1):
            s = line.split('//')[0].strip()
            if not s:
                continue
            m = re.match(r'^(\$?[\w.$]+):$', s)
            if m:
                state = union(state, at_label.get(m.group(1)))
                continue
            if '.entry' in s:
                state = ((set(), set()), [])
            if state is None:
                continue
            (op_acc, op_afr), groups = state
            b = re.search(r'\bbra(\.uni)?\s+(\$?[\w.$]+);', s)
            if b:
                old = at_label.get(b.group(2))
                new = union(old, state)
                if key(new) != key(old):
                    at_label[b.group(2)], changed = new, True
                if not s.startswith('@'):
                    state = None
                continue
            if 'wgmma.mma_async' in s:
                m = re.search(r'\{([^}]*)\},\s*\{([^}]*)\}', s)
                if m:
                    op_acc = op_acc | {x.strip() for x in m.group(1).split(',')}
                    op_afr = op_afr | {x.strip() for x in m.group(2).split(',')}
                state = ((op_acc, op_afr), groups)
                n += 1
                continue
            if 'wgmma.commit_group' in s:
                state = ((set(), set()), groups + [(op_acc, op_afr)])
                continue
            m = re.search(r'wgmma\.wait_group\.sync\.aligned\s+(\d+)', s)
            if m:
                keep = int(m.group(1))
                state = ((op_acc, op_afr), groups[len(groups) - keep:] if keep else [])
                continue
            acc = set().union(op_acc, *(g[0] for g in groups))
            afr = set().union(op_afr, *(g[1] for g in groups))
            regs = re.findall(r'%[a-z]+[0-9]+', s)
            if not regs or not (acc or afr):
                continue
            if s.startswith('@'):  # the guard predicate is read, not written
                regs = regs[1:]
                s = s.split(None, 1)[1] if ' ' in s else s
            dst = None if s.split()[0].startswith(NO_DEST) or not regs else regs[0]
            bad = ['writes ' + dst] if dst and (dst in acc or dst in afr) else []
            bad += ['reads accumulator ' + r for r in (regs[1:] if dst else regs) if r in acc]
            if bad:
                found[ln] = '%d: %s <- %s' % (ln, s[:100], ', '.join(bad))
        if not changed:
            break
    return n, [found[k] for k in sorted(found)]


if __name__ == '__main__':
    n, found = scan(open(sys.argv[1]).read().split('\n'))
    print('\n'.join(found[:40]))
    print('%d wgmma.mma_async, %d hazards' % (n, len(found)))
