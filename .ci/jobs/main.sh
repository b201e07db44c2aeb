# The README's build and test command (the suites, every one on PoCL),
# then the main job and the embedding examples, with the kernels embedded
# in the binaries.
. .ci/jobs/lib.sh
main_build
./$MAIN/clattn devices

step meson_test "$MAIN" main
step ./$MAIN/clattn run decode --batch 2 --ctx 1024 --repeat 3 --baseline
step ./$MAIN/clattn run decode --batch 3 --ctx 300 --q-len 3 --causal --varlen --paged --lse --repeat 2
step ./$MAIN/embed-example
step ./$MAIN/embed-example-as-cxx
step ./$MAIN/embed-cxx
exit $((failed > 0))
