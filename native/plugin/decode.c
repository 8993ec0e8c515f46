#include "decode.h"

#include <ctype.h>
#include <string.h>

#include "markers.h"

const char *const ic_class_names[IC_CLASSES] = {"simd_fp", "load_store", "branch", "other"};

static ic_kind kind(enum ic_class cls) {
  ic_kind k = {cls, 0};
  return k;
}

enum ic_marker ic_marker_a64(uint32_t w) {
  if (w == EDGEKIT_A64_HINT(EDGEKIT_ICOUNT_BEGIN)) return IC_BEGIN;
  if (w == EDGEKIT_A64_HINT(EDGEKIT_ICOUNT_END)) return IC_END;
  return IC_NO_MARKER;
}

enum ic_marker ic_marker_arm(uint32_t w) {
  if (w == EDGEKIT_A32_HINT(EDGEKIT_ICOUNT_BEGIN) || w == EDGEKIT_T32_HINT(EDGEKIT_ICOUNT_BEGIN)) return IC_BEGIN;
  if (w == EDGEKIT_A32_HINT(EDGEKIT_ICOUNT_END) || w == EDGEKIT_T32_HINT(EDGEKIT_ICOUNT_END)) return IC_END;
  return IC_NO_MARKER;
}

/* op0 = bits 28:25 picks the group: x111 SIMD&FP data processing, 0010 SVE,
 * x1x0 loads and stores (SIMD ones too), 101x branches, exceptions and system,
 * 100x / x101 integer data processing. */
ic_kind ic_classify_a64(uint32_t w) {
  const uint32_t op0 = (w >> 25) & 0xFu;
  if ((op0 & 0x7u) == 0x7u || op0 == 0x2u) {
    ic_kind k = kind(IC_SIMD_FP);
    k.dot_product = (w & 0x9FE0FC00u) == 0x0E809400u    /* SDOT/UDOT Vd.{2,4}S, Vn, Vm (vector) */
                    || (w & 0x9FC0F400u) == 0x0F80E000u; /* SDOT/UDOT Vd.{2,4}S, Vn, Vm.4B[i] (element) */
    return k;
  }
  if ((op0 & 0x5u) == 0x4u) return kind(IC_LOAD_STORE);
  if ((op0 & 0xEu) == 0xAu) {
    const int branch = (w & 0x7C000000u) == 0x14000000u       /* B, BL */
                       || (w & 0x7E000000u) == 0x34000000u    /* CBZ, CBNZ */
                       || (w & 0x7E000000u) == 0x36000000u    /* TBZ, TBNZ */
                       || (w & 0xFF000010u) == 0x54000000u    /* B.cond */
                       || (w & 0xFE000000u) == 0xD6000000u;   /* BR, BLR, RET (register) */
    return kind(branch ? IC_BRANCH : IC_OTHER);                /* else hints, barriers, MRS, SVC */
  }
  return kind(IC_OTHER);
}

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static int is_condition(const char *s) {
  static const char *const codes[] = {"eq", "ne", "cs", "hs", "cc", "lo", "mi", "pl", "vs",
                                      "vc", "hi", "ls", "ge", "lt", "gt", "le", "al"};
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; ++i) {
    if (strcmp(s, codes[i]) == 0) return 1;
  }
  return 0;
}

/* b, bl, bx, blx, bxj, each optionally conditional; cbz/cbnz; tbb/tbh. */
static int is_branch_mnemonic(const char *m) {
  static const char *const stems[] = {"blx", "bxj", "bl", "bx", "b"};
  if (strcmp(m, "cbz") == 0 || strcmp(m, "cbnz") == 0 || strcmp(m, "tbb") == 0 || strcmp(m, "tbh") == 0) return 1;
  for (size_t i = 0; i < sizeof stems / sizeof stems[0]; ++i) {
    const size_t n = strlen(stems[i]);
    if (strncmp(m, stems[i], n) == 0 && (m[n] == '\0' || is_condition(m + n))) return 1;
  }
  return 0;
}

/* "vadd.f32 q8, q8, q9", "pop {r4, pc}", "ldr pc, [sp], #4", "bne #0x1234". */
ic_kind ic_classify_arm_text(const char *text) {
  char mnemonic[16];
  size_t n = 0;
  if (text == NULL) return kind(IC_OTHER);
  while (*text == ' ' || *text == '\t') ++text;
  while (text[n] != '\0' && text[n] != ' ' && text[n] != '\t' && text[n] != '.' && n + 1 < sizeof mnemonic) {
    mnemonic[n] = (char)tolower((unsigned char)text[n]);
    ++n;
  }
  mnemonic[n] = '\0';
  const char *operands = text + n;
  while (*operands != '\0' && *operands != ' ' && *operands != '\t') ++operands; /* skip .w / .f32 */
  while (*operands == ' ' || *operands == '\t') ++operands;
  const int writes_pc = starts(operands, "pc,") || starts(operands, "pc ");
  if (is_branch_mnemonic(mnemonic)) return kind(IC_BRANCH);
  if (mnemonic[0] == 'v') {
    if (starts(mnemonic, "vld") || starts(mnemonic, "vst") || starts(mnemonic, "vpush") || starts(mnemonic, "vpop")) {
      return kind(IC_LOAD_STORE);
    }
    return kind(IC_SIMD_FP);
  }
  if (starts(mnemonic, "ld") || starts(mnemonic, "st") || starts(mnemonic, "pop") || starts(mnemonic, "push") ||
      starts(mnemonic, "pl")) {
    const int pops_pc = (starts(mnemonic, "pop") || starts(mnemonic, "ldm")) && strstr(operands, "pc") != NULL;
    return kind(pops_pc || (starts(mnemonic, "ldr") && writes_pc) ? IC_BRANCH : IC_LOAD_STORE);
  }
  return kind(writes_pc ? IC_BRANCH : IC_OTHER);
}
