#!/usr/bin/env python3
"""Compiles kernel variants for NVIDIA offline: clang (OpenCL C -> NVPTX for
sm_90), then NVIDIA's ptxas, so the inline PTX of the CLATTN_NV_PTX paths is
assembled and its register / spill / local-memory use printed without a GPU.

OpenCL builtins have no NVPTX library here (no libclc), so a small stub
library (below) maps the ones the kernels use onto NVVM builtins and PTX;
it is linked and inlined before llc, so the counts are close to, not equal
to, what NVIDIA's OpenCL compiler produces.

  tools/check_nvptx.py cl/rerope.cl "-DDT=f16 -DD=64 -DRR_MMA=1 ..." [--ptx out.ptx] [--portable]

Kernels with "// CLATTN_PTX" markers (warpgroup MMA, cl/wgmma.clh) are
assembled as host/program.c's PTX route loads them: the markers removed,
the target raised to sm_90a.
"""
import argparse, os, re, subprocess, sys, tempfile

STUBS = r'''
#define OV __attribute__((overloadable))
size_t OV get_local_id(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_tid_x() : d == 1 ? __nvvm_read_ptx_sreg_tid_y() : __nvvm_read_ptx_sreg_tid_z(); }
size_t OV get_group_id(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_ctaid_x() : d == 1 ? __nvvm_read_ptx_sreg_ctaid_y() : __nvvm_read_ptx_sreg_ctaid_z(); }
size_t OV get_local_size(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_ntid_x() : d == 1 ? __nvvm_read_ptx_sreg_ntid_y() : __nvvm_read_ptx_sreg_ntid_z(); }
size_t OV get_num_groups(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_nctaid_x() : d == 1 ? __nvvm_read_ptx_sreg_nctaid_y() : __nvvm_read_ptx_sreg_nctaid_z(); }
size_t OV get_global_id(uint d) { return get_group_id(d) * get_local_size(d) + get_local_id(d); }
void OV barrier(cl_mem_fence_flags f) { __nvvm_bar_sync(0); }
void OV mem_fence(cl_mem_fence_flags f) { __nvvm_membar_gl(); }
int OV isnan(float x) { return x != x; }
ulong OV atom_cmpxchg(volatile __global ulong *p, ulong c, ulong v) { ulong o = *p; if (o == c) *p = v; return o; } /* shape only: not atomic */
ulong OV atom_add(volatile __global ulong *p, ulong v) { ulong o = *p; *p = o + v; return o; } /* shape only: not atomic */
ulong OV atom_max(volatile __global ulong *p, ulong v) { ulong o = *p; if (v > o) *p = v; return o; } /* shape only: not atomic */
float OV native_exp2(float x) { return __nvvm_ex2_approx_f(x); }
float OV exp2(float x) { return __nvvm_ex2_approx_f(x); }
float OV exp(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
float OV log2(float x) { return __nvvm_lg2_approx_f(x); }
float OV log(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471805599453f; }
float OV sincos(float x, __private float *c) { *c = __nvvm_cos_approx_f(x); return __nvvm_sin_approx_f(x); }
float OV fmax(float a, float b) { return __nvvm_fmax_f(a, b); }
float OV fabs(float x) { return __builtin_fabsf(x); }
float4 OV fabs(float4 x) { return (float4)(__builtin_fabsf(x.x), __builtin_fabsf(x.y), __builtin_fabsf(x.z), __builtin_fabsf(x.w)); }
float OV fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
float2 OV fma(float2 a, float2 b, float2 c) { return (float2)(__builtin_fmaf(a.x, b.x, c.x), __builtin_fmaf(a.y, b.y, c.y)); }
uint2 OV vload2(size_t i, const __global uint *p) { return (uint2)(p[2 * i], p[2 * i + 1]); }
long OV min(long a, long b) { return a < b ? a : b; }
long OV max(long a, long b) { return a > b ? a : b; }
int OV min(int a, int b) { return a < b ? a : b; }
int OV max(int a, int b) { return a > b ? a : b; }
float4 OV select(float4 a, float4 b, int4 c) { return (float4)(c.x < 0 ? b.x : a.x, c.y < 0 ? b.y : a.y, c.z < 0 ? b.z : a.z, c.w < 0 ? b.w : a.w); }
long OV clamp(long x, long a, long b) { return x < a ? a : x > b ? b : x; }
int OV clamp(int x, int a, int b) { return x < a ? a : x > b ? b : x; }
static float h2f_(ushort h) { float f; __asm__("{ .reg .b16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h)); return f; }
static ushort f2h_(float x) { ushort h; __asm__("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
float OV vload_half(size_t i, const __global half *p) { return h2f_(((const __global ushort *)p)[i]); }
float OV vload_half(size_t i, const __local half *p) { return h2f_(((const __local ushort *)p)[i]); }
float OV vload_half(size_t i, const __private half *p) { return h2f_(((const __private ushort *)p)[i]); }
float2 OV vload_half2(size_t i, const __private half *p) { return (float2)(h2f_(((const __private ushort *)p)[2*i]), h2f_(((const __private ushort *)p)[2*i+1])); }
float4 OV vload_half4(size_t i, const __global half *p) { const __global ushort *u = (const __global ushort *)p + 4*i; return (float4)(h2f_(u[0]), h2f_(u[1]), h2f_(u[2]), h2f_(u[3])); }
float8 OV vload_half8(size_t i, const __global half *p) { const __global ushort *u = (const __global ushort *)p + 8*i; return (float8)(h2f_(u[0]), h2f_(u[1]), h2f_(u[2]), h2f_(u[3]), h2f_(u[4]), h2f_(u[5]), h2f_(u[6]), h2f_(u[7])); }
float8 OV vload8(size_t i, const __local float *p) { p += 8 * i; return (float8)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]); }
void OV vstore8(float8 v, size_t i, __local float *p) { p += 8 * i; p[0] = v.s0; p[1] = v.s1; p[2] = v.s2; p[3] = v.s3; p[4] = v.s4; p[5] = v.s5; p[6] = v.s6; p[7] = v.s7; }
float OV dot(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
int OV atomic_max(volatile __local int *p, int v) { int o = *p; if (v > o) *p = v; return o; } /* shape only: not atomic */
void OV vstore_half_rte(float x, size_t i, __global half *p) { ((__global ushort *)p)[i] = f2h_(x); }
void OV vstore_half_rte(float x, size_t i, __local half *p) { ((__local ushort *)p)[i] = f2h_(x); }
void OV vstore_half_rte(float x, size_t i, __private half *p) { ((__private ushort *)p)[i] = f2h_(x); }
'''


