/* Suite amd: every kernel variant compiles offline for AMD GPUs.
 *
 * No AMD GPU is at hand, so each (kernel file, options) variant that the
 * families enumerate (clattn_*_variants) is expanded like the runtime does
 * (clattn_source_load) and compiled with clang for amdgcn-amd-amdhsa, with
 * the feature macros an AMD device gets from its profile. Targets:
 *   $CLATTN_CLANG   (clang 14+): gfx90a (CDNA2, wave64), gfx1030 (RDNA2, wave32)
 *   $CLATTN_CLANG16 (clang 16):  gfx942 (CDNA3, wave64), gfx1100 (RDNA3, wave32)
 * (Debian's clang 16 knows CDNA3 only as gfx940, MI300's first target ID:
 * where it rejects gfx942, gfx940 stands in for it.)
 * Meson sets both from find_program; under CI=true a missing clang fails.
 * gfx90a and gfx1100 (one wave64 and one wave32 architecture) are compiled
 * at the optimisation the AMD runtime uses; gfx1030 and gfx942 at -O0,
 * which still runs each target's instruction selection (where a builtin or
 * construct a target lacks fails) at a sixth of the cost: the backend's
 * optimisations are where the time goes, not where target errors show.
 * Compiles run $CLATTN_AMD_JOBS (default 4, at most the CPU count) at a time.
 * The same variants are also parsed for nvptx64 with an sm_90 profile's
 * macros (CLATTN_NV_PTX=1): the NVIDIA paths' code (inline PTX, its
 * operand constraints, the helpers beside it) that PoCL never builds; the
 * H200's decode suite once failed on a helper defined only beside the
 * portable codecs. */
#include "common.h"
#include "part.h"
#include "internal.h"

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The NVIDIA "target": sm_90's feature macros on nvptx64 (run_target) */
#define NV_TARGET "nvptx64 sm_90"

typedef struct variant {
  char *file, *options;
} variant;

static variant *vars;
static size_t nvars, cap_vars;
static char tmpdir[256];

static void collect(void *priv, const char *file, const char *options) {
  (void)priv;
  if (nvars == cap_vars) {
    cap_vars = cap_vars ? cap_vars * 2 : 64;
    vars = realloc(vars, cap_vars * sizeof *vars);
  }
  vars[nvars].file = strdup(file);
  vars[nvars].options = strdup(options);
  nvars++;
}

/* Every family that has kernels; a new family adds its line here. */
static void collect_all(void) {
  clattn_decode_variants(collect, NULL);
  clattn_kvcache_variants(collect, NULL);
  clattn_merge_variants(collect, NULL);
  clattn_rerope_variants(collect, NULL);
  clattn_baseline_variants(collect, NULL);
}

/* The expanded source of `file` in tmpdir (written once). */
static bool source_path(const char *file, char *path, size_t size) {
  snprintf(path, size, "%s/%s", tmpdir, file);
  if (access(path, R_OK) == 0) return true;
  char *src = NULL;
  clattn_status s = clattn_source_load(file, &src);
  if (s != CLATTN_SUCCESS) {
    fprintf(stderr, "  %s: %s\n", file, clattn_last_error());
    return false;
  }
  FILE *f = fopen(path, "w");
  bool ok = f && fputs(src, f) >= 0;
  if (f) ok &= fclose(f) == 0;
  free(src);
  return ok;
}

typedef struct job {
  pid_t pid;
  size_t variant;
  char log[300];
} job;

static int max_jobs(void) {
  const char *env = getenv("CLATTN_AMD_JOBS");
  int n = env ? atoi(env) : 4;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (!env && cpus > 0 && n > cpus) n = (int)cpus;
  return n < 1 ? 1 : n > 64 ? 64 : n;
}

static void print_log(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  fprintf(stderr, "%s%s\n", buf, n == sizeof buf - 1 ? "\n  [log cut]" : "");
}

