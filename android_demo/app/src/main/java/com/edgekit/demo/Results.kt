package com.edgekit.demo

import android.graphics.RectF
import org.json.JSONArray
import org.json.JSONObject

/** What the overlay draws, read from the core's JSON (edgekit_c.h: ek_run / ek_ocr results). */
data class Overlay(
    val imageWidth: Int,
    val imageHeight: Int,
    val headline: String?,
    val boxes: List<Box>
)

/** A box in image pixels, with the text to draw above it. */
data class Box(val rect: RectF, val text: String?)

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
            // the per-pixel mask is in "rle"; the overlay shows the class shares (no mask drawing here yet)
            "segmentation" -> Overlay(imageWidth, imageHeight, classShares((result as JSONObject).getJSONObject("classes")),
                emptyList())
            "ocr_rec" -> Overlay(imageWidth, imageHeight, (result as JSONObject).getString("text"), emptyList())
            "ocr_cls" -> Overlay(imageWidth, imageHeight, "angle ${(result as JSONObject).getString("label")}", emptyList())
            else -> Overlay(imageWidth, imageHeight, result.toString(), emptyList())
        }
    }

    private fun rect(box: JSONArray) =
        RectF(box.getDouble(0).toFloat(), box.getDouble(1).toFloat(), box.getDouble(2).toFloat(), box.getDouble(3).toFloat())

    private fun lines(lines: JSONArray) = (0 until lines.length()).map {
        val line = lines.getJSONObject(it)
        Box(rect(line.getJSONArray("box")), line.optString("text"))
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
        Box(rect(item.getJSONArray("box")), "%.2f".format(item.getDouble("score")))
    }
}