def expand(cl_dir, name, seen):
    if name in seen:
        return ''
    seen.add(name)
    out = []
    for line in open(os.path.join(cl_dir, name)):
        m = re.match(r'\s*#include "([^"]+)"', line)
        out.append(expand(cl_dir, m.group(1), seen) + '\n' if m else line)
    return ''.join(out)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(' '.join(cmd) + '\n' + r.stdout + r.stderr)
        sys.exit(1)
    return r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('file')
    ap.add_argument('options')
    ap.add_argument('--ptx', help='keep the PTX here')
    ap.add_argument('--arch', default='sm_90')
    ap.add_argument('--ptxas', default='/usr/local/cuda/bin/ptxas')
    ap.add_argument('--portable', action='store_true',
                    help='as under CLATTN_PORTABLE=1: no inline PTX, f32 denormals kept (the H200 profile)')
    a = ap.parse_args()
    cl_dir, name = os.path.split(os.path.abspath(a.file))
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'k.cl')
        open(src, 'w').write(expand(cl_dir, name, set()))
        open(os.path.join(tmp, 's.cl'), 'w').write(STUBS)
        base = ['clang-16', '-x', 'cl', '-cl-std=CL1.2', '-target', 'nvptx64-nvidia-nvcl',
                '-Xclang', '-target-cpu', '-Xclang', a.arch, '-Xclang', '-finclude-default-header',
                '-Xclang', '-cl-ext=+cl_khr_int64_base_atomics',  # NVIDIA's driver has them
                '-Xclang', '-cl-ext=+cl_khr_int64_extended_atomics',  # MERGE_LAST=2's atom_max (where reported)
                '-Dasm=__asm__', '-O3', '-emit-llvm', '-c']
        feat = ('-DCLATTN_NV_PTX=0 -DCLATTN_F32_DENORM=1' if a.portable else '-DCLATTN_NV_PTX=1').split()
        feat += '-DCLATTN_AMD=0 -DCLATTN_SIMD=32 -DCLATTN_FP64=1'.split()
        run(base + a.options.split() + feat + [src, '-o', os.path.join(tmp, 'k.bc')])
        run(base + [os.path.join(tmp, 's.cl'), '-o', os.path.join(tmp, 's.bc')])
        run(['llvm-link-16', os.path.join(tmp, 'k.bc'), os.path.join(tmp, 's.bc'), '-o',
             os.path.join(tmp, 'l.bc')])
        run(['opt-16', '-O3', os.path.join(tmp, 'l.bc'), '-o', os.path.join(tmp, 'o.bc')])
        ptx = a.ptx or os.path.join(tmp, 'k.ptx')
        run(['llc-16', '-O3', '-mcpu=' + a.arch, '-mattr=+ptx78', os.path.join(tmp, 'o.bc'), '-o', ptx])
        # llc-16 writes PTX 7.8; the bulk copies' inline PTX (sm_90) needs 8.0
        text = open(ptx).read()
        arch = a.arch
        if 'cp.async.bulk' in text or '// CLATTN_PTX ' in text:
            text = re.sub(r'^\.version 7\.8$', '.version 8.0', text, flags=re.M)
        if '// CLATTN_PTX ' in text:  # host/program.c's PTX route: sm_90a instructions
            text = text.replace('// CLATTN_PTX ', '')
            text = re.sub(r'^\.target sm_90(?![0-9a])', '.target sm_90a', text, flags=re.M)
            arch = 'sm_90a'
        open(ptx, 'w').write(text)
        print(run([a.ptxas, '-arch=' + arch, '-v', ptx, '-o', os.path.join(tmp, 'k.o')]))


if __name__ == '__main__':
    main()
