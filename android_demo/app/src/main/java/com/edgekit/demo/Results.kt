package com.edgekit.demo

import android.graphics.PointF
import android.graphics.RectF
import org.json.JSONArray
import org.json.JSONObject

/** What the overlay draws, read from the core's JSON (edgekit_c.h: ek_run / ek_ocr results). */
data class Overlay(
    val imageWidth: Int,
    val imageHeight: Int,
    val headline: String?,
    val boxes: List<Box>,
    val mask: Mask? = null
)

/** A box in image pixels, with the text to draw above it; [quad] (4 corners, clockwise from top-left) when the core gave one. */
data class Box(val rect: RectF, val text: String?, val quad: List<PointF>? = null)

/** A segmentation class map (row-major, one class per pixel) decoded from the core's "rle". */
class Mask(val width: Int, val height: Int, val classes: ByteArray)

object Results {
    /** ek_run's {"model", "task", "result", ...} or ek_ocr's {"lines", ...}. */
    fun parse(json: String, imageWidth: Int, imageHeight: Int): Overlay {
        val doc = JSONObject(json)
        if (doc.has("lines")) return Overlay(imageWidth, imageHeight, null, lines(doc.getJSONArray("lines")))
        val result = doc.get("result")
        return when (doc.optString("task")) {
            "classification" -> {
                val r = result as JSONObject
                Overlay(imageWidth, imageHeight, "${r.optString("label", r.opt("class").toString())}  " +
                    "%.3f".format(r.getDouble("score")), emptyList())
            }
            "ocr_det" -> Overlay(imageWidth, imageHeight, null, boxes(result as JSONArray))
            "detection" -> Overlay(imageWidth, imageHeight, null, detections(result as JSONArray))
            "segmentation" -> (result as JSONObject).let {
                Overlay(imageWidth, imageHeight, classShares(it.getJSONObject("classes")), emptyList(), mask(it))
            }
            "ocr_rec" -> Overlay(imageWidth, imageHeight, (result as JSONObject).getString("text"), emptyList())
            "ocr_cls" -> Overlay(imageWidth, imageHeight, "angle ${(result as JSONObject).getString("label")}", emptyList())
            else -> Overlay(imageWidth, imageHeight, result.toString(), emptyList())
        }
    }

    private fun rect(box: JSONArray) =
        RectF(box.getDouble(0).toFloat(), box.getDouble(1).toFloat(), box.getDouble(2).toFloat(), box.getDouble(3).toFloat())

    private fun quad(item: JSONObject): List<PointF>? {
        val q = item.optJSONArray("quad") ?: return null
        if (q.length() != 4) return null
        return (0 until 4).map { val p = q.getJSONArray(it); PointF(p.getDouble(0).toFloat(), p.getDouble(1).toFloat()) }
    }

    /** The class of every image pixel from "size": [h, w] and "rle": [[class, run], ...]; null when malformed. */
    private fun mask(result: JSONObject): Mask? {
        val size = result.optJSONArray("size") ?: return null
        val rle = result.optJSONArray("rle") ?: return null
        val h = size.getInt(0); val w = size.getInt(1)
        val classes = ByteArray(h * w)
        var at = 0
        for (i in 0 until rle.length()) {
            val run = rle.getJSONArray(i)
            val n = run.getInt(1)
            if (n < 0 || at + n > classes.size) return null
            classes.fill(run.getInt(0).toByte(), at, at + n)
            at += n
        }
        return if (at == classes.size) Mask(w, h, classes) else null
    }

    private fun lines(lines: JSONArray) = (0 until lines.length()).map {
        val line = lines.getJSONObject(it)
        Box(rect(line.getJSONArray("box")), line.optString("text"), quad(line))
    }

    /** Detections scoring at least [minScore] (the core returns every one above task.json's threshold). */
    private fun detections(items: JSONArray, minScore: Double = 0.5) = (0 until items.length())
        .map { items.getJSONObject(it) }
        .filter { it.getDouble("score") >= minScore }
        .map { Box(rect(it.getJSONArray("box")), "${it.getString("label")} " + "%.2f".format(it.getDouble("score"))) }

    private fun classShares(classes: JSONObject) =
        classes.keys().asSequence().joinToString("  ") { "$it " + "%.1f%%".format(classes.getDouble(it)) }

    private fun boxes(items: JSONArray) = (0 until items.length()).map {
        val item = items.getJSONObject(it)
        Box(rect(item.getJSONArray("box")), "%.2f".format(item.getDouble("score")), quad(item))
    }
}
