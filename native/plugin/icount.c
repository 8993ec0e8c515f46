/* edgekit's instruction-counting plugin for qemu-user (TCG plugin API version 1,
 * QEMU 7.2): counts the guest instructions executed between the markers of
 * markers.h, by class (decode.h), and writes every marked region's counts as
 * JSON when the guest exits.
 *
 *   qemu-aarch64 -plugin libedgekit_icount.so,out=COUNTS.json ... edgekit-lite-run ...
 *
 * Counting is always on, as inline 64-bit adds (no helper calls): a block adds
 * its per-class totals when it starts, except blocks holding a marker, which
 * add per instruction so that the region starts and ends exactly at the marker.
 * A marker's callback snapshots the counters: the region is the difference, so
 * nested regions each get their own figure. Markers themselves are not counted.
 * The counters are not atomic: a guest running several threads gets inexact
 * counts (the JSON says how many vCPUs ran).
 *
 * With profile=N the plugin also profiles region N (the N-th begin marker, from
 * 0): every translated block gets its own execution counter (one more inline
 * add; blocks holding a marker get one per instruction, as the classes do), the
 * counters are snapshot at that region's begin and end, and the JSON lists each
 * block that ran inside it: guest address, one class letter per instruction
 * (s simd_fp, d dot product, l load_store, b branch, o other) and executions.
 * The blocks' instructions add up to the region's total exactly; which function
 * an address is in is the reader's business (edgekit/verify/profile.py).
 *
 * With op_enter=ADDR and op_exit=ADDR (repeatable) as well, the profile is split
 * by op of Lite's runtime program (segments.h): ADDR are guest addresses of
 * KernelBase::Launch's entry and of the return points of its call sites (the
 * reader resolves them from the unstripped library and its load address). The
 * blocks holding them are counted per instruction, like marker blocks, so the
 * split is exact; the JSON lists (segment, block, executions) triples. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "markers.h"
#include "qemu_plugin_api.h"
#include "segments.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_DEPTH 64
#define MAX_OP_EXITS 16

enum { SLOT_DOT = IC_CLASSES, SLOTS };

typedef struct {
  uint64_t count[SLOTS];
  int depth;
} region;

/* One translated block (or one instruction of a block holding a marker) for the profile. */
typedef struct {
  uint64_t count; /* executions since start (inline add) */
  uint64_t base;  /* count when the profiled region began (0 for blocks translated later) */
  uint64_t delta; /* executions inside the profiled region */
  uint64_t mark;  /* count when the current op segment began */
  uint64_t pc;
  uint32_t n;
  char classes[]; /* one letter per instruction, NUL-terminated */
} block;

static struct {
  uint64_t counter[SLOTS]; /* since start; the regions are differences */
  uint64_t open[MAX_DEPTH][SLOTS];
  int depth;
  region *done;
  size_t done_count, done_capacity;
  uint64_t unmatched_ends, too_deep;
  unsigned vcpus;
  int a64;
  char target[32];
  const char *out;
  long profile_region; /* -1: no profile */
  uint64_t begins;     /* begin markers seen */
  int profile_state;   /* 0 not yet, 1 open, 2 done */
  int profile_depth;
  block **blocks;
  size_t block_count, block_capacity, profiled_blocks;
  uint64_t lost_blocks;
  int op_boundaries;   /* op_enter given: split the profile by op */
  uint64_t op_enter;   /* KernelBase::Launch's entry */
  uint64_t op_exit[MAX_OP_EXITS];
  int op_exits;
  ic_segments segments;
} state = {.profile_region = -1};

/* Every block's executions since the last flush, into the current op segment. */
static void flush_segment(void) {
  for (size_t i = 0; i < state.block_count; ++i) {
    block *b = state.blocks[i];
    ic_segments_add(&state.segments, (uint32_t)i, b->count - b->mark);
    b->mark = b->count;
  }
}

static void on_op_enter(unsigned int vcpu, void *unused) {
  (void)vcpu;
  (void)unused;
  if (state.profile_state == 1) ic_segments_enter(&state.segments);
}

static void on_op_exit(unsigned int vcpu, void *unused) {
  (void)vcpu;
  (void)unused;
  if (state.profile_state == 1 && ic_segments_exit(&state.segments)) {
    flush_segment();
    ic_segments_next(&state.segments);
  }
}

enum boundary { NO_BOUNDARY, OP_ENTER, OP_EXIT };

