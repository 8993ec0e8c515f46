package com.edgekit.demo

import android.Manifest
import android.content.pm.PackageManager
import android.os.Bundle
import android.view.View
import android.widget.TextView
import androidx.activity.ComponentActivity
import androidx.activity.result.contract.ActivityResultContracts
import androidx.camera.core.CameraSelector
import androidx.camera.core.ImageAnalysis
import androidx.camera.core.ImageProxy
import androidx.camera.core.Preview
import androidx.camera.core.resolutionselector.AspectRatioStrategy
import androidx.camera.core.resolutionselector.ResolutionSelector
import androidx.camera.lifecycle.ProcessCameraProvider
import androidx.camera.view.PreviewView
import androidx.core.content.ContextCompat
import com.edgekit.demo.core.EdgekitCore
import com.edgekit.demo.core.EdgekitException
import com.edgekit.demo.core.Frame
import com.edgekit.demo.core.PixelFormat
import org.json.JSONObject
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors

/**
 * Camera -> core -> overlay. CameraX delivers RGBA_8888 frames (rotated upright) to one
 * worker thread, which hands the plane's direct buffer and row stride to the core through
 * JNI (no copy), draws the result and shows the per-stage timings. The asset set is copied
 * out of the APK and verified on the same thread before the first frame; a refused set is
 * shown with the core's reason and nothing runs.
 */
class MainActivity : ComponentActivity() {
    private lateinit var preview: PreviewView
    private lateinit var overlay: OverlayView
    private lateinit var status: TextView
    private lateinit var timings: TextView
    private lateinit var refusal: TextView

    // Opening, every frame and closing run here, in order: the core is never used concurrently.
    private val worker: ExecutorService = Executors.newSingleThreadExecutor()
    private var core: EdgekitCore? = null  // touched on the worker only
    @Volatile private var modes: List<Mode> = emptyList()
    @Volatile private var modeIndex = 0

    /** What one frame runs: one model, or the OCR system over the set's det/rec(/cls) models. */
    private sealed class Mode(val title: String) {
        class Single(val model: String, task: String) : Mode("$model ($task)")
        object Ocr : Mode("OCR system (det → cls → rec)")
    }

    private val askCamera = registerForActivityResult(ActivityResultContracts.RequestPermission()) { granted ->
        if (granted) startCamera() else status.setText(R.string.camera_denied)
    }

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        setContentView(R.layout.activity_main)
        preview = findViewById(R.id.preview)
        overlay = findViewById(R.id.overlay)
        status = findViewById(R.id.status)
        timings = findViewById(R.id.timings)
        refusal = findViewById(R.id.refusal)
        status.setOnClickListener { if (modes.size > 1) modeIndex = (modeIndex + 1) % modes.size }

        worker.execute { openCore() }
        if (ContextCompat.checkSelfPermission(this, Manifest.permission.CAMERA) == PackageManager.PERMISSION_GRANTED) {
            startCamera()
        } else {
            askCamera.launch(Manifest.permission.CAMERA)
        }
    }

    override fun onDestroy() {
        super.onDestroy()
        worker.execute { core?.close(); core = null }
        worker.shutdown()
    }

    private fun openCore() {
        try {
            val folder = AssetInstaller(this).install()
            val opened = EdgekitCore.open(folder.path, """{"threads": 2, "power_mode": "high"}""")
            val described = JSONObject(opened.describe())
            modes = modesOf(described)
            core = opened
            val runtime = JSONObject(EdgekitCore.versionJson()).optString("runtime", "none")
            val line = "verified ${described.getInt("files")} files in %.1f ms · Paddle-Lite $runtime"
                .format(described.getDouble("verify_ms"))
            runOnUiThread { status.text = "$line\n${modes.getOrNull(modeIndex)?.title ?: "no model"} (tap to switch)" }
        } catch (e: EdgekitException) {
            showRefusal(if (e.isRefusal) "Asset set refused: ${e.message}" else "Cannot open the assets: ${e.message}")
        } catch (e: AssetInstaller.NoAssets) {
            showRefusal(e.message ?: "no assets")
        }
    }

    private fun modesOf(described: JSONObject): List<Mode> {
        val models = described.getJSONArray("models")
        val tasks = (0 until models.length()).map { models.getJSONObject(it) }
            .map { it.getString("name") to it.optString("task") }
        val ocr = if (tasks.any { it.second == "ocr_det" } && tasks.any { it.second == "ocr_rec" }) listOf(Mode.Ocr) else emptyList()
        return ocr + tasks.map { (name, task) -> Mode.Single(name, task) }
    }

    private fun showRefusal(message: String) = runOnUiThread {
        refusal.text = message
        refusal.visibility = View.VISIBLE
        status.text = ""
    }

    private fun startCamera() {
        val future = ProcessCameraProvider.getInstance(this)
        future.addListener({
            val provider = future.get()
            val sameAspect = ResolutionSelector.Builder()
                .setAspectRatioStrategy(AspectRatioStrategy.RATIO_4_3_FALLBACK_AUTO_STRATEGY).build()
            val shown = Preview.Builder().setResolutionSelector(sameAspect).build()
                .also { it.setSurfaceProvider(preview.surfaceProvider) }
            val analysis = ImageAnalysis.Builder()
                .setResolutionSelector(sameAspect)
                .setOutputImageFormat(ImageAnalysis.OUTPUT_IMAGE_FORMAT_RGBA_8888)
                .setOutputImageRotationEnabled(true)  // upright pixels: what the model saw in training
                .setBackpressureStrategy(ImageAnalysis.STRATEGY_KEEP_ONLY_LATEST)
                .build()
            analysis.setAnalyzer(worker, ::analyze)
            provider.unbindAll()
            provider.bindToLifecycle(this, CameraSelector.DEFAULT_BACK_CAMERA, shown, analysis)
        }, ContextCompat.getMainExecutor(this))
    }

    // On the worker thread; the frame goes back to CameraX when done, whatever happens.
    private fun analyze(image: ImageProxy) {
        try {
            analyzeFrame(image)
        } finally {
            image.close()
        }
    }

    private fun analyzeFrame(image: ImageProxy) {
        val opened = core ?: return
        val mode = modes.getOrNull(modeIndex) ?: return
        val plane = image.planes[0]
        if (plane.pixelStride != 4) {
            showRefusal("camera delivered ${plane.pixelStride} bytes per pixel, expected RGBA_8888")
            return
        }
        val frame = Frame.of(plane.buffer, image.width, image.height, plane.rowStride, PixelFormat.RGBA)
        try {
            val json = when (mode) {
                is Mode.Single -> opened.run(mode.model, frame)
                Mode.Ocr -> opened.ocr(null, null, null, frame)
            }
            val result = Results.parse(json, image.width, image.height)
            val stages = opened.lastTimings()
            runOnUiThread {
                overlay.show(result)
                timings.text = "${mode.title}  ${image.width}x${image.height}\n$stages"
            }
        } catch (e: EdgekitException) {
            runOnUiThread {
                overlay.show(null)
                timings.text = "${e.status().coreName()}: ${e.message}"
            }
        }
    }
}
