#!/usr/bin/env python3
"""Instruction mix of the innermost loop that holds a kernel's tensor-core
work, from `cuobjdump -sass` output (see tools/gpu_sass.sh).

The loop is the latest backward branch whose target lies at or before the
first HMMA and whose source lies at or after the last one; its body's opcodes
are counted (predicated ones by their opcode, modifiers dropped). Rare
branches inside the body (a rescale taken once in many blocks) are counted
too: read the listing (--print) before dividing by anything.

  tools/sass_loop.py kernel.sass [...] [--print]
"""
import collections, re, sys


def parse(path):
    ins = []
    for line in open(path):
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    return ins


def hot_loop(ins):
    at = {a: i for i, (a, _) in enumerate(ins)}
    mma = [i for i, (_, s) in enumerate(ins) if 'HMMA' in s]
    if not mma:
        return None
    best = None
    for i, (_, s) in enumerate(ins):
        m = re.search(r'BRA.*?0x([0-9a-f]+)', s)
        if not m or int(m.group(1), 16) not in at:
            continue
        t = at[int(m.group(1), 16)]
        if t < i and t <= mma[0] and i >= mma[-1] and (best is None or t > best[0]):
            best = (t, i)
    return best


def main(argv):
    show = '--print' in argv
    for path in [a for a in argv if a != '--print']:
        ins = parse(path)
        loop = hot_loop(ins)
        if loop is None:
            print(f'{path}: no loop around the HMMA')
            continue
        body = ins[loop[0]:loop[1] + 1]
        ops = collections.Counter()
        for _, s in body:
            words = s.split()
            op = words[1] if words[0].startswith('@') else words[0]
            ops[op.split('.')[0]] += 1
        print(f'{path}: {len(body)} instructions, {ops["HMMA"]} HMMA')
        print('  ' + ', '.join(f'{k} {v}' for k, v in ops.most_common()))
        if show:
            for a, s in body:
                print(f'  {a:05x} {s}')


if __name__ == '__main__':
    main(sys.argv[1:])
