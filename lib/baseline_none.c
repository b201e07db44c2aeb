/* The unfused reference when the library is built without CLBlast: the
 * entry point exists so callers link either way, and says why it cannot run. */
#include "internal.h"

clattn_status clattn_reference_decode(clattn_context *ctx, cl_command_queue queue,
                                      const clattn_decode_params *params, cl_uint num_wait,
                                      const cl_event *wait_list, cl_event *event) {
  (void)ctx, (void)queue, (void)params, (void)num_wait, (void)wait_list, (void)event;
  return clattn_fail(CLATTN_UNSUPPORTED,
                     "clattn_reference_decode: this clattn was built without CLBlast "
                     "(install libclblast-dev and reconfigure with -Dclblast=enabled)");
}

/* Without CLBlast nothing holds on to the context. */
void clattn_baseline_context_release(clattn_context *ctx) { (void)ctx; }

/* Its kernels are only used with CLBlast. */
void clattn_baseline_variants(clattn_variant_fn fn, void *priv) { (void)fn, (void)priv; }

int64_t clattn_baseline_stage_limit = (int64_t)1 << 28;
