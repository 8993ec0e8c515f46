package com.edgekit.demo.core;

/** Milliseconds of the last run/ocr on a handle (edgekit_c.h's ek_timings). */
public final class Timings {
  public final double preprocessMs;
  public final double inferenceMs;
  public final double postprocessMs;
  /** OCR crops and rotations. */
  public final double otherMs;
  /** Wall time of the call. */
  public final double totalMs;

  Timings(double[] values) {
    preprocessMs = values[0];
    inferenceMs = values[1];
    postprocessMs = values[2];
    otherMs = values[3];
    totalMs = values[4];
  }

  @Override
  public String toString() {
    return String.format(java.util.Locale.ROOT, "pre %.1f ms, inference %.1f ms, post %.1f ms%s, total %.1f ms",
        preprocessMs, inferenceMs, postprocessMs, otherMs > 0 ? String.format(java.util.Locale.ROOT,
            ", crops %.1f ms", otherMs) : "", totalMs);
  }
}
