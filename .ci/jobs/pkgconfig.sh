# clattn installed to a prefix, shared and then static, and embed.c (as C
# and as C++) and examples/embed_cxx.cpp built against it with pkg-config
# alone: no include or library path but what `pkg-config clattn` prints.
. .ci/jobs/lib.sh
D=$PWD/build-ci/pkgconfig
rm -rf "$D"
# one build: the objects are the same for both kinds, only the link differs
meson setup "$D/build" -Dtests=disabled -Dexamples=disabled --libdir=lib

for kind in shared static; do
  P=$D/prefix-$kind
  meson configure "$D/build" -Ddefault_library=$kind --prefix="$P"
  meson install -C "$D/build" --quiet
  export PKG_CONFIG_PATH=$P/lib/pkgconfig
  static=()
  [ $kind = static ] && static=(--static)
  flags=$(pkg-config "${static[@]}" --cflags --libs clattn)
  echo "$kind: pkg-config ${static[*]} --cflags --libs clattn: $flags"
  step cc -std=c11 -Wall -Wextra -Werror -o "$D/embed-c-$kind" examples/embed.c $flags
  step c++ -x c++ -std=c++11 -Wall -Werror -o "$D/embed-as-cxx-$kind" examples/embed.c $flags
  step c++ -std=c++11 -Wall -Wextra -Werror -o "$D/embed-cxx-$kind" examples/embed_cxx.cpp $flags

  # shared: the programs load the prefix's libclattn.so; static: none at all
  for exe in embed-c embed-as-cxx embed-cxx; do
    [ -x "$D/$exe-$kind" ] || continue
    uses=$(LD_LIBRARY_PATH=$P/lib ldd "$D/$exe-$kind" | grep libclattn || true)
    echo "$exe-$kind: ${uses:-no libclattn.so}"
    if [ $kind = shared ] && [[ "$uses" != *"$P/lib/libclattn.so"* ]]; then
      echo "FAILED: $exe-$kind does not load $P/lib/libclattn.so"; failed=$((failed + 1))
    fi
    if [ $kind = static ] && [ -n "$uses" ]; then
      echo "FAILED: $exe-$kind loads a libclattn.so"; failed=$((failed + 1))
    fi
    step env LD_LIBRARY_PATH="$P/lib" "$D/$exe-$kind"
  done
  # the library that runs says the version that pkg-config says
  got=$(LD_LIBRARY_PATH=$P/lib "$D/embed-cxx-$kind" | sed -n 's/^clattn \([^ ]*\) .*/\1/p' || true)
  want=$(pkg-config --modversion clattn)
  echo "clattn_version() $got, pkg-config --modversion $want"
  if [ "$got" != "$want" ]; then echo "FAILED: versions differ"; failed=$((failed + 1)); fi
done
exit $((failed > 0))
