package com.edgekit.demo

import android.content.Context
import android.graphics.Bitmap
import android.graphics.Canvas
import android.graphics.Color
import android.graphics.Paint
import android.graphics.Path
import android.graphics.RectF
import android.util.AttributeSet
import android.view.View

/**
 * Draws the last result over the camera preview: the class (or recognised text) as a
 * headline, boxes (rotated quads for OCR) with their text, a segmentation mask as a translucent layer. Boxes come in image pixels and are mapped the way
 * PreviewView's default FILL_CENTER shows the frame (scaled to cover, centred); the analysis
 * and preview use cases share one aspect ratio, so the mapping lines up.
 */
class OverlayView @JvmOverloads constructor(context: Context, attrs: AttributeSet? = null) : View(context, attrs) {
    private var overlay: Overlay? = null
    private val density = resources.displayMetrics.density
    private val boxPaint = Paint(Paint.ANTI_ALIAS_FLAG).apply {
        style = Paint.Style.STROKE
        strokeWidth = 2f * density
        color = Color.rgb(0, 230, 118)
    }
    private val textPaint = Paint(Paint.ANTI_ALIAS_FLAG).apply {
        color = Color.WHITE
        textSize = 16f * density
        setShadowLayer(3f * density, 0f, 0f, Color.BLACK)
    }
    private val headlinePaint = Paint(textPaint).apply { textSize = 34f * density }

    private var maskBitmap: Bitmap? = null
    private val maskPaint = Paint(Paint.FILTER_BITMAP_FLAG)
    private val path = Path()

    fun show(result: Overlay?) {
        overlay = result
        maskBitmap = result?.mask?.let { m ->
            // class 0 is background (left clear, as camera_demo's draw_mask); others get a half-transparent colour
            val pixels = IntArray(m.width * m.height) { i ->
                val c = m.classes[i].toInt() and 0xff
                if (c == 0) 0 else PALETTE[(c - 1) % PALETTE.size]
            }
            Bitmap.createBitmap(pixels, m.width, m.height, Bitmap.Config.ARGB_8888)
        }
        postInvalidate()
    }

    override fun onDraw(canvas: Canvas) {
        super.onDraw(canvas)
        val o = overlay ?: return
        if (o.imageWidth <= 0 || o.imageHeight <= 0) return
        val scale = maxOf(width.toFloat() / o.imageWidth, height.toFloat() / o.imageHeight)
        val dx = (width - o.imageWidth * scale) / 2f
        val dy = (height - o.imageHeight * scale) / 2f
        maskBitmap?.let { canvas.drawBitmap(it, null, RectF(dx, dy, dx + o.imageWidth * scale, dy + o.imageHeight * scale), maskPaint) }
        for (box in o.boxes) {
            val r = RectF(dx + box.rect.left * scale, dy + box.rect.top * scale,
                dx + box.rect.right * scale, dy + box.rect.bottom * scale)
            val quad = box.quad
            if (quad != null) {
                path.reset()
                path.moveTo(dx + quad[0].x * scale, dy + quad[0].y * scale)
                for (k in 1 until 4) path.lineTo(dx + quad[k].x * scale, dy + quad[k].y * scale)
                path.close()
                canvas.drawPath(path, boxPaint)
            } else {
                canvas.drawRect(r, boxPaint)
            }
            box.text?.takeIf { it.isNotEmpty() }?.let { canvas.drawText(it, r.left, r.top - 4f * density, textPaint) }
        }
        o.headline?.let { canvas.drawText(it, 16f * density, 56f * density, headlinePaint) }
    }

    private companion object {
        val PALETTE = intArrayOf(0x80E6194B.toInt(), 0x803CB44B.toInt(), 0x80FFE119.toInt(), 0x804363D8.toInt(),
            0x80F58231.toInt(), 0x80911EB4.toInt(), 0x8046F0F0.toInt(), 0x80F032E6.toInt())
    }
}