static enum boundary boundary_at(uint64_t vaddr) {
  if (!state.op_boundaries) return NO_BOUNDARY;
  if (vaddr == state.op_enter) return OP_ENTER;
  for (int i = 0; i < state.op_exits; ++i) {
    if (vaddr == state.op_exit[i]) return OP_EXIT;
  }
  return NO_BOUNDARY;
}

static block *new_block(uint64_t pc, size_t n) {
  if (state.block_count == state.block_capacity) {
    const size_t grown = state.block_capacity ? state.block_capacity * 2 : 4096;
    block **more = realloc(state.blocks, grown * sizeof *more);
    if (more == NULL) return NULL;
    state.blocks = more;
    state.block_capacity = grown;
  }
  block *b = calloc(1, sizeof *b + n + 1);
  if (b == NULL) return NULL;
  b->pc = pc;
  b->n = (uint32_t)n;
  state.blocks[state.block_count++] = b;
  return b;
}

static char class_letter(ic_kind k) {
  if (k.dot_product) return 'd';
  static const char letters[IC_CLASSES] = {'s', 'l', 'b', 'o'};
  return letters[k.cls];
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu) {
  (void)id;
  (void)vcpu;
  ++state.vcpus;
}

static void on_begin(unsigned int vcpu, void *unused) {
  (void)vcpu;
  (void)unused;
  if (state.depth >= MAX_DEPTH) {
    ++state.too_deep;
    return;
  }
  if (state.profile_state == 0 && state.begins == (uint64_t)state.profile_region) {
    for (size_t i = 0; i < state.block_count; ++i) state.blocks[i]->base = state.blocks[i]->mark = state.blocks[i]->count;
    ic_segments_reset(&state.segments);
    state.profile_state = 1;
    state.profile_depth = state.depth;
  }
  ++state.begins;
  memcpy(state.open[state.depth++], state.counter, sizeof state.counter);
}

static void on_end(unsigned int vcpu, void *unused) {
  (void)vcpu;
  (void)unused;
  if (state.depth == 0) {
    ++state.unmatched_ends;
    return;
  }
  --state.depth;
  if (state.profile_state == 1 && state.depth == state.profile_depth) {
    if (state.op_boundaries) flush_segment(); /* the tail: after the last op */
    for (size_t i = 0; i < state.block_count; ++i) state.blocks[i]->delta = state.blocks[i]->count - state.blocks[i]->base;
    state.profiled_blocks = state.block_count;
    state.profile_state = 2;
  }
  if (state.done_count == state.done_capacity) {
    const size_t grown = state.done_capacity ? state.done_capacity * 2 : 64;
    region *more = realloc(state.done, grown * sizeof *more);
    if (more == NULL) {
      ++state.too_deep;
      return;
    }
    state.done = more;
    state.done_capacity = grown;
  }
  region *r = &state.done[state.done_count++];
  for (int s = 0; s < SLOTS; ++s) r->count[s] = state.counter[s] - state.open[state.depth][s];
  r->depth = state.depth;
}

static uint32_t word_of(const struct qemu_plugin_insn *insn, size_t *size) {
  uint32_t w = 0;
  *size = qemu_plugin_insn_size(insn);
  memcpy(&w, qemu_plugin_insn_data(insn), *size < sizeof w ? *size : sizeof w);
  return w;
}

static ic_kind classify(struct qemu_plugin_insn *insn, uint32_t word) {
  if (state.a64) return ic_classify_a64(word);
  char *text = qemu_plugin_insn_disas(insn);
  const ic_kind k = ic_classify_arm_text(text);
  free(text);
  return k;
}

