package com.edgekit.demo

import android.content.Context
import android.content.res.AssetManager
import java.io.File
import java.io.FileNotFoundException

/**
 * Copies the asset set `edgekit package --platform android` wrote into the APK
 * (assets/edgekit) to plain files under filesDir, because the core reads files. The copy is
 * staged and renamed into place; it is redone when the APK's assets.json differs from the
 * installed one. Nothing is checked here: EdgekitCore.open verifies every file's sha256 and
 * the version lock, so a damaged copy is refused there, with the reason.
 */
class AssetInstaller(private val context: Context, private val assetRoot: String = "edgekit") {

    class NoAssets(message: String) : Exception(message)

    /** The folder to hand to EdgekitCore.open. */
    @Throws(NoAssets::class)
    fun install(): File {
        val assets = context.assets
        val index = try {
            assets.open("$assetRoot/assets.json").use { it.readBytes() }
        } catch (e: FileNotFoundException) {
            throw NoAssets(
                "The APK has no assets/$assetRoot/assets.json. Package your bundles with " +
                    "`./run edgekit package --platform android BUNDLE...` and rebuild the app.")
        }
        val target = File(context.filesDir, assetRoot)
        val installed = File(target, "assets.json")
        if (installed.isFile && installed.readBytes().contentEquals(index)) return target

        val staging = File(context.filesDir, "$assetRoot.staging").apply { deleteRecursively() }
        copyTree(assets, assetRoot, staging)
        val old = File(context.filesDir, "$assetRoot.old").apply { deleteRecursively() }
        if (target.exists() && !target.renameTo(old)) error("cannot move $target aside")
        if (!staging.renameTo(target)) error("cannot move $staging to $target")
        old.deleteRecursively()
        return target
    }

    // AssetManager.list() is empty for a file (and for an empty folder, which a packaged set has none of).
    private fun copyTree(assets: AssetManager, path: String, destination: File) {
        val children = assets.list(path).orEmpty()
        if (children.isEmpty()) {
            destination.parentFile?.mkdirs()
            assets.open(path).use { input -> destination.outputStream().use { input.copyTo(it) } }
            return
        }
        destination.mkdirs()
        for (child in children) copyTree(assets, "$path/$child", File(destination, child))
    }
}
