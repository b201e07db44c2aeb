# Source on the lent GPU machine: registers the NVIDIA OpenCL driver with the
# ICD loader and unpacks the runtime libraries carried in .debs/ (CLBlast,
# CUnit) so build-gpu/ binaries run. Selects the NVIDIA device for clattn.
echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd
for f in .debs/*.deb; do dpkg -x "$f" /tmp/x; done
export LD_LIBRARY_PATH=/tmp/x/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CLATTN_DEVICE=${CLATTN_DEVICE:-NVIDIA}
export CLATTN_KERNEL_DIR=${CLATTN_KERNEL_DIR:-$PWD/cl}
export CLATTN_CACHE_DIR=/tmp/clattn-cache
# The session scripts' parts: `part NAME` is true when NAME is among $PARTS (their arguments).
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
# An experiment's kernel folder: tools/exp/NAME made from commit REV's cl/ with PATCH applied
# (if given), unless it exists; run where git and patch are at hand (tools/exp travels with the tree).
exp_cl() {
  [ -d tools/exp/$1 ] && return 0
  mkdir -p tools/exp/$1 && git archive $2 cl | tar -x -C tools/exp/$1 --strip-components=1 &&
    { [ -z "$3" ] || patch -s -d tools/exp/$1 -p1 < $3; }
}
