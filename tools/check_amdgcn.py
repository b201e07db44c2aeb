#!/usr/bin/env python3
"""Compiles kernel variants for AMD GPUs offline and prints what the
register allocator gave them: VGPRs (AGPRs), SGPRs, scratch, LDS and the
waves per SIMD they allow, for each target. The AMD rows of host/params.c
reason from these (no AMD GPU is at hand).

clang-16 (OpenCL C -> amdgcn), linked with libclc's amdgcn--amdhsa
builtins (Debian's libclc-16; without a builtin library every builtin is a
call, which inflates registers and reserves 16 KiB of scratch), then llc
for each target. libclc's builtins are not ROCm's, so the counts are close
to, not equal to, what ROCm's compiler gives; compare variants with each
other, not with a driver's figures.

  tools/check_amdgcn.py cl/decode.cl "-DQ_DT=f16 ..." [--mcpu gfx90a,gfx1030] [--ops N] [--asm out.s]

--ops N also prints the N most frequent instructions (the unrolled loops
dominate them). Targets: clang-16 knows gfx90a (CDNA2), gfx940 (CDNA3: MI300's
first target ID), gfx1030 (RDNA2), gfx1100 (RDNA3).
"""
import argparse, collections, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_nvptx import expand, run  # noqa: E402

WAVE = {'gfx90a': 64, 'gfx940': 64, 'gfx1030': 32, 'gfx1100': 32}
KEYS = ('NumVgprs', 'NumAgprs', 'TotalNumVgprs', 'NumSgprs', 'ScratchSize', 'Occupancy')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('options')
    ap.add_argument('--mcpu', default='gfx90a,gfx940,gfx1030,gfx1100')
    ap.add_argument('--libclc', default='/usr/lib/clc/amdgcn--amdhsa.bc')
    ap.add_argument('--ops', type=int, default=0)
    ap.add_argument('--asm', help='keep the last target\'s assembly here')
    a = ap.parse_args()
    if not os.path.exists(a.libclc):
        sys.exit(f'{a.libclc} missing: apt-get install libclc-16')
    cl_dir, name = os.path.split(os.path.abspath(a.file))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'k.cl')
        open(src, 'w').write(expand(cl_dir, name, set()))
        for cpu in a.mcpu.split(','):
            wave = WAVE.get(cpu, 64)
            feat = (f'-DCLATTN_AMD=1 -DCLATTN_F32_DENORM=1 -DCLATTN_SIMD={wave} -DCLATTN_NV_PTX=0 '
                    '-DCLATTN_FP64=1').split()
            bc, lbc, obc = (os.path.join(tmp, f'{cpu}.{x}.bc') for x in 'klo')
            run(['clang-16', '-x', 'cl', '-cl-std=CL1.2', '-Xclang', '-finclude-default-header', '-nogpulib',
                 '-target', 'amdgcn-amd-amdhsa', f'-mcpu={cpu}', '-O3', '-emit-llvm', '-c'] +
                a.options.split() + feat + [src, '-o', bc])
            run(['llvm-link-16', '-only-needed', '-suppress-warnings', bc, a.libclc, '-o', lbc])
            run(['opt-16', '-O3', f'-mcpu={cpu}', '-mtriple=amdgcn-amd-amdhsa', lbc, '-o', obc])
            s = a.asm or os.path.join(tmp, f'{cpu}.s')
            run(['llc-16', '-O3', '-mtriple=amdgcn-amd-amdhsa', f'-mcpu={cpu}', obc, '-o', s])
            text = open(s).read()
            calls = sorted(set(re.findall(r'(_Z\w+)@rel32@lo', text)))
            got = {k: re.search(rf'; {k}: (\d+)', text) for k in KEYS}
            lds = re.search(r'\.amdhsa_group_segment_fixed_size (\d+)', text)
            print(f'{cpu} (wave{wave}): ' + ', '.join(f'{k} {m.group(1)}' for k, m in got.items() if m) +
                  (f', LDS {lds.group(1)}' if lds else '') + (f'; CALLS {" ".join(calls)}' if calls else ''))
            if a.ops:
                ops = collections.Counter(re.findall(r'^\s+([sv]_\w+|ds_\w+|global_\w+|buffer_\w+|flat_\w+)',
                                                     text, re.M))
                print('  ' + ', '.join(f'{op} {n}' for op, n in ops.most_common(a.ops)) +
                      f'; all {sum(ops.values())}')


if __name__ == '__main__':
    main()
