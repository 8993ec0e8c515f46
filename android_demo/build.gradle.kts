// Versions of the Android Gradle plugin and Kotlin; the app's build is app/build.gradle.kts.
plugins {
    id("com.android.application") version "8.2.2" apply false
    id("org.jetbrains.kotlin.android") version "1.9.22" apply false
}
