package com.edgekit.hosttest;

import com.edgekit.demo.core.Frame;
import com.edgekit.demo.core.PixelFormat;
import java.awt.image.BufferedImage;
import java.awt.image.Raster;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;

/** What tests/apps/test_android_jni.py prepared (system properties), golden images and pixel layouts. */
final class Fixtures {
  private Fixtures() {}

  /** Figures the Python test reads back (counts, timings). */
  static final Map<String, Object> REPORT = new LinkedHashMap<>();

  static String folder(String name) {
    String value = System.getProperty("edgekit." + name);
    if (value == null) throw new IllegalStateException("-Dedgekit." + name + " is not set (run through test_android_jni.py)");
    return value;
  }

  static int expected(String name) {
    return Integer.parseInt(folder("expect." + name));
  }

  static void writeReport() throws IOException {
    String path = System.getProperty("edgekit.report");
    if (path != null) Files.write(Paths.get(path), MiniJson.write(REPORT).getBytes(StandardCharsets.UTF_8));
  }

  /** A golden PNG decoded by the JDK (as BitmapFactory would on Android): 8-bit gray values, row-major. */
  static final class Gray {
    final int width;
    final int height;
    final int[] values;

    Gray(int width, int height, int[] values) {
      this.width = width;
      this.height = height;
      this.values = values;
    }
  }

  static Gray readGray(String path) throws IOException {
    BufferedImage image = ImageIO.read(new File(path));
    if (image == null) throw new IOException("ImageIO cannot read " + path);
    Raster raster = image.getRaster();
    if (raster.getNumBands() != 1 || raster.getSampleModel().getSampleSize(0) != 8) {
      throw new IOException(path + " is not an 8-bit gray image; the layouts below assume one");
    }
    int[] values = raster.getPixels(0, 0, image.getWidth(), image.getHeight(), (int[]) null);
    return new Gray(image.getWidth(), image.getHeight(), values);
  }

  /**
   * Blue differs from red and green by 4, so cv2's gray ((B*3735 + G*19235 + R*9798 + 2^14) >> 15)
   * of the colour pixel is still g, while swapping R and B moves it by one: a layout whose channel
   * order is mislabelled changes the tensor, and a correct one reproduces Python's exactly.
   */
  static int blue(int g) {
    return g <= 251 ? g + 4 : g - 4;
  }

  static final int LEAD = 7;        // bytes before the first pixel (a buffer position / array offset)
  static final int PADDING = 12;    // bytes after each row (a camera plane's row stride)
  static final byte JUNK = (byte) 0xAB;

  /** The pixels of `gray` in `format` order, rows padded, with LEAD junk bytes in front. */
  static byte[] bytes(Gray gray, PixelFormat format, int padding) {
    int stride = gray.width * format.channels + padding;
    byte[] out = new byte[LEAD + stride * gray.height];
    java.util.Arrays.fill(out, JUNK);
    for (int y = 0; y < gray.height; y++) {
      for (int x = 0; x < gray.width; x++) {
        int g = gray.values[y * gray.width + x];
        int r = g, b = blue(g), a = (x * 37 + y * 11) & 0xFF;  // alpha varies: the core must ignore it
        int[] px;
        switch (format) {
          case GRAY: px = new int[] {g}; break;
          case RGB: px = new int[] {r, g, b}; break;
          case BGR: px = new int[] {b, g, r}; break;
          case RGBA: px = new int[] {r, g, b, a}; break;
          default: px = new int[] {b, g, r, a}; break;  // BGRA
        }
        for (int c = 0; c < px.length; c++) out[LEAD + y * stride + x * format.channels + c] = (byte) px[c];
      }
    }
    return out;
  }

  /** The ways an app hands pixels over. */
  enum Layout {
    RGBA_ARRAY_PACKED,    // Bitmap.copyPixelsToBuffer into a byte[] (Android)
    RGBA_DIRECT_PADDED,   // CameraX ImageAnalysis RGBA_8888 plane: direct buffer, padded rows
    BGRA_DIRECT_PADDED,   // iOS kCVPixelFormatType_32BGRA
    RGB_HEAP_BUFFER,      // a heap ByteBuffer slice (array offset)
    BGR_ARRAY_OFFSET,     // OpenCV-style rows in an array with an offset
    GRAY_ARRAY_PACKED;

    PixelFormat format() {
      switch (this) {
        case RGBA_ARRAY_PACKED:
        case RGBA_DIRECT_PADDED: return PixelFormat.RGBA;
        case BGRA_DIRECT_PADDED: return PixelFormat.BGRA;
        case RGB_HEAP_BUFFER: return PixelFormat.RGB;
        case BGR_ARRAY_OFFSET: return PixelFormat.BGR;
        default: return PixelFormat.GRAY;
      }
    }

    boolean padded() {
      return this == RGBA_DIRECT_PADDED || this == BGRA_DIRECT_PADDED || this == RGB_HEAP_BUFFER
          || this == BGR_ARRAY_OFFSET;
    }

    Frame frame(Gray gray) {
      PixelFormat f = format();
      int padding = padded() ? PADDING : 0;
      byte[] data = bytes(gray, f, padding);
      int stride = gray.width * f.channels + padding;
      switch (this) {
        case RGBA_DIRECT_PADDED:
        case BGRA_DIRECT_PADDED: {
          ByteBuffer direct = ByteBuffer.allocateDirect(data.length);
          direct.put(data).position(LEAD);
          return Frame.of(direct, gray.width, gray.height, stride, f);
        }
        case RGB_HEAP_BUFFER: {
          ByteBuffer heap = ByteBuffer.wrap(data);
          heap.position(LEAD);
          return Frame.of(heap.slice(), gray.width, gray.height, stride, f);
        }
        default:
          return Frame.of(data, LEAD, gray.width, gray.height, stride, f);
      }
    }
  }

  static List<?> goldenImages(Object describe) {
    return MiniJson.list(describe, "models", 0, "golden_images");
  }
}
