plugins {
    id("com.android.application")
    id("org.jetbrains.kotlin.android")
}

// Paddle-Lite's Android library: a path on the developer's machine, never downloaded (gradle.properties).
val paddleLiteDir: String? = providers.gradleProperty("edgekit.paddleLiteAndroidDir").orNull?.trim()?.ifEmpty { null }
val edgekitAbis: List<String> = providers.gradleProperty("edgekit.abis").getOrElse("arm64-v8a,armeabi-v7a")
    .split(',').map { it.trim() }.filter { it.isNotEmpty() }
val liteArch = mapOf("arm64-v8a" to "armv8", "armeabi-v7a" to "armv7")

android {
    namespace = "com.edgekit.demo"
    compileSdk = 34
    ndkVersion = providers.gradleProperty("edgekit.ndkVersion").getOrElse("26.1.10909125")

    defaultConfig {
        applicationId = "com.edgekit.demo"
        minSdk = 24  // the dynamic linker finds libedgekit_c.so and Paddle-Lite beside libedgekit_jni.so (API 23+)
        targetSdk = 34
        versionCode = 1
        versionName = "0.1.0"
        testInstrumentationRunner = "androidx.test.runner.AndroidJUnitRunner"

        ndk {
            abiFilters += edgekitAbis
        }
        externalNativeBuild {
            cmake {
                // c++_shared: Paddle-Lite's Android library links it, so the app must share it.
                arguments += listOf(
                    "-DANDROID_STL=c++_shared",
                    "-DEDGEKIT_PADDLE_LITE_ANDROID_DIR=${paddleLiteDir ?: ""}",
                )
                targets += listOf("edgekit_jni", "edgekit_c")
            }
        }
    }

    externalNativeBuild {
        cmake {
            path = file("src/main/cpp/CMakeLists.txt")
            version = "3.22.1"
        }
    }

    buildTypes {
        release {
            isMinifyEnabled = true
            proguardFiles(getDefaultProguardFile("proguard-android-optimize.txt"), "proguard-rules.pro")
        }
    }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions {
        jvmTarget = "17"
    }
}

// Stops the build before any native work, with the fix, when Paddle-Lite's library is not where the
// property says (CMakeLists.txt checks again, so an IDE sync says the same).
val checkPaddleLite by tasks.registering {
    val dir = paddleLiteDir
    val abis = edgekitAbis
    val archs = liteArch
    doLast {
        if (dir == null) {
            throw GradleException(
                "Paddle-Lite's Android library is not set: unpack Paddle-Lite v2.13-rc's Android release archives " +
                    "(inference_lite_lib.android.armv8 / .armv7, c++_shared) into one folder and set " +
                    "edgekit.paddleLiteAndroidDir=/that/folder in ~/.gradle/gradle.properties or android_demo/gradle.properties " +
                    "(see android_demo/README.md). The build never downloads it.")
        }
        for (abi in abis) {
            val arch = archs[abi] ?: throw GradleException("edgekit.abis: Paddle-Lite has no Android library for $abi")
            val found = File(dir).listFiles().orEmpty().filter {
                it.name.startsWith("inference_lite_lib.android.$arch") &&
                    File(it, "cxx/lib/libpaddle_light_api_shared.so").isFile
            }
            if (found.size != 1) {
                throw GradleException(
                    "edgekit.paddleLiteAndroidDir=$dir needs exactly one inference_lite_lib.android.$arch*/cxx/lib/" +
                        "libpaddle_light_api_shared.so for $abi (found ${found.size}); unpack that archive there, " +
                        "or leave $abi out of edgekit.abis")
            }
        }
    }
}
tasks.matching { it.name == "preBuild" }.configureEach { dependsOn(checkPaddleLite) }

dependencies {
    val camerax = "1.3.1"
    implementation("androidx.core:core-ktx:1.12.0")
    implementation("androidx.activity:activity-ktx:1.8.2")
    implementation("androidx.camera:camera-core:$camerax")
    implementation("androidx.camera:camera-camera2:$camerax")
    implementation("androidx.camera:camera-lifecycle:$camerax")
    implementation("androidx.camera:camera-view:$camerax")

    androidTestImplementation("androidx.test.ext:junit:1.1.5")
    androidTestImplementation("androidx.test:runner:1.5.2")
    androidTestImplementation("androidx.test:core:1.5.0")
}
