#!/usr/bin/env python3
"""Scans PTX for instructions that touch the registers of an in-flight
warpgroup MMA: between a wgmma.mma_async and the next wgmma.wait_group, any
other instruction that writes one of its accumulator or A-fragment registers,
or reads one of its accumulators (the PTX ISA leaves both undefined). Reads
NVIDIA's PTX (the program cache's entry, from its first "//") or clang's
(tools/check_nvptx.py --ptx). Prints each finding and a count; exits 0.

  tools/wgmma_hazards.py prog.ptx

Session 42 ran it on the backward's dq kernel, right and wrong forms alike:
no finding (tools/PERF.md)."""
import re
import sys

NO_DEST = ('st.', 'bra', 'bar', 'cp.async', 'red.', 'atom', 'ret', 'wgmma.')


def scan(lines):
    acc, afr, n, found = set(), set(), 0, []
    for ln, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith('//'):
            continue
        if '.entry' in s:
            acc.clear(), afr.clear()
        if 'wgmma.mma_async' in s:
            m = re.search(r'\{([^}]*)\},\s*\{([^}]*)\}', s)
            if m:
                acc |= {x.strip() for x in m.group(1).split(',')}
                afr |= {x.strip() for x in m.group(2).split(',')}
            n += 1
            continue
        if 'wgmma.wait_group' in s:
            acc.clear(), afr.clear()
            continue
        regs = re.findall(r'%[a-z]+[0-9]+', s)
        if not regs or not (acc or afr):
            continue
        dst = None if s.split()[0].startswith(NO_DEST) else regs[0]
        bad = ['writes ' + dst] if dst and (dst in acc or dst in afr) else []
        bad += ['reads accumulator ' + r for r in (regs[1:] if dst else regs) if r in acc]
        if bad:
            found.append('%d: %s <- %s' % (ln, s[:100], ', '.join(bad)))
    return n, found


if __name__ == '__main__':
    n, found = scan(open(sys.argv[1]).read().split('\n'))
    print('\n'.join(found[:40]))
    print('%d wgmma.mma_async, %d hazards' % (n, len(found)))
