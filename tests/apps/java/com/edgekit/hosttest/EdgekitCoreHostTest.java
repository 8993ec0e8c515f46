package com.edgekit.hosttest;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import com.edgekit.demo.core.EdgekitCore;
import com.edgekit.demo.core.EdgekitException;
import com.edgekit.demo.core.EdgekitException.Status;
import com.edgekit.demo.core.Frame;
import com.edgekit.demo.core.PixelFormat;
import com.edgekit.demo.core.Timings;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import org.junit.AfterClass;
import org.junit.Test;

/**
 * The JNI bridge over the real, Lite-free libedgekit_c.so (what a host build has): the loader
 * verifies and describes the packaged set, refusals reach Java with their reason, and runs
 * say the runtime is unavailable.
 */
public class EdgekitCoreHostTest {
  private static final String MODEL = "digits";

  private static Frame smallFrame() {
    return Frame.packed(new byte[8 * 8 * 4], 8, 8, PixelFormat.RGBA);
  }

  private static EdgekitException refusal(String folderProperty) {
    return assertThrows(EdgekitException.class, () -> EdgekitCore.open(Fixtures.folder(folderProperty), null));
  }

  @AfterClass
  public static void report() throws IOException {
    Fixtures.writeReport();
  }

  @Test
  public void versionSaysThereIsNoRuntime() {
    Object v = MiniJson.parse(EdgekitCore.versionJson());
    assertEquals(1.0, MiniJson.number(v, "api"), 0);
    assertSame(MiniJson.NULL, MiniJson.get(v, "runtime"));
    assertEquals("x86_64", MiniJson.string(v, "abi"));
    assertEquals("stb_image", MiniJson.string(v, "decoder"));
  }

  @Test
  public void javaStatusesMatchTheCoresNames() {
    for (Status s : Status.values()) assertEquals(s.coreName(), EdgekitCore.statusName(s.ordinal()));
    assertEquals("unknown", EdgekitCore.statusName(99));
    Fixtures.REPORT.put("statuses", Status.values().length);
  }

