#include "segments.h"

#include <stdlib.h>

void ic_segments_reset(ic_segments *s) {
  s->depth = 0;
  s->segment = 0;
  s->entered = s->unmatched = s->lost = 0;
  s->count = 0;
}

void ic_segments_enter(ic_segments *s) {
  if (s->depth++ == 0) ++s->entered;
}

int ic_segments_exit(ic_segments *s) {
  if (s->depth == 0) {
    ++s->unmatched;
    return 0;
  }
  return --s->depth == 0;
}

void ic_segments_next(ic_segments *s) { ++s->segment; }

void ic_segments_add(ic_segments *s, uint32_t block, uint64_t runs) {
  if (runs == 0) return;
  if (s->count == s->capacity) {
    const size_t grown = s->capacity ? s->capacity * 2 : 4096;
    ic_seg_entry *more = realloc(s->entries, grown * sizeof *more);
    if (more == NULL) {
      ++s->lost;
      return;
    }
    s->entries = more;
    s->capacity = grown;
  }
  s->entries[s->count++] = (ic_seg_entry){s->segment, block, runs};
}

void ic_segments_free(ic_segments *s) {
  free(s->entries);
  s->entries = NULL;
  s->count = s->capacity = 0;
}