/* Collects one finished job; returns false if its compile failed. */
static bool reap(job *jobs, int *njobs, const char *cpu) {
  int status = 0;
  pid_t pid = waitpid(-1, &status, 0);
  for (int i = 0; i < *njobs; i++) {
    if (jobs[i].pid != pid) continue;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      const variant *v = &vars[jobs[i].variant];
      fprintf(stderr, "\n  FAILED %s: %s [%s]\n", cpu, v->file, v->options);
      print_log(jobs[i].log);
    }
    remove(jobs[i].log);
    jobs[i] = jobs[--*njobs];
    return ok;
  }
  return true;
}

/* Compiles every variant for one target; the number of failures. */
static size_t compile_all(const char *clang, const char *cpu, int simd, bool optimize) {
  job jobs[64];
  int njobs = 0;
  const int limit = max_jobs();
  size_t failed = 0;
  for (size_t i = 0; i < nvars; i++) {
    char src[512];
    if (!source_path(vars[i].file, src, sizeof src)) {
      failed++;
      continue;
    }
    while (njobs >= limit)
      if (!reap(jobs, &njobs, cpu)) failed++;
    char mcpu[64], simd_def[64];
    snprintf(mcpu, sizeof mcpu, "-mcpu=%s", cpu);
    snprintf(simd_def, sizeof simd_def, "-DCLATTN_SIMD=%d", simd);
    /* the runtime's options: -cl-std=CL1.2, the variant's, then the feature
     * macros (an AMD profile's, or an sm_90 one's with the inline PTX on:
     * parsed and checked, not assembled, as there is no NVPTX builtin
     * library or ptxas here; see tools/check_nvptx.py for that) */
    const bool nv = strcmp(cpu, NV_TARGET) == 0;
    const char *common[] = {clang, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header",
                            "-DCLATTN_FP64=1"};
    const char *amd[] = {"-nogpulib", "-target", "amdgcn-amd-amdhsa", mcpu, "-DCLATTN_AMD=1", "-DCLATTN_F32_DENORM=1",
                         simd_def, "-DCLATTN_NV_PTX=0", optimize ? "-O2" : "-O0"};
    const char *nvptx[] = {"-target", "nvptx64-nvidia-nvcl", "-Xclang", "-target-cpu", "-Xclang", "sm_90",
                           "-Xclang", "-cl-ext=+cl_khr_int64_base_atomics", "-Xclang",
                           "-cl-ext=+cl_khr_int64_extended_atomics", "-Dasm=__asm__",
                           "-DCLATTN_AMD=0", "-DCLATTN_SIMD=32", "-DCLATTN_NV_PTX=1", "-DCLATTN_NV_SM=90",
                           "-DCLATTN_NV_WGMMA=1", "-fsyntax-only"};
    const char **own = nv ? nvptx : amd;
    const size_t nown = nv ? sizeof nvptx / sizeof nvptx[0] : sizeof amd / sizeof amd[0];
    char *opts = strdup(vars[i].options);
    char *argv[128];
    size_t argc = 0;
    for (size_t j = 0; j < sizeof common / sizeof common[0]; j++) argv[argc++] = (char *)common[j];
    for (size_t j = 0; j < nown; j++) argv[argc++] = (char *)own[j];
    for (char *t = strtok(opts, " "); t && argc < 120; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc++] = "-c";
    argv[argc++] = "-o";
    argv[argc++] = "/dev/null";
    argv[argc++] = src;
    argv[argc] = NULL;

    job *jb = &jobs[njobs];
    jb->variant = i;
    snprintf(jb->log, sizeof jb->log, "%s/log-%zu.txt", tmpdir, i);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, jb->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    int err = posix_spawn(&jb->pid, clang, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(opts);
    if (err != 0) {
      fprintf(stderr, "  cannot run %s: %s\n", clang, strerror(err));
      failed++;
      continue;
    }
    njobs++;
  }
  while (njobs > 0)
    if (!reap(jobs, &njobs, cpu)) failed++;
  return failed;
}

/* Whether clang knows the target (an empty kernel compiles). */
static bool knows_target(const char *clang, const char *cpu) {
  char src[512], mcpu[64];
  snprintf(src, sizeof src, "%s/empty.cl", tmpdir);
  FILE *f = fopen(src, "w");
  if (!f) return false;
  fputs("__kernel void empty(void) {}\n", f);
  fclose(f);
  snprintf(mcpu, sizeof mcpu, "-mcpu=%s", cpu);
  char *argv[] = {(char *)clang, "-x", "cl", "-cl-std=CL1.2", "-nogpulib", "-target",
                  "amdgcn-amd-amdhsa", mcpu, "-c", "-o", "/dev/null", src, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int status = 1;
  if (posix_spawn(&pid, clang, &fa, NULL, argv, environ) == 0) waitpid(pid, &status, 0);
  posix_spawn_file_actions_destroy(&fa);
  remove(src);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void run_target(const char *env, const char *cpu, int simd, bool optimize) {
  const char *clang = getenv(env);
  if (!clang || !*clang) {
    fprintf(stderr, "  $%s is not set: no clang to compile for %s\n", env, cpu);
    CU_FAIL("clang missing");
    return;
  }
  if (strcmp(cpu, "gfx942") == 0 && !knows_target(clang, cpu)) {
    fprintf(stderr, "  %s does not know gfx942: compiling for gfx940 (CDNA3) instead\n", clang);
    cpu = "gfx940";
  }
  size_t failed = compile_all(clang, cpu, simd, optimize);
  if (strcmp(cpu, NV_TARGET) == 0)
    fprintf(stderr, "  %s: %zu of %zu variants parsed (-fsyntax-only)\n", cpu, nvars - failed, nvars);
  else
    fprintf(stderr, "  %s: %zu of %zu variants compiled (%s)\n", cpu, nvars - failed, nvars,
            optimize ? "-O2" : "-O0");
  CU_ASSERT_EQUAL(failed, 0);
}

static void test_variants(void) {
  /* each family enumerates something, and every file it names exists */
  CU_ASSERT(nvars > 0);
  for (size_t i = 0; i < nvars; i++) {
    char path[512];
    CU_ASSERT(source_path(vars[i].file, path, sizeof path));
  }
  fprintf(stderr, "  %zu variants\n", nvars);
}
static void test_gfx90a(void) { run_target("CLATTN_CLANG", "gfx90a", 64, true); }
static void test_gfx1030(void) { run_target("CLATTN_CLANG", "gfx1030", 32, false); }
static void test_gfx942(void) { run_target("CLATTN_CLANG16", "gfx942", 64, false); }
static void test_gfx1100(void) { run_target("CLATTN_CLANG16", "gfx1100", 32, true); }
static void test_nvptx(void) { run_target("CLATTN_CLANG16", NV_TARGET, 32, false); }

static int suite_init(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/clattn-amd-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(tmpdir)) return 1;
  collect_all();
  return 0;
}

static int suite_cleanup(void) {
  for (size_t i = 0; i < nvars; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, vars[i].file);
    remove(path);
    free(vars[i].file);
    free(vars[i].options);
  }
  free(vars);
  rmdir(tmpdir);
  return 0;
}

int main(int argc, char **argv) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("amd", suite_init, suite_cleanup);
  CU_add_test(s, "variants enumerated", test_variants);
  CU_add_test(s, "compile gfx90a (CDNA2, wave64)", test_gfx90a);
  CU_add_test(s, "compile gfx1030 (RDNA2, wave32)", test_gfx1030);
  /* clang 16 targets: required in CI (.ci/run installs clang-16); elsewhere
   * they run when meson found clang-16 */
  const char *c16 = getenv("CLATTN_CLANG16");
  const char *ci = getenv("CI");
  if ((c16 && *c16) || (ci && strcmp(ci, "true") == 0)) {
    CU_add_test(s, "compile gfx942 (CDNA3, wave64)", test_gfx942);
    CU_add_test(s, "compile gfx1100 (RDNA3, wave32)", test_gfx1100);
    CU_add_test(s, "parse for nvptx64 with sm_90's inline PTX (CLATTN_NV_PTX=1)", test_nvptx);
  } else {
    fprintf(stderr, "note: clang-16 not found: gfx942, gfx1100 and nvptx64 are not compiled\n");
  }
  if (!select_part(argc, argv)) return 1; /* tests/part.h */
  return run_suites();
}
