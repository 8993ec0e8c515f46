package com.edgekit.demo.core;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * edgekit's app core (native/, through edgekit_c.h) for Java and Kotlin: one verified asset
 * set from {@code edgekit package}, its models, and the golden self-test.
 *
 * <pre>
 *   try (EdgekitCore core = EdgekitCore.open(folder, null)) {   // verifies every sha256 and the version lock
 *     String json = core.run("digits", Frame.of(plane.getBuffer(), w, h, plane.getRowStride(), PixelFormat.RGBA));
 *     Timings t = core.lastTimings();
 *   } catch (EdgekitException e) {
 *     show(e.getMessage());   // "refused (checksum mismatch): ...; ..." when the set was tampered with
 *   }
 * </pre>
 *
 * Results are the core's JSON strings (see edgekit_c.h), parsed by the caller (Android's
 * org.json). Every failure of the core is an {@link EdgekitException} carrying its status and
 * the one-line reason; bad arguments are {@link IllegalArgumentException} /
 * {@link NullPointerException}; calls after {@link #close()} are {@link IllegalStateException}.
 * Calls on one instance are serialised (the core serialises them anyway) so that
 * {@code close()} never frees a handle another thread is using. The folder must hold plain
 * files: on Android copy the APK's assets out first (the demo's AssetInstaller does).
 */
public final class EdgekitCore implements AutoCloseable {
  /** The JNI library's name: libedgekit_jni.so (it loads libedgekit_c.so and Paddle-Lite beside it). */
  public static final String LIBRARY = "edgekit_jni";

  static {
    System.loadLibrary(LIBRARY);
  }

  private long handle;

  private EdgekitCore(long handle) {
    this.handle = handle;
  }

  /** {"api", "edgekit", "runtime": "v2.13-rc" or null, "abi", "compiler", "decoder"}: what this build can do. */
  public static String versionJson() {
    return nativeVersion();
  }

  /** The core's name of a status code (ek_status_name), e.g. "assets". */
  public static String statusName(int code) {
    return nativeStatusName(code);
  }

  /**
   * Opens and verifies an asset set (assets.json) or one bundle (manifest.json).
   *
   * @param optionsJson null or {"threads": 2, "power_mode": "high", "top_k": 5, "cls_thresh": 0.9, "models": [...]}
   * @throws EdgekitException ASSETS / VERSION when the set is refused (the message says why), ARGUMENT for bad options
   */
  public static EdgekitCore open(String folder, String optionsJson) throws EdgekitException {
    Objects.requireNonNull(folder, "folder");
    return new EdgekitCore(nativeOpen(folder, optionsJson));
  }

  /** The verified set as JSON: files, bytes, verify_ms, and per model its task, target, precision, golden_images. */
  public synchronized String describe() throws EdgekitException {
    return nativeDescribe(live());
  }

  /** One model on one frame: {"model", "task", "result", "timings_ms"}. UNAVAILABLE in a build without Paddle-Lite. */
  public synchronized String run(String model, Frame frame) throws EdgekitException {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(frame, "frame");
    return nativeRun(live(), model, frame.direct, frame.array, frame.offset, frame.width, frame.height,
        frame.rowStride, frame.format.code);
  }

  /**
   * The OCR system (detect, crop, direction, recognise): {"lines": [{"box", "text", ...}], "timings_ms"}.
   * A null model name picks the set's only model of that task; {@code cls} "" runs without a direction classifier.
   */
  public synchronized String ocr(String det, String rec, String cls, Frame frame) throws EdgekitException {
    Objects.requireNonNull(frame, "frame");
    return nativeOcr(live(), det, rec, cls, frame.direct, frame.array, frame.offset, frame.width, frame.height,
        frame.rowStride, frame.format.code);
  }

  /** The stage times of the last successful run/ocr on this handle (zeros before the first). */
  public synchronized Timings lastTimings() throws EdgekitException {
    return new Timings(nativeLastTimings(live()));
  }

  /**
   * Replays golden/ of one model (null: every loaded model) on the linked runtime: the golden vectors, and the
   * golden images when the build can decode them. A failed check is {@code ok == false} with the report.
   */
  public synchronized SelftestReport selftest(String model) throws EdgekitException {
    boolean[] ok = new boolean[1];
    String json = nativeSelftest(live(), model, ok);
    return new SelftestReport(ok[0], json);
  }

  /**
   * One golden image (index into the model's "golden_images"), decoded by the platform: the core's tensor must
   * equal Python's exactly, the model's outputs the reference within the bundle's tolerances, the result Python's.
   */
  public synchronized SelftestReport selftestImage(String model, int index, Frame frame) throws EdgekitException {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(frame, "frame");
    boolean[] ok = new boolean[1];
    String json = nativeSelftestImage(live(), model, index, frame.direct, frame.array, frame.offset, frame.width,
        frame.height, frame.rowStride, frame.format.code, ok);
    return new SelftestReport(ok[0], json);
  }

  /**
   * Decodes PNG/JPEG/BMP bytes as edgekit's Python path does (gray, RGB or RGBA, packed rows), in builds with
   * stb_image; UNAVAILABLE otherwise (apps decode with BitmapFactory / UIImage).
   */
  public static Frame decode(byte[] encoded) throws EdgekitException {
    Objects.requireNonNull(encoded, "encoded");
    int[] shape = new int[4];
    byte[] pixels = nativeDecode(encoded, shape);
    return Frame.of(pixels, 0, shape[0], shape[1], shape[2], PixelFormat.ofCode(shape[3]));
  }

  public synchronized boolean isClosed() {
    return handle == 0;
  }

  /** Releases the models; later calls throw IllegalStateException. Closing twice is fine. */
  @Override
  public synchronized void close() {
    if (handle != 0) {
      nativeClose(handle);
      handle = 0;
    }
  }

  private long live() {
    if (handle == 0) throw new IllegalStateException("this EdgekitCore is closed; open the asset set again");
    return handle;
  }

  private static native String nativeVersion();

  private static native String nativeStatusName(int status);

  private static native long nativeOpen(String folder, String optionsJson) throws EdgekitException;

  private static native void nativeClose(long handle);

  private static native String nativeDescribe(long handle) throws EdgekitException;

  private static native String nativeRun(long handle, String model, ByteBuffer direct, byte[] array, int offset,
                                         int width, int height, int rowStride, int format) throws EdgekitException;

  private static native String nativeOcr(long handle, String det, String rec, String cls, ByteBuffer direct,
                                         byte[] array, int offset, int width, int height, int rowStride, int format)
      throws EdgekitException;

  private static native double[] nativeLastTimings(long handle) throws EdgekitException;

  private static native String nativeSelftest(long handle, String model, boolean[] ok) throws EdgekitException;

  private static native String nativeSelftestImage(long handle, String model, int index, ByteBuffer direct,
                                                   byte[] array, int offset, int width, int height, int rowStride,
                                                   int format, boolean[] ok) throws EdgekitException;

  private static native byte[] nativeDecode(byte[] encoded, int[] shape) throws EdgekitException;
}
