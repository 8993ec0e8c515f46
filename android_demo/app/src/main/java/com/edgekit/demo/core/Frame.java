package com.edgekit.demo.core;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * Pixels the core reads for the duration of one call (it never keeps them): a direct
 * {@link ByteBuffer} (a camera plane, read in place) or a byte array, from its position or
 * offset, {@code height} rows {@code rowStride} bytes apart. The bounds are checked here, and
 * again in the JNI bridge before a pointer reaches the core.
 */
public final class Frame {
  final ByteBuffer direct;  // exactly one of direct / array is set
  final byte[] array;
  final int offset;         // into array, or the direct buffer's position
  public final int width;
  public final int height;
  public final int rowStride;
  public final PixelFormat format;

  private Frame(ByteBuffer direct, byte[] array, int offset, long available, int width, int height, int rowStride,
                PixelFormat format) {
    this.direct = direct;
    this.array = array;
    this.offset = offset;
    this.width = width;
    this.height = height;
    this.rowStride = rowStride;
    this.format = Objects.requireNonNull(format, "format");
    if (width <= 0 || height <= 0) {
      throw new IllegalArgumentException("frame of " + width + "x" + height + " pixels; width and height must be > 0");
    }
    if (rowStride < (long) width * format.channels) {
      throw new IllegalArgumentException("row stride " + rowStride + " < width " + width + " x " + format.channels
          + " bytes of " + format);
    }
    if (offset < 0 || byteCount() > available) {
      throw new IllegalArgumentException("a " + width + "x" + height + " " + format + " frame with row stride "
          + rowStride + " needs " + byteCount() + " bytes, the buffer has " + Math.max(0, available));
    }
  }

  /**
   * A buffer's remaining bytes: a direct buffer (CameraX {@code ImageProxy.getPlanes()[0].getBuffer()})
   * is read in place; a heap buffer through its backing array.
   */
  public static Frame of(ByteBuffer pixels, int width, int height, int rowStride, PixelFormat format) {
    Objects.requireNonNull(pixels, "pixels");
    if (pixels.isDirect()) {
      return new Frame(pixels, null, pixels.position(), pixels.remaining(), width, height, rowStride, format);
    }
    if (!pixels.hasArray()) {
      throw new IllegalArgumentException("a read-only heap ByteBuffer has no accessible array; use a direct buffer");
    }
    return new Frame(null, pixels.array(), pixels.arrayOffset() + pixels.position(), pixels.remaining(), width,
        height, rowStride, format);
  }

  /** Pixels in a byte array from {@code offset}. */
  public static Frame of(byte[] pixels, int offset, int width, int height, int rowStride, PixelFormat format) {
    Objects.requireNonNull(pixels, "pixels");
    return new Frame(null, pixels, offset, (long) pixels.length - offset, width, height, rowStride, format);
  }

  /** Packed rows (stride = width x channels). */
  public static Frame packed(byte[] pixels, int width, int height, PixelFormat format) {
    return of(pixels, 0, width, height, width * format.channels, format);
  }

  /** Bytes from the first pixel to the last: stride x (height - 1) + width x channels. */
  public long byteCount() {
    return (long) rowStride * (height - 1) + (long) width * format.channels;
  }

  /** The pixel bytes (copied, stride kept), e.g. to build an Android Bitmap from a decoded image. */
  public byte[] copyBytes() {
    byte[] out = new byte[(int) byteCount()];
    if (direct != null) {
      ByteBuffer view = direct.duplicate();
      view.position(offset);
      view.get(out);
    } else {
      System.arraycopy(array, offset, out, 0, out.length);
    }
    return out;
  }

  @Override
  public String toString() {
    return width + "x" + height + " " + format + " (stride " + rowStride + (direct != null ? ", direct)" : ", array)");
  }
}