static enum ic_marker marker_of(uint32_t word, size_t size) {
  if (size != 4) return IC_NO_MARKER;
  return state.a64 ? ic_marker_a64(word) : ic_marker_arm(word);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  const size_t n = qemu_plugin_tb_n_insns(tb);
  uint64_t per_class[SLOTS] = {0};
  int has_marker = 0; /* or an op boundary: either way the block is counted per instruction */
  const int profiling = state.profile_region >= 0;
  block *whole = NULL;
  for (size_t i = 0; i < n && !has_marker; ++i) {
    size_t size;
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    const uint32_t w = word_of(insn, &size);
    has_marker = marker_of(w, size) != IC_NO_MARKER || boundary_at(qemu_plugin_insn_vaddr(insn)) != NO_BOUNDARY;
  }
  if (profiling && !has_marker && (whole = new_block(qemu_plugin_tb_vaddr(tb), n)) == NULL) ++state.lost_blocks;
  for (size_t i = 0; i < n; ++i) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    size_t size;
    const uint32_t w = word_of(insn, &size);
    const enum ic_marker m = marker_of(w, size);
    if (m != IC_NO_MARKER) {
      qemu_plugin_register_vcpu_insn_exec_cb(insn, m == IC_BEGIN ? on_begin : on_end, QEMU_PLUGIN_CB_NO_REGS, NULL);
      continue;
    }
    const ic_kind k = classify(insn, w);
    const enum boundary edge = boundary_at(qemu_plugin_insn_vaddr(insn));
    if (edge != NO_BOUNDARY) { /* before the instruction's own counts: it belongs to the segment it starts */
      qemu_plugin_register_vcpu_insn_exec_cb(insn, edge == OP_ENTER ? on_op_enter : on_op_exit,
                                             QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
    if (profiling && has_marker) {
      block *one = new_block(qemu_plugin_insn_vaddr(insn), 1);
      if (one == NULL) {
        ++state.lost_blocks;
      } else {
        one->classes[0] = class_letter(k);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &one->count, 1);
      }
    } else if (whole != NULL) {
      whole->classes[i] = class_letter(k);
    }
    if (has_marker) {
      qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &state.counter[k.cls], 1);
      if (k.dot_product) qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64,
                                                                    &state.counter[SLOT_DOT], 1);
    } else {
      per_class[k.cls] += 1;
      per_class[SLOT_DOT] += (uint64_t)k.dot_product;
    }
  }
  if (whole != NULL) qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &whole->count, 1);
  for (int s = 0; s < SLOTS; ++s) {
    if (per_class[s]) qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &state.counter[s],
                                                               per_class[s]);
  }
}

static void write_counts(FILE *f) {
  fprintf(f, "{\n  \"schema\": \"edgekit.icount/1\",\n  \"target\": \"%s\",\n", state.target);
  fprintf(f, "  \"classifier\": \"%s\",\n", state.a64 ? "encoding" : "disassembly");
  fprintf(f, "  \"markers\": {\"begin\": \"hint #%d\", \"end\": \"hint #%d\"},\n", EDGEKIT_ICOUNT_BEGIN,
          EDGEKIT_ICOUNT_END);
  fprintf(f, "  \"vcpus\": %u,\n  \"open_regions\": %d,\n  \"unmatched_ends\": %llu,\n  \"dropped_regions\": %llu,\n",
          state.vcpus, state.depth, (unsigned long long)state.unmatched_ends, (unsigned long long)state.too_deep);
  fprintf(f, "  \"regions\": [");
  for (size_t i = 0; i < state.done_count; ++i) {
    const region *r = &state.done[i];
    uint64_t total = 0;
    for (int c = 0; c < IC_CLASSES; ++c) total += r->count[c];
    fprintf(f, "%s\n    {\"depth\": %d, \"total\": %llu", i ? "," : "", r->depth, (unsigned long long)total);
    for (int c = 0; c < IC_CLASSES; ++c) fprintf(f, ", \"%s\": %llu", ic_class_names[c], (unsigned long long)r->count[c]);
    fprintf(f, ", \"dot_product\": %llu}", (unsigned long long)r->count[SLOT_DOT]);
  }
  fprintf(f, "%s]", state.done_count ? "\n  " : "");
  if (state.profile_region >= 0) {
    fprintf(f, ",\n  \"profile\": {\"region\": %ld, \"complete\": %s, \"lost_blocks\": %llu, \"blocks\": [",
            state.profile_region, state.profile_state == 2 ? "true" : "false", (unsigned long long)state.lost_blocks);
    size_t written = 0;
    /* the position of each block in the written list, for the op segments */
    uint32_t *position = state.op_boundaries ? calloc(state.profiled_blocks + 1, sizeof *position) : NULL;
    for (size_t i = 0; i < state.profiled_blocks; ++i) {
      const block *b = state.blocks[i];
      if (b->delta == 0) continue;
      if (position != NULL) position[i] = (uint32_t)written;
      fprintf(f, "%s\n    [%llu, \"%s\", %llu]", written++ ? "," : "", (unsigned long long)b->pc, b->classes,
              (unsigned long long)b->delta);
    }
    fprintf(f, "%s]", written ? "\n  " : "");
    if (state.op_boundaries) {
      const ic_segments *s = &state.segments;
      fprintf(f, ",\n  \"ops\": {\"enter\": %llu, \"exits\": [", (unsigned long long)state.op_enter);
      for (int i = 0; i < state.op_exits; ++i) fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)state.op_exit[i]);
      fprintf(f, "], \"segments\": %llu, \"entered\": %llu, \"open\": %d, \"unmatched_exits\": %llu, "
              "\"lost\": %llu, \"runs\": [", (unsigned long long)s->segment + 1, (unsigned long long)s->entered,
              s->depth, (unsigned long long)s->unmatched,
              (unsigned long long)(s->lost + (position == NULL && state.profiled_blocks ? 1 : 0)));
      for (size_t i = 0; position != NULL && i < s->count; ++i) {
        const ic_seg_entry *e = &s->entries[i];
        fprintf(f, "%s\n    [%u, %u, %llu]", i ? "," : "", e->segment, position[e->block], (unsigned long long)e->runs);
      }
      fprintf(f, "%s]}", s->count ? "\n  " : "");
      free(position);
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n}\n");
}

