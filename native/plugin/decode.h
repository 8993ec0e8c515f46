/* Instruction classes the counting plugin reports, and the classifiers:
 * AArch64 from the encoding (Arm ARM's top-level decode tables), 32-bit ARM
 * from the mnemonic of QEMU's own disassembly (it knows whether a block is
 * Thumb or A32, which the bytes alone do not say). Pure functions: the host
 * test (test_decode.c) checks them on encodings the assembler produced. */
#ifndef EDGEKIT_ICOUNT_DECODE_H
#define EDGEKIT_ICOUNT_DECODE_H

#include <stdint.h>

enum ic_class { IC_SIMD_FP, IC_LOAD_STORE, IC_BRANCH, IC_OTHER, IC_CLASSES };
enum ic_marker { IC_NO_MARKER, IC_BEGIN, IC_END };

typedef struct {
  enum ic_class cls;
  int dot_product; /* SDOT/UDOT (vector or by element); also counted in its class, simd_fp */
} ic_kind;

extern const char *const ic_class_names[IC_CLASSES];

ic_kind ic_classify_a64(uint32_t word);
ic_kind ic_classify_arm_text(const char *disassembly);
enum ic_marker ic_marker_a64(uint32_t word);
enum ic_marker ic_marker_arm(uint32_t word); /* A32 or Thumb-2 (hint.w) encoding */

#endif
