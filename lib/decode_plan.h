/* Decode's plan (lib/decode_plan.c: the variant, rows per group, split
 * count and workspace of a validated call), shared with its launch
 * (lib/decode.c). Internal to the library. */
#ifndef CLATTN_DECODE_PLAN_H
#define CLATTN_DECODE_PLAN_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct plan {
  clattn_decode_problem pr; /* the validated call */
  int rows, RB, nrb; /* query rows per KV head, rows per group, row blocks */
  int WG, S, chunk;
  bool aligned, lane_keys, kstage;
  int vuq; /* portable form, quantized V: rows in flight per work-item (-DVUQ) */
  int kq_wide; /* portable form, quantized K: 16-byte loads (1: rows at any word, 2: on 16 bytes; -DKQ_WIDE) */
  bool roles;  /* portable form: scores and values by the group's halves, a tile apart (-DROLES) */
  bool kpre;   /* portable form: the K row of the next tile loaded during this tile's values (-DKPRE) */
  char occupancy[48]; /* portable form: the device's option for decode_port_waves (clattn_occupancy_option), or "" */
  bool mma, emulate; /* the tensor-core form (cl/decode_mma.clh); its PTX emulated (tests) */
  int nblk;          /* its 16-key blocks per warp in flight */
  int stages;        /* its ring of blocks per warp for quantized rows (0: none) */
  int tokens;        /* its token-row form: KV heads per group, a warp each (0: a group per head) */
  bool whole;        /* token rows: the group's heads are all of a token's, tokens back to back */
  bool rows32;       /* 16 rows of K, V (and their scale-shift words) span < 2^31 elements */
  bool stream;       /* token rows: spans of chunk keys over all (sequence, row block) pairs' blocks */
  int64_t blocks, P; /* stream: those 16-key blocks, spans (a work-group per span and head group) */
  int merge_last;    /* splits merged in the partial kernel by each row block's last work-group
                        (1; 2: its tickets raised to the call's tag by atom_max first) */
  bool small;        /* tensor cores, float K/V, a grid of few groups: wider groups, one per unit */
  bool serial;       /* the serial form (cl/decode_serial.clh): a work-item per group, every KV head */
  size_t part_o_elems, lse_offset_bytes, ticket_offset_bytes, ws_bytes;
} plan;

static inline int64_t div_up(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Width in elements (words for packed dtypes) of one K/V row. */
static inline int64_t row_width(const clattn_decode_problem *pr) {
  if (pr->kv_q == 1) return pr->kv_groups + pr->D / 8;
  if (pr->kv_q == 2) return pr->D / 4;
  return pr->D;
}

/* Work-groups along the KV heads of a row block: one per head, or per group
 * of `tokens` heads. */
static inline int head_groups(const plan *pl) {
  return pl->serial ? 1 : pl->tokens ? pl->pr.Hkv / pl->tokens : pl->pr.Hkv;
}

/* Validates (clattn_decode_validate) and plans a call; one place decides
 * every choice. */
clattn_status clattn_decode_plan(const clattn_context *ctx, const clattn_decode_params *p, plan *pl);

/* The partial kernel's build options for a plan (split: partials, not o). */
void clattn_decode_plan_options(const plan *pl, bool split, char *buf, size_t size);

#endif
