/* The clattn command-line tool: dispatch to the subcommands. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char *usage =
    "usage: clattn <command> [flags]\n"
    "\n"
    "commands:\n"
    "  devices                 OpenCL devices, their clattn profile and tuning (--params)\n"
    "  run decode [flags]      split-K decode attention on synthetic data: check, time, GB/s\n"
    "  run merge [flags]       merging attention states\n"
    "  run rerope [flags]      ReRoPE windowed attention, forward and backward\n"
    "  run quant [flags]       K/V cache quantization, dequantization and append\n"
    "  tune [flags]            measure tuning values on this device, write its override file\n"

    "\n"
    "Each command takes --help. The device is --device (an index or a name substring,\n"
    "see `clattn devices`), else $CLATTN_DEVICE, else the first GPU.\n"
    "\n"
    "  clattn --version        print the version\n";

static int run(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } ops[] = {
      {"decode", cli_run_decode},
      {"merge", cli_run_merge},
      {"rerope", cli_run_rerope},
      {"quant", cli_run_quant},
  };
  if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
    fprintf(argc < 1 ? stderr : stdout,
            "usage: clattn run decode|merge|rerope|quant [flags] (each takes --help)\n");
    return argc < 1 ? 2 : 0;
  }
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(argv[0], ops[i].name) == 0) return ops[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "clattn run: unknown operation '%s' (decode, merge, rerope, quant)\n", argv[0]);
  return 2;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* report lines interleave with stderr in logs */
  if (argc < 2) {
    fprintf(stderr, "%s", usage);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    printf("%s", usage);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("clattn %d.%d.%d\n", CLATTN_VERSION_MAJOR, CLATTN_VERSION_MINOR, CLATTN_VERSION_PATCH);
    return 0;
  }
  if (strcmp(cmd, "devices") == 0) return cli_devices(argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return run(argc - 2, argv + 2);
  if (strcmp(cmd, "tune") == 0) return cli_tune(argc - 2, argv + 2);
  fprintf(stderr, "clattn: unknown command '%s' (see clattn --help)\n", cmd);
  return 2;
}
