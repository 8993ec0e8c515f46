package com.edgekit.hosttest;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import com.edgekit.demo.core.EdgekitCore;
import com.edgekit.demo.core.EdgekitException;
import com.edgekit.demo.core.EdgekitException.Status;
import com.edgekit.demo.core.Frame;
import com.edgekit.demo.core.PixelFormat;
import com.edgekit.demo.core.SelftestReport;
import com.edgekit.demo.core.Timings;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;

/**
 * The JNI bridge over the C API with tests/apps/host/replay_runtime.cc standing in for
 * Paddle-Lite: golden images decoded by the JDK, handed over in every layout an app uses
 * (RGBA/BGRA/RGB/BGR/gray, direct and heap buffers, padded rows, offsets), must give the
 * tensor Python computed, bit for bit, and Python's result; mislabelled layouts must not.
 */
public class EdgekitPixelsHostTest {
  private static final String MODEL = "digits";
  private static List<String> images;
  private static Object golden;  // golden.json

  @BeforeClass
  public static void readGolden() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      Object d = MiniJson.parse(core.describe());
      images = new ArrayList<>();
      for (Object p : Fixtures.goldenImages(d)) images.add((String) p);
      golden = MiniJson.parse(new String(java.nio.file.Files.readAllBytes(
          java.nio.file.Paths.get(MiniJson.string(d, "models", 0, "golden"))), java.nio.charset.StandardCharsets.UTF_8));
    }
    assertEquals(Fixtures.expected("images"), images.size());
  }

  @AfterClass
  public static void report() throws IOException {
    Fixtures.writeReport();
  }

  @Test
  public void theStandInRuntimeIsLinkedAndLocked() throws Exception {
    assertEquals("v2.13-rc", MiniJson.string(MiniJson.parse(EdgekitCore.versionJson()), "runtime"));
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      Object d = MiniJson.parse(core.describe());
      assertEquals("v2.13-rc", MiniJson.string(d, "runtime_version"));
      assertTrue(MiniJson.bool(d, "models", 0, "loaded"));
    }
  }

  @Test
  public void everyLayoutGivesPythonsTensorBitForBit() throws Exception {
    int cases = 0;
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      for (int i = 0; i < images.size(); i++) {
        Fixtures.Gray gray = Fixtures.readGray(images.get(i));
        for (Fixtures.Layout layout : Fixtures.Layout.values()) {
          SelftestReport r = core.selftestImage(MODEL, i, layout.frame(gray));
          Object report = MiniJson.parse(r.json);
          String where = "image " + i + " as " + layout + ": " + r.json;
          assertTrue(where, r.ok);
          assertEquals(where, 0.0, MiniJson.number(report, "tensor", "differing"), 0);
          assertTrue(where, MiniJson.bool(report, "tensor", "gated"));
          assertTrue(where, MiniJson.bool(report, "results", "same_decision"));
          assertEquals(where, 1.0, MiniJson.number(report, "outputs", 0, "cosine"), 1e-12);
          cases++;
        }
      }
    }
    assertEquals(images.size() * Fixtures.Layout.values().length, cases);
    Fixtures.REPORT.put("layouts", Fixtures.Layout.values().length);
    Fixtures.REPORT.put("pixel_cases_exact", cases);
  }

  @Test
  public void runReturnsPythonsResultsAndTimings() throws Exception {
    double totalMs = 0;
    double preprocessMs = 0;
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), "{\"top_k\": 3}")) {
      for (int i = 0; i < images.size(); i++) {
        Frame frame = Fixtures.Layout.RGBA_DIRECT_PADDED.frame(Fixtures.readGray(images.get(i)));
        Object out = MiniJson.parse(core.run(MODEL, frame));
        Object want = MiniJson.get(golden, "images", "results", i);
        assertEquals(MODEL, MiniJson.string(out, "model"));
        assertEquals("classification", MiniJson.string(out, "task"));
        assertEquals(MiniJson.number(want, "class"), MiniJson.number(out, "result", "class"), 0);
        assertEquals(MiniJson.string(want, "label"), MiniJson.string(out, "result", "label"));
        assertEquals(MiniJson.number(want, "score"), MiniJson.number(out, "result", "score"), 1e-6);
        assertEquals(3, MiniJson.list(out, "result", "top").size());
        Timings t = core.lastTimings();
        assertTrue(t.toString(), t.totalMs > 0 && t.preprocessMs > 0 && t.totalMs >= t.preprocessMs);
        assertEquals(MiniJson.number(out, "timings_ms", "preprocess"), t.preprocessMs, 1e-3);
        totalMs += t.totalMs;
        preprocessMs += t.preprocessMs;
      }
    }
    Fixtures.REPORT.put("runs", images.size());
    Fixtures.REPORT.put("run_total_ms_mean", totalMs / images.size());
    Fixtures.REPORT.put("run_preprocess_ms_mean", preprocessMs / images.size());
  }

  @Test
  public void aSwappedChannelOrderIsCaught() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      Fixtures.Gray gray = Fixtures.readGray(images.get(0));
      byte[] bgra = Fixtures.bytes(gray, PixelFormat.BGRA, 0);
      Frame mislabelled = Frame.of(bgra, Fixtures.LEAD, gray.width, gray.height, gray.width * 4, PixelFormat.RGBA);
      SelftestReport r = core.selftestImage(MODEL, 0, mislabelled);
      assertFalse(r.json, r.ok);
      double differing = MiniJson.number(MiniJson.parse(r.json), "tensor", "differing");
      assertTrue(r.json, differing > 0);
      Fixtures.REPORT.put("swapped_order_differing", differing);
    }
  }

  @Test
  public void aWrongRowStrideIsCaught() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      Fixtures.Gray gray = Fixtures.readGray(images.get(1));
      byte[] padded = Fixtures.bytes(gray, PixelFormat.RGBA, Fixtures.PADDING);
      ByteBuffer direct = ByteBuffer.allocateDirect(padded.length);
      direct.put(padded).position(Fixtures.LEAD);
      Frame packedClaim = Frame.of(direct, gray.width, gray.height, gray.width * 4, PixelFormat.RGBA);
      SelftestReport r = core.selftestImage(MODEL, 1, packedClaim);
      assertFalse(r.json, r.ok);
      double differing = MiniJson.number(MiniJson.parse(r.json), "tensor", "differing");
      assertTrue(r.json, differing > 0);
      Fixtures.REPORT.put("wrong_stride_differing", differing);
    }
  }

  @Test
  public void theSelftestReplaysVectorsAndImages() throws Exception {
    try (EdgekitCore core = EdgekitCore.open(Fixtures.folder("assets"), null)) {
      SelftestReport r = core.selftest(null);
      assertTrue(r.json, r.ok);
      Object report = MiniJson.parse(r.json);
      Object model = MiniJson.get(report, "models", 0);
      assertEquals(MODEL, MiniJson.string(model, "name"));
      assertEquals(Fixtures.expected("vectors"), (int) MiniJson.number(model, "vectors", "samples"));
      assertEquals(images.size(), (int) MiniJson.number(model, "images", "count"));
      assertEquals("stb_image", MiniJson.string(model, "images", "decoder"));
      Fixtures.REPORT.put("selftest_vectors", MiniJson.number(model, "vectors", "samples"));
      Fixtures.REPORT.put("selftest_images", MiniJson.number(model, "images", "count"));
      EdgekitException e = assertThrows(EdgekitException.class,
          () -> core.selftestImage(MODEL, images.size(), Fixtures.Layout.GRAY_ARRAY_PACKED.frame(
              Fixtures.readGray(images.get(0)))));
      assertEquals(Status.ARGUMENT, e.status());
    }
  }

  @Test
  public void theVersionLockRefusesAnotherOpt() {
    EdgekitException e = assertThrows(EdgekitException.class,
        () -> EdgekitCore.open(Fixtures.folder("other_opt"), null));
    assertEquals(Status.VERSION, e.status());
    assertTrue(e.getMessage(), e.getMessage().startsWith("refused (version mismatch): "));
    assertTrue(e.getMessage(), e.getMessage().contains("v2.12") && e.getMessage().contains("v2.13-rc"));
    Fixtures.REPORT.put("refusal_version", e.getMessage());
  }
}
