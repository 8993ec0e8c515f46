/* Which op of the runtime program each profiled instruction ran under. Lite's
 * RuntimeProgram::Run calls KernelBase::Launch() once per op it runs (feed and
 * fetch skipped); the plugin is given Launch's entry and the return points of its
 * call sites, and closes a segment each time an outermost Launch returns. Segment
 * k is then op k's time: from the end of op k-1's kernel (Lite's loop step, op k's
 * InferShape) to the end of its own; the segment after the last op is the
 * region's tail. Launches inside a Launch (a while op's body) stay in their op.
 *
 * The counts are kept sparse: at each segment's end the caller adds, for every
 * block that ran during it, (segment, block, executions) to one growing list, so
 * memory follows the code each op ran, not blocks x ops. Pure: test_segments.c. */
#ifndef EDGEKIT_ICOUNT_SEGMENTS_H
#define EDGEKIT_ICOUNT_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t segment;
  uint32_t block; /* the caller's block number */
  uint64_t runs;
} ic_seg_entry;

typedef struct {
  int depth;              /* Launch frames open */
  uint32_t segment;       /* the segment now running: outermost Launches ended so far */
  uint64_t entered;       /* outermost Launch entries */
  uint64_t unmatched;     /* returns seen with no Launch open */
  uint64_t lost;          /* entries the list could not take (out of memory) */
  ic_seg_entry *entries;
  size_t count, capacity;
} ic_segments;

/* Back to segment 0 with nothing open (the list is emptied, its memory kept). */
void ic_segments_reset(ic_segments *s);
/* Launch's entry ran. */
void ic_segments_enter(ic_segments *s);
/* A Launch call site's return point ran: 1 when it closes the outermost Launch, i.e. the caller must flush the
 * blocks' executions into the current segment and then call ic_segments_next. */
int ic_segments_exit(ic_segments *s);
void ic_segments_next(ic_segments *s);
/* Add `runs` executions of `block` to the current segment (nothing for 0). */
void ic_segments_add(ic_segments *s, uint32_t block, uint64_t runs);
void ic_segments_free(ic_segments *s);

#endif
