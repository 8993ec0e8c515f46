package com.edgekit.demo

import android.graphics.Bitmap
import android.graphics.BitmapFactory
import androidx.test.ext.junit.runners.AndroidJUnit4
import androidx.test.platform.app.InstrumentationRegistry
import com.edgekit.demo.core.EdgekitCore
import com.edgekit.demo.core.EdgekitException
import com.edgekit.demo.core.Frame
import com.edgekit.demo.core.PixelFormat
import org.json.JSONObject
import org.junit.Assert.assertEquals
import org.junit.Assert.assertFalse
import org.junit.Assert.assertTrue
import org.junit.Assert.fail
import org.junit.Test
import org.junit.runner.RunWith
import java.io.File
import java.nio.ByteBuffer

/**
 * On the device, through the app's own installer, JNI bridge and Paddle-Lite: the packaged
 * asset set verifies, the golden vectors replay within the bundle's tolerances, every golden
 * image decoded by BitmapFactory gives Python's tensor exactly and Python's result, and a
 * tampered copy is refused with its reason.
 */
@RunWith(AndroidJUnit4::class)
class GoldenSelfTest {
    private val context = InstrumentationRegistry.getInstrumentation().targetContext
    private fun folder(): File = AssetInstaller(context).install()

    @Test
    fun theAssetSetVerifiesAgainstTheLinkedRuntime() {
        EdgekitCore.open(folder().path, null).use { core ->
            val described = JSONObject(core.describe())
            val runtime = JSONObject(EdgekitCore.versionJson()).getString("runtime")
            assertEquals(runtime, described.getString("runtime_version"))
            assertEquals(runtime, described.getString("opt_version"))
            val models = described.getJSONArray("models")
            assertTrue("no models", models.length() > 0)
            for (i in 0 until models.length()) assertTrue(models.getJSONObject(i).getBoolean("loaded"))
        }
    }

    @Test
    fun goldenVectorsReplayWithinTolerance() {
        EdgekitCore.open(folder().path, null).use { core ->
            val report = core.selftest(null)
            assertTrue(report.json, report.ok)
        }
    }

    @Test
    fun goldenImagesDecodedOnTheDeviceGivePythonsTensorsAndResults() {
        var checked = 0
        EdgekitCore.open(folder().path, null).use { core ->
            val models = JSONObject(core.describe()).getJSONArray("models")
            for (m in 0 until models.length()) {
                val model = models.getJSONObject(m)
                val images = model.getJSONArray("golden_images")
                for (i in 0 until images.length()) {
                    val report = core.selftestImage(model.getString("name"), i, decode(images.getString(i)))
                    assertTrue("${model.getString("name")} image $i: ${report.json}", report.ok)
                    assertEquals(0, JSONObject(report.json).getJSONObject("tensor").getInt("differing"))
                    checked++
                }
            }
        }
        assertTrue("the asset set has no golden images", checked > 0)
    }

    @Test
    fun aTamperedCopyIsRefusedWithItsReason() {
        val copy = File(context.cacheDir, "tampered").apply { deleteRecursively() }
        folder().copyRecursively(copy)
        val nb = copy.walkTopDown().first { it.name == "model.nb" }
        val bytes = nb.readBytes()
        bytes[bytes.size / 2] = (bytes[bytes.size / 2].toInt() xor 1).toByte()
        nb.writeBytes(bytes)
        try {
            EdgekitCore.open(copy.path, null).close()
            fail("a changed model.nb was accepted")
        } catch (e: EdgekitException) {
            assertEquals(EdgekitException.Status.ASSETS, e.status())
            assertTrue(e.message, e.message!!.startsWith("refused (checksum mismatch): "))
            assertFalse(e.message, e.message!!.contains('\n'))
        } finally {
            copy.deleteRecursively()
        }
    }

    // As an app decodes: ARGB_8888 (RGBA bytes), not premultiplied (Python drops alpha, it does not apply it).
    private fun decode(path: String): Frame {
        val options = BitmapFactory.Options().apply {
            inPreferredConfig = Bitmap.Config.ARGB_8888
            inPremultiplied = false
            inScaled = false
        }
        val bitmap = BitmapFactory.decodeFile(path, options) ?: error("BitmapFactory cannot decode $path")
        val pixels = ByteBuffer.allocateDirect(bitmap.rowBytes * bitmap.height)
        bitmap.copyPixelsToBuffer(pixels)
        pixels.rewind()
        return Frame.of(pixels, bitmap.width, bitmap.height, bitmap.rowBytes, PixelFormat.RGBA)
    }
}
