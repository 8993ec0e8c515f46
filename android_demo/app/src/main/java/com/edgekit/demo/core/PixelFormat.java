package com.edgekit.demo.core;

/**
 * Channel order of 8-bit pixels, with the codes of edgekit_c.h's {@code ek_pixel_format}.
 * CameraX {@code ImageAnalysis} RGBA_8888 and {@code Bitmap.Config.ARGB_8888} buffers are
 * {@link #RGBA} (bytes R, G, B, A in memory); iOS 32BGRA is {@link #BGRA}.
 */
public enum PixelFormat {
  GRAY(0, 1),
  BGR(1, 3),
  RGB(2, 3),
  BGRA(3, 4),
  RGBA(4, 4);

  /** The ek_pixel_format value passed to the core. */
  public final int code;
  /** Bytes per pixel. */
  public final int channels;

  PixelFormat(int code, int channels) {
    this.code = code;
    this.channels = channels;
  }

  static PixelFormat ofCode(int code) {
    for (PixelFormat f : values()) {
      if (f.code == code) return f;
    }
    throw new IllegalArgumentException("unknown ek_pixel_format " + code);
  }
}