/* Written beside the target and renamed, so a reader never sees half a file. */
static void on_exit_guest(qemu_plugin_id_t id, void *unused) {
  (void)id;
  (void)unused;
  const size_t length = strlen(state.out) + 16;
  char *partial = malloc(length);
  if (partial == NULL) return;
  snprintf(partial, length, "%s.partial", state.out);
  FILE *f = fopen(partial, "w");
  if (f != NULL) {
    write_counts(f);
    if (fclose(f) == 0) rename(partial, state.out);
  }
  if (f == NULL) fprintf(stderr, "edgekit icount: cannot write %s\n", partial);
  free(partial);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
  for (int i = 0; i < argc; ++i) {
    if (strncmp(argv[i], "out=", 4) == 0 && argv[i][4] != '\0') {
      state.out = argv[i] + 4; /* argv lives as long as the plugin */
    } else if (strncmp(argv[i], "profile=", 8) == 0 && argv[i][8] >= '0' && argv[i][8] <= '9') {
      char *end = NULL;
      state.profile_region = strtol(argv[i] + 8, &end, 10);
      if (*end != '\0' || state.profile_region < 0) {
        fprintf(stderr, "edgekit icount: profile= takes a region index (0, 1, ...), not '%s'\n", argv[i] + 8);
        return 1;
      }
    } else if (strncmp(argv[i], "op_enter=", 9) == 0 || strncmp(argv[i], "op_exit=", 8) == 0) {
      const int enter = argv[i][3] == 'e' && argv[i][4] == 'n';
      const char *text = strchr(argv[i], '=') + 1;
      char *end = NULL;
      const unsigned long long address = strtoull(text, &end, 0);
      if (*text == '\0' || *end != '\0' || address == 0) {
        fprintf(stderr, "edgekit icount: %s takes a guest address (0x...), not '%s'\n", enter ? "op_enter" : "op_exit",
                text);
        return 1;
      }
      if (enter) {
        state.op_enter = address;
        state.op_boundaries = 1;
      } else if (state.op_exits == MAX_OP_EXITS) {
        fprintf(stderr, "edgekit icount: more than %d op_exit addresses\n", MAX_OP_EXITS);
        return 1;
      } else {
        state.op_exit[state.op_exits++] = address;
      }
    } else {
      fprintf(stderr, "edgekit icount: unknown argument '%s' (arguments: out=FILE.json, profile=REGION, "
              "op_enter=ADDR, op_exit=ADDR)\n", argv[i]);
      return 1;
    }
  }
  if (state.op_boundaries && (state.profile_region < 0 || state.op_exits == 0)) {
    fprintf(stderr, "edgekit icount: op_enter= needs profile=REGION and at least one op_exit=ADDR\n");
    return 1;
  }
  if (state.out == NULL) {
    fprintf(stderr, "edgekit icount: no output file: load it as -plugin libedgekit_icount.so,out=FILE.json\n");
    return 1;
  }
  if (info->system_emulation) {
    fprintf(stderr, "edgekit icount: counts user-mode guests only (qemu-aarch64, qemu-arm)\n");
    return 1;
  }
  snprintf(state.target, sizeof state.target, "%s", info->target_name ? info->target_name : "unknown");
  state.a64 = strcmp(state.target, "aarch64") == 0;
  if (!state.a64 && strcmp(state.target, "arm") != 0) {
    fprintf(stderr, "edgekit icount: guest '%s' is neither aarch64 nor arm\n", state.target);
    return 1;
  }
  qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, on_exit_guest, NULL);
  return 0;
}
