# Suite amd-full: every kernel variant compiled for AMD's gfx90a (CDNA2,
# wave64) and gfx1100 (RDNA3, wave32) at -O2, as the AMD runtime compiles,
# and gfx942 (CDNA3) at -O0 (the README's test command compiles gfx1030 at -O0).
# In the main build (set up by the main job, or here when run alone).
. .ci/jobs/lib.sh
main_build
meson_test "$MAIN" amd --suite amd-full
