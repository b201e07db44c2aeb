# Every dependency from subprojects/ (--wrap-mode=forcefallback), built
# offline: the source tarballs come from Debian's source packages through
# apt (subprojects/fetch-debian-sources.py, the only step with network);
# meson then configures and builds in a network namespace of its own (where
# unshare can make one; else behind a proxy that refuses every connection),
# so a download would fail. OpenCL headers, ocl-icd, CLBlast, CUnit, clattn
# and its tests are built; the suites that exercise each fallback run (host:
# the loader finds PoCL; baseline: CLBlast) and the examples.
. .ci/jobs/lib.sh
B=build-ci/fallback
python3 subprojects/fetch-debian-sources.py

offline=()
if unshare -n true 2>/dev/null; then
  offline=(unshare -n)
else
  export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
fi
rm -rf "$B"
"${offline[@]}" meson setup "$B" --wrap-mode=forcefallback -Dtests=enabled -Dclblast=enabled \
  -Damd_check=disabled
"${offline[@]}" ninja -C "$B"

# the programs load the subprojects' libraries, not the system's
for lib in libOpenCL.so libclblast.so libcunit.so; do
  where=$(ldd "$B/tests/test_baseline" | grep "$lib" || true)
  echo "test_baseline: $where"
  if [[ "$where" != *"/subprojects/"* ]]; then
    echo "FAILED: $lib is not the fallback's"; failed=$((failed + 1))
  fi
done
step meson_test "$B" fallback host baseline
step ./$B/embed-example
step ./$B/embed-cxx
step ./$B/clattn run decode --batch 2 --ctx 256 --repeat 2 --baseline
exit $((failed > 0))
