# On the GPU (device tool): `clattn run decode --check` for each line of stdin,
# "ENV=VALUE[,ENV=VALUE] flags..." (environment assignments, CLATTN_X=0 for none, then
# `clattn run decode` flags; Hq=32 Hkv=8 unless they say), printing the kernel
# form that ran and the check's verdict. Used by tools/gpu_session33.sh matrix
# and tools/gpu_session34.sh check.
C=${C:-./build-gpubin/new/clattn}
while read -r e s; do
  [ -z "$s" ] && continue
  echo "== $e $s: $(env $(echo $e | tr , " ") timeout 60 $C run decode --heads 32 --kv-heads 8 --repeat 1 --check $s 2>&1 |
    grep -E '^kernel:|^check:|out of tol|rror' | tr '\n' ' ')"
done