  @Test
  public void openVerifiesAndDescribesTheAssetSet() throws Exception {
    long start = System.nanoTime();
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      double openMs = (System.nanoTime() - start) / 1e6;
      Object d = MiniJson.parse(core.describe());
      assertEquals("assets", MiniJson.string(d, "kind"));
      assertEquals("android", MiniJson.string(d, "platform"));
      assertEquals(Fixtures.expected("files"), (int) MiniJson.number(d, "files"));
      assertEquals(Fixtures.expected("bytes"), (int) MiniJson.number(d, "bytes"));
      assertEquals("v2.13-rc", MiniJson.string(d, "opt_version"));
      assertSame(MiniJson.NULL, MiniJson.get(d, "runtime_version"));  // nothing to lock against
      assertEquals(1, MiniJson.list(d, "models").size());
      assertEquals(MODEL, MiniJson.string(d, "models", 0, "name"));
      assertEquals("classification", MiniJson.string(d, "models", 0, "task"));
      assertEquals("arm64", MiniJson.string(d, "models", 0, "target"));
      assertEquals("fp32", MiniJson.string(d, "models", 0, "precision"));
      assertFalse(MiniJson.bool(d, "models", 0, "loaded"));
      List<?> images = Fixtures.goldenImages(d);
      assertEquals(Fixtures.expected("images"), images.size());
      Fixtures.REPORT.put("verified_files", MiniJson.number(d, "files"));
      Fixtures.REPORT.put("verified_bytes", MiniJson.number(d, "bytes"));
      Fixtures.REPORT.put("verify_ms", MiniJson.number(d, "verify_ms"));
      Fixtures.REPORT.put("open_ms_from_java", openMs);
      Fixtures.REPORT.put("golden_images", images.size());
    }
  }

  @Test
  public void aChangedByteInModelNbIsRefused() {
    EdgekitException e = refusal("tampered.checksum");
    assertEquals(Status.ASSETS, e.status());
    assertTrue(e.isRefusal());
    assertTrue(e.getMessage(), e.getMessage().startsWith("refused (checksum mismatch): "));
    assertTrue(e.getMessage(), e.getMessage().contains("digits/model.nb"));
    assertFalse(e.getMessage(), e.getMessage().contains("\n"));
    Fixtures.REPORT.put("refusal_checksum", e.getMessage());
  }

  @Test
  public void aMissingFileIsRefused() {
    EdgekitException e = refusal("tampered.missing");
    assertEquals(Status.ASSETS, e.status());
    assertTrue(e.getMessage(), e.getMessage().startsWith("refused (missing file): "));
    assertTrue(e.getMessage(), e.getMessage().contains(Fixtures.folder("tampered.missing.file")));
    Fixtures.REPORT.put("refusal_missing", e.getMessage());
  }

  @Test
  public void aModelNbWhoseHeaderDisagreesWithTheIndexIsRefused() {
    EdgekitException e = refusal("tampered.header");
    assertEquals(Status.VERSION, e.status());
    assertTrue(e.getMessage(), e.getMessage().startsWith("refused (version mismatch): "));
    Fixtures.REPORT.put("refusal_header", e.getMessage());
  }

  @Test
  public void withoutARuntimeAnotherOptVersionCannotBeLockedAgainst() throws Exception {
    // A consistent set written by another opt opens here: the lock needs a linked runtime
    // (EdgekitPixelsHostTest refuses the same folder).
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("other_opt"), null)) {
      assertEquals("v2.12", MiniJson.string(MiniJson.parse(core.describe()), "opt_version"));
    }
  }

  @Test
  public void runSelftestAndOcrSayTheRuntimeIsUnavailable() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      EdgekitException run = assertThrows(EdgekitException.class, () -> core.run(MODEL, smallFrame()));
      assertEquals(Status.UNAVAILABLE, run.status());
      assertTrue(run.getMessage(), run.getMessage().contains("no Paddle-Lite runtime"));
      assertTrue(run.getMessage(), run.getMessage().contains("; "));  // "<what>; <fix>"
      EdgekitException self = assertThrows(EdgekitException.class, () -> core.selftest(null));
      assertEquals(Status.UNAVAILABLE, self.status());
      EdgekitException image = assertThrows(EdgekitException.class, () -> core.selftestImage(MODEL, 0, smallFrame()));
      assertEquals(Status.UNAVAILABLE, image.status());
      EdgekitException ocr = assertThrows(EdgekitException.class, () -> core.ocr(null, null, null, smallFrame()));
      assertEquals(Status.ARGUMENT, ocr.status());  // the set has no detector to pick
      assertTrue(ocr.getMessage(), ocr.getMessage().contains("ocr_det"));
      Timings t = core.lastTimings();
      assertEquals(0.0, t.totalMs, 0);
      Fixtures.REPORT.put("unavailable", run.getMessage());
    }
  }

  @Test
  public void unicodeCrossesTheBridgeBothWays() throws Exception {
    String folder = Fixtures.folder("unicode");
    try (EdgekitCore core = EdgekitCore.open(folder, null)) {
      assertEquals(Paths.get(folder).toRealPath().toString(),
          MiniJson.string(MiniJson.parse(core.describe()), "root"));
      String name = "数字-😀-ä";
      EdgekitException e = assertThrows(EdgekitException.class, () -> core.run(name, smallFrame()));
      assertEquals(Status.ARGUMENT, e.status());
      assertTrue(e.getMessage(), e.getMessage().contains("\"" + name + "\""));
      assertTrue(e.getMessage(), e.getMessage().contains(folder));
    }
  }

  @Test
  public void badOptionsAreAnArgumentError() {
    EdgekitException e = assertThrows(EdgekitException.class,
        () -> EdgekitCore.open(Fixtures.folder("assets"), "{\"threads\": 0}"));
    assertEquals(Status.ARGUMENT, e.status());
    assertTrue(e.getMessage(), e.getMessage().contains("threads"));
  }

  @Test
  public void framesAreBoundsCheckedInJavaAndAgainInTheBridge() throws Exception {
    assertThrows(IllegalArgumentException.class, () -> Frame.of(new byte[63], 0, 4, 4, 16, PixelFormat.RGBA));
    assertThrows(IllegalArgumentException.class, () -> Frame.of(new byte[64], 0, 4, 4, 15, PixelFormat.RGBA));
    assertThrows(IllegalArgumentException.class,
        () -> Frame.of(ByteBuffer.allocateDirect(64).position(1), 4, 4, 16, PixelFormat.RGBA));
    // The bridge's own check, reached past Frame by reflection: no pointer beyond the buffer reaches the core.
    Method nativeRun = EdgekitCore.class.getDeclaredMethod("nativeRun", long.class, String.class, ByteBuffer.class,
        byte[].class, int.class, int.class, int.class, int.class, int.class);
    nativeRun.setAccessible(true);
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      java.lang.reflect.Field handle = EdgekitCore.class.getDeclaredField("handle");
      handle.setAccessible(true);
      long h = handle.getLong(core);
      Object[][] bad = {
          {h, MODEL, null, new byte[63], 0, 4, 4, 16, PixelFormat.RGBA.code},         // array too short
          {h, MODEL, null, new byte[64], 1, 4, 4, 16, PixelFormat.RGBA.code},         // offset pushes it past the end
          {h, MODEL, ByteBuffer.allocateDirect(60), null, 0, 4, 4, 16, 4},            // direct buffer too short
          {h, MODEL, ByteBuffer.allocate(64), null, 0, 4, 4, 16, 4},                  // a heap buffer passed as direct
          {h, MODEL, null, new byte[64], 0, 4, 4, 15, 4},                             // stride below width x 4
          {h, MODEL, null, new byte[64], 0, 4, 4, 16, 7},                             // unknown format
      };
      for (Object[] args : bad) {
        InvocationTargetException e = assertThrows(InvocationTargetException.class, () -> nativeRun.invoke(null, args));
        assertEquals(IllegalArgumentException.class, e.getCause().getClass());
      }
      Fixtures.REPORT.put("bridge_bounds_cases", bad.length);
    }
  }

  @Test
  public void decodingMatchesTheJdkOnEveryGoldenImage() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      List<?> images = Fixtures.goldenImages(MiniJson.parse(core.describe()));
      for (Object path : images) {
        Frame decoded = EdgekitCore.decode(Files.readAllBytes(Paths.get((String) path)));
        Fixtures.Gray jdk = Fixtures.readGray((String) path);
        assertEquals(PixelFormat.GRAY, decoded.format);
        assertEquals(jdk.width, decoded.width);
        assertEquals(jdk.height, decoded.height);
        byte[] expected = new byte[jdk.values.length];
        for (int i = 0; i < expected.length; i++) expected[i] = (byte) jdk.values[i];
        assertArrayEquals(expected, decoded.copyBytes());
      }
      EdgekitException e = assertThrows(EdgekitException.class, () -> EdgekitCore.decode(new byte[] {1, 2, 3}));
      assertEquals(Status.INPUT, e.status());
      Fixtures.REPORT.put("decoded_images", images.size());
    }
  }

  @Test
  public void aClosedCoreCannotBeUsed() throws Exception {
    EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null);
    core.close();
    core.close();
    assertTrue(core.isClosed());
    assertThrows(IllegalStateException.class, core::describe);
  }
}
