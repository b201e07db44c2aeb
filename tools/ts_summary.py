"""Summarises the instrumented decode's per-work-group stamps (cl_ts: printf of
split, gy, warp, entry, first iteration done, loop done, partials stored, merge
done; %globaltimer ns). Launches are told apart by gaps in the entry stamps.

    python3 tools/ts_summary.py LOG   (tools/gpu_session41.sh ts; not used by any test)
"""
import sys
rows = []
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 9 and p[0] == "TS":
        rows.append([int(x) for x in p[1:]])
rows.sort(key=lambda r: r[3])
launches, cur = [], []
for r in rows:
    if cur and r[3] - cur[-1][3] > 20000:
        launches.append(cur); cur = []
    cur.append(r)
if cur: launches.append(cur)
print(f"{len(rows)} stamps, {len(launches)} launches")
def q(xs):
    xs = sorted(xs); n = len(xs)
    return f"min {xs[0]/1e3:6.2f} med {xs[n//2]/1e3:6.2f} max {xs[-1]/1e3:6.2f} us"
for L in launches[-3:]:
    t0 = min(r[3] for r in L)
    w0 = [r for r in L if r[2] == 0]
    wl = [r for r in L if r[2] != 0]
    print(f"launch: {len(w0)} groups, span {(max(r[7] for r in L) - t0)/1e3:.2f} us")
    print("  entry skew        ", q([r[3] - t0 for r in w0]))
    print("  first iteration   ", q([r[4] - r[3] for r in w0]), "(warp 0)")
    print("  loop (warp 0)     ", q([r[5] - r[3] for r in w0]))
    print("  loop (last warp)  ", q([r[5] - r[3] for r in wl]))
    print("  combine + store   ", q([r[6] - r[5] for r in w0]))
    print("  stored (from t0)  ", q([r[6] - t0 for r in w0]))
    print("  ticket/merge      ", q([r[7] - r[6] for r in w0]))
    m = max(w0, key=lambda r: r[7] - r[6])
    print(f"  merging group: split {m[0]} gy {m[1]} merge {(m[7]-m[6])/1e3:.2f} us, ends at {(m[7]-t0)/1e3:.2f}")
