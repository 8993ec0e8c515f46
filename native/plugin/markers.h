/* The two marker instructions edgekit-lite-run places around each measured
 * inference, and that the counting plugin (icount.c) recognises while
 * translating. They are architectural hints with unallocated numbers: every
 * ARMv7/ARMv8 core executes them as NOP (the architecture reserves the whole
 * HINT space to behave so), no compiler emits them, and Lite's library holds
 * none (tests/native/test_instruction_counts.py scans it). Shared by C and C++. */
#ifndef EDGEKIT_ICOUNT_MARKERS_H
#define EDGEKIT_ICOUNT_MARKERS_H

#define EDGEKIT_ICOUNT_BEGIN 125 /* hint #125 */
#define EDGEKIT_ICOUNT_END 126   /* hint #126 */

/* The encodings, as the little-endian 32-bit word read from guest memory. */
#define EDGEKIT_A64_HINT(n) (0xD503201Fu | ((unsigned)(n) << 5))
#define EDGEKIT_A32_HINT(n) (0xE320F000u | (unsigned)(n))               /* cond AL */
#define EDGEKIT_T32_HINT(n) (0x8000F3AFu | ((unsigned)(n) << 16))       /* hint.w: halfwords F3AF, 80nn */

#define EDGEKIT_ICOUNT_STR2(x) #x
#define EDGEKIT_ICOUNT_STR(x) EDGEKIT_ICOUNT_STR2(x)
/* the two hex digits of a marker number, for the 32-bit ARM encodings */
#define EDGEKIT_ICOUNT_HEX(n) EDGEKIT_ICOUNT_HEX2(n)
#define EDGEKIT_ICOUNT_HEX2(n) EDGEKIT_ICOUNT_HEX_##n
#define EDGEKIT_ICOUNT_HEX_125 "7d"
#define EDGEKIT_ICOUNT_HEX_126 "7e"

/* EDGEKIT_ICOUNT_MARK(EDGEKIT_ICOUNT_BEGIN) in code: a compiler barrier that costs one NOP on a device. */
#if defined(__aarch64__)
#define EDGEKIT_ICOUNT_MARK(n) __asm__ volatile("hint #" EDGEKIT_ICOUNT_STR(n) ::: "memory")
#elif defined(__arm__) && defined(__thumb2__) /* GNU as has no hint mnemonic for 32-bit ARM: the words */
#define EDGEKIT_ICOUNT_MARK(n) __asm__ volatile(".inst.w 0xf3af80" EDGEKIT_ICOUNT_HEX(n) ::: "memory")
#elif defined(__arm__)
#define EDGEKIT_ICOUNT_MARK(n) __asm__ volatile(".inst 0xe320f0" EDGEKIT_ICOUNT_HEX(n) ::: "memory")
#else
#define EDGEKIT_ICOUNT_MARK(n) __asm__ volatile("" ::: "memory") /* host builds: nothing to count */
#endif

#endif
