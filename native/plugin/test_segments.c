/* Host test of the op segments (segments.h): a made-up run of three ops, the
 * second one holding two nested Launches (a while op's body), then the tail.
 * Exit 0 when every case holds. */
#include <stdio.h>

#include "segments.h"

static int failures;

static void check(int ok, const char *what) {
  if (!ok) {
    ++failures;
    fprintf(stderr, "FAIL: %s\n", what);
  }
}

/* The flush a plugin does when a segment closes: each block's executions since the last flush. */
static void flush(ic_segments *s, const unsigned long long *count, unsigned long long *mark, int n) {
  for (int b = 0; b < n; ++b) {
    ic_segments_add(s, (uint32_t)b, count[b] - mark[b]);
    mark[b] = count[b];
  }
}

int main(void) {
  ic_segments s = {0};
  unsigned long long count[3] = {0}, mark[3] = {0};
  ic_segments_reset(&s);
  check(ic_segments_exit(&s) == 0 && s.unmatched == 1, "a return with no Launch open closes nothing");

  count[0] += 2;                      /* op 0: the loop step, then its kernel */
  ic_segments_enter(&s);
  count[1] += 5;
  if (ic_segments_exit(&s)) flush(&s, count, mark, 3), ic_segments_next(&s);
  check(s.segment == 1 && s.depth == 0, "the outermost return closes op 0");

  ic_segments_enter(&s);              /* op 1: a while op running two kernels inside its own */
  count[2] += 1;
  ic_segments_enter(&s);
  count[1] += 3;
  check(ic_segments_exit(&s) == 0, "a nested return stays in its op");
  ic_segments_enter(&s);
  check(ic_segments_exit(&s) == 0, "a second nested return stays too");
  count[2] += 1;
  check(ic_segments_exit(&s) == 1, "the outer return closes op 1");
  flush(&s, count, mark, 3);
  ic_segments_next(&s);

  count[0] += 7;                      /* the tail: after the last op */
  flush(&s, count, mark, 3);

  check(s.entered == 2, "two outermost Launches");
  check(s.count == 5, "five (segment, block) entries: zero runs are not stored");
  const ic_seg_entry want[5] = {{0, 0, 2}, {0, 1, 5}, {1, 1, 3}, {1, 2, 2}, {2, 0, 7}};
  for (int i = 0; i < 5 && i < (int)s.count; ++i) {
    check(s.entries[i].segment == want[i].segment && s.entries[i].block == want[i].block &&
              s.entries[i].runs == want[i].runs,
          "entry as expected");
  }
  unsigned long long sum = 0;
  for (size_t i = 0; i < s.count; ++i) sum += s.entries[i].runs;
  check(sum == count[0] + count[1] + count[2], "the segments add up to every block's executions");

  ic_segments_reset(&s);
  check(s.count == 0 && s.segment == 0 && s.unmatched == 0 && s.entries != NULL, "reset keeps the memory");
  ic_segments_free(&s);
  if (failures) return 1;
  puts("segments: all cases pass");
  return 0;
}
