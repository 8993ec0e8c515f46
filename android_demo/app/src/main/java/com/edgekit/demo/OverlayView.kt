package com.edgekit.demo

import android.content.Context
import android.graphics.Canvas
import android.graphics.Color
import android.graphics.Paint
import android.graphics.RectF
import android.util.AttributeSet
import android.view.View

/**
 * Draws the last result over the camera preview: the class (or recognised text) as a
 * headline, boxes with their text. Boxes come in image pixels and are mapped the way
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

    fun show(result: Overlay?) {
        overlay = result
        postInvalidate()
    }

    override fun onDraw(canvas: Canvas) {
        super.onDraw(canvas)
        val o = overlay ?: return
        if (o.imageWidth <= 0 || o.imageHeight <= 0) return
        val scale = maxOf(width.toFloat() / o.imageWidth, height.toFloat() / o.imageHeight)
        val dx = (width - o.imageWidth * scale) / 2f
        val dy = (height - o.imageHeight * scale) / 2f
        for (box in o.boxes) {
            val r = RectF(dx + box.rect.left * scale, dy + box.rect.top * scale,
                dx + box.rect.right * scale, dy + box.rect.bottom * scale)
            canvas.drawRect(r, boxPaint)
            box.text?.takeIf { it.isNotEmpty() }?.let { canvas.drawText(it, r.left, r.top - 4f * density, textPaint) }
        }
        o.headline?.let { canvas.drawText(it, 16f * density, 56f * density, headlinePaint) }
    }
}
