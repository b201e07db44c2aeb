# The README's build and test command (the suites, every one on PoCL),
# then the main job, the embedding examples and every CLI mode, with the
# kernels embedded in the binaries.
. .ci/jobs/lib.sh
main_build
./$MAIN/clattn devices

step meson_test "$MAIN" main
step ./$MAIN/clattn run decode --batch 2 --ctx 1024 --repeat 3 --baseline
step ./$MAIN/clattn run decode --batch 3 --ctx 300 --q-len 3 --causal --varlen --paged --lse --repeat 2
step ./$MAIN/embed-example
step ./$MAIN/embed-example-as-cxx
step ./$MAIN/embed-cxx
# every clattn subcommand and mode on small shapes, each checked against its reference
step bash .ci/jobs/cli.sh "$MAIN"
exit $((failed > 0))
