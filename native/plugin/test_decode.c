/* Host test of the classifiers and markers: encodings as GNU as (aarch64,
 * -march=armv8.2-a+dotprod) and arm-linux-gnueabihf-as wrote them, and
 * Capstone-style text for 32-bit ARM. Exit 0 when every case holds. */
#include <stdio.h>

#include "decode.h"
#include "markers.h"

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    ++failures;
    fprintf(stderr, "FAIL: %s\n", what);
  }
}

static void a64(unsigned w, enum ic_class cls, int dot, const char *what) {
  const ic_kind k = ic_classify_a64(w);
  check(k.cls == cls && k.dot_product == dot, what);
}

static void arm(const char *text, enum ic_class cls) { check(ic_classify_arm_text(text).cls == cls, text); }

int main(void) {
  a64(0x4e829420u, IC_SIMD_FP, 1, "sdot v0.4s, v1.16b, v2.16b");
  a64(0x2e859483u, IC_SIMD_FP, 1, "udot v3.2s, v4.8b, v5.8b");
  a64(0x4fa2e820u, IC_SIMD_FP, 1, "sdot v0.4s, v1.16b, v2.4b[3]");
  a64(0x4e22cc20u, IC_SIMD_FP, 0, "fmla v0.4s, v1.4s, v2.4s");
  a64(0x0e228020u, IC_SIMD_FP, 0, "smlal v0.8h, v1.8b, v2.8b");
  a64(0x1e222820u, IC_SIMD_FP, 0, "fadd s0, s1, s2");
  a64(0x4cdf7800u, IC_LOAD_STORE, 0, "ld1 {v0.4s}, [x0], #16");
  a64(0xf9400041u, IC_LOAD_STORE, 0, "ldr x1, [x2]");
  a64(0xa9bf7bfdu, IC_LOAD_STORE, 0, "stp x29, x30, [sp, #-16]!");
  a64(0x14000000u, IC_BRANCH, 0, "b");
  a64(0x94000000u, IC_BRANCH, 0, "bl");
  a64(0x54000001u, IC_BRANCH, 0, "b.ne");
  a64(0xb4000000u, IC_BRANCH, 0, "cbz");
  a64(0x37180001u, IC_BRANCH, 0, "tbnz");
  a64(0xd65f03c0u, IC_BRANCH, 0, "ret");
  a64(0xd61f0060u, IC_BRANCH, 0, "br x3");
  a64(0x8b020020u, IC_OTHER, 0, "add x0, x1, x2");
  a64(0xd2800020u, IC_OTHER, 0, "mov x0, #1");
  a64(0xd503201fu, IC_OTHER, 0, "nop");
  a64(0xd4000001u, IC_OTHER, 0, "svc #0");

  check(EDGEKIT_A64_HINT(EDGEKIT_ICOUNT_BEGIN) == 0xd5032fbfu, "hint #125 encoding (aarch64)");
  check(EDGEKIT_A64_HINT(EDGEKIT_ICOUNT_END) == 0xd5032fdfu, "hint #126 encoding (aarch64)");
  check(EDGEKIT_A32_HINT(EDGEKIT_ICOUNT_BEGIN) == 0xe320f07du, "hint #125 encoding (A32)");
  check(EDGEKIT_T32_HINT(EDGEKIT_ICOUNT_BEGIN) == 0x807df3afu, "hint.w #125 bytes af f3 7d 80 (Thumb-2)");
  check(ic_marker_a64(0xd5032fbfu) == IC_BEGIN && ic_marker_a64(0xd5032fdfu) == IC_END, "aarch64 markers");
  check(ic_marker_a64(0xd503201fu) == IC_NO_MARKER, "nop is no marker");
  check(ic_marker_arm(0xe320f07du) == IC_BEGIN && ic_marker_arm(0x807ef3afu) == IC_END, "arm markers");
  check(ic_marker_arm(0xe320f000u) == IC_NO_MARKER, "A32 nop is no marker");

  arm("vmla.f32 q8, q9, q10", IC_SIMD_FP);
  arm("vmlal.s8 q0, d2, d3", IC_SIMD_FP);
  arm("vld1.32 {d16, d17}, [r0]!", IC_LOAD_STORE);
  arm("vpush {d8, d9}", IC_LOAD_STORE);
  arm("vstr d0, [sp, #8]", IC_LOAD_STORE);
  arm("ldr r3, [r2, #4]", IC_LOAD_STORE);
  arm("strd r4, r5, [sp]", IC_LOAD_STORE);
  arm("push {r4, lr}", IC_LOAD_STORE);
  arm("pld [r1, #64]", IC_LOAD_STORE);
  arm("pop {r4, pc}", IC_BRANCH);
  arm("ldr pc, [sp], #4", IC_BRANCH);
  arm("bne #0x1234", IC_BRANCH);
  arm("b.w #0x1234", IC_BRANCH);
  arm("blx r3", IC_BRANCH);
  arm("bx lr", IC_BRANCH);
  arm("cbz r0, #0x20", IC_BRANCH);
  arm("bic r0, r0, #3", IC_OTHER);
  arm("bfi r0, r1, #0, #8", IC_OTHER);
  arm("bls #0x40", IC_BRANCH);
  arm("subs r0, r0, #1", IC_OTHER);
  arm("smlal r0, r1, r2, r3", IC_OTHER);
  arm("", IC_OTHER);
  check(ic_classify_arm_text(NULL).cls == IC_OTHER, "no disassembly");
  if (failures) return 1;
  puts("decode: all cases pass");
  return 0;
}
