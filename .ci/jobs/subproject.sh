# .ci/consumer/, a separate tiny Meson project, uses clattn as a subproject
# (its subprojects/clattn is a link to this tree), with static and with
# shared libraries: it builds and its test runs; its program links clattn
# the way default_library says; clattn adds no tests or CLI of its own; and
# an install puts nothing of clattn's but (when shared) the library.
. .ci/jobs/lib.sh
D=$PWD/build-ci/subproject
rm -rf "$D"
mkdir -p "$D/consumer/subprojects"
cp .ci/consumer/meson.build .ci/consumer/consumer.c "$D/consumer/"
ln -s "$PWD" "$D/consumer/subprojects/clattn"

for kind in static shared; do
  B=$D/build-$kind
  meson setup "$B" "$D/consumer" --force-fallback-for=clattn -Ddefault_library=$kind --prefix=/usr --libdir=lib
  ninja -C "$B"
  step meson_test "$B" "subproject-$kind"

  uses=$(ldd "$B/consumer" | grep libclattn || true)
  echo "consumer ($kind): ${uses:-no libclattn.so}"
  if { [ $kind = static ] && [ -n "$uses" ]; } || { [ $kind = shared ] && [ -z "$uses" ]; }; then
    echo "FAILED: the $kind consumer links clattn the other way"; failed=$((failed + 1))
  fi

  # what the consumer's build holds of clattn: the library, no CLI, no tests
  extra=$(meson introspect --targets "$B" | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if t["subproject"] == "clattn" and t["type"] == "executable":
        print(t["name"])')
  tests=$(meson introspect --tests "$B" | python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
  echo "clattn executables in the consumer's build: ${extra:-none}; tests: $tests"
  if [ -n "$extra" ] || [ "$tests" != consumer ]; then
    echo "FAILED: clattn brought its CLI or tests into the consumer"; failed=$((failed + 1))
  fi

  # an install: the consumer's program and, with shared libraries, libclattn.so
  DESTDIR="$D/dest-$kind" meson install -C "$B" --quiet
  got=$(cd "$D/dest-$kind" && find . ! -type d | sort | tr '\n' ' ')
  want="./usr/bin/consumer "
  [ $kind = shared ] && want+="./usr/lib/libclattn.so ./usr/lib/libclattn.so.0 ./usr/lib/libclattn.so.0.1.0 "
  echo "installed: $got"
  if [ "$got" != "$want" ]; then echo "FAILED: expected $want"; failed=$((failed + 1)); fi
done
exit $((failed > 0))
