// The native methods of com.edgekit.demo.core.EdgekitCore: a thin layer over edgekit_c.h.
// It converts Java strings to UTF-8 and JSON results back, lends the core a Java pixel
// buffer (direct or array, with its row stride) for one call, and turns an ek_status into
// an EdgekitException carrying ek_last_error()'s one line. Nothing of the core is repeated
// here: verification, pre/post-processing and the self-test all happen behind edgekit_c.h.
//
// Methods are registered in JNI_OnLoad (a signature that drifts from the Java class fails
// at load time, not at the first call), so JNI_OnLoad is the library's only export.
#include <jni.h>

#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "edgekit_c.h"

namespace {

constexpr const char* kCoreClass = "com/edgekit/demo/core/EdgekitCore";
constexpr const char* kExceptionClass = "com/edgekit/demo/core/EdgekitException";

// Made in JNI_OnLoad: FindClass on a camera or test thread may not see the app's class loader.
jclass g_exception = nullptr;
jmethodID g_exception_init = nullptr;

// ---- strings -----------------------------------------------------------------------------
// JNI's GetStringUTFChars/NewStringUTF speak "modified UTF-8" (no 4-byte sequences), which
// breaks on emoji and rare CJK in paths, model names and OCR text. Go through UTF-16.

std::string to_utf8(JNIEnv* env, jstring text) {
  const jsize length = env->GetStringLength(text);
  std::vector<jchar> units(static_cast<std::size_t>(length));
  env->GetStringRegion(text, 0, length, units.data());
  std::string out;
  out.reserve(units.size());
  for (std::size_t i = 0; i < units.size(); ++i) {
    std::uint32_t c = units[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < units.size() && units[i + 1] >= 0xDC00 && units[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (units[++i] - 0xDC00);
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD;  // an unpaired surrogate
    }
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Invalid UTF-8 becomes U+FFFD rather than a JNI abort.
jstring to_jstring(JNIEnv* env, const char* utf8) {
  std::vector<jchar> units;
  const auto* s = reinterpret_cast<const unsigned char*>(utf8);
  while (*s) {
    std::uint32_t c = *s;
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    std::uint32_t code = extra == 1 ? c & 0x1F : extra == 2 ? c & 0x0F : extra == 3 ? c & 0x07 : c;
    int used = 1;
    for (int k = 1; k <= extra; ++k, ++used) {
      if ((s[k] & 0xC0) != 0x80) {
        extra = -1;
        break;
      }
      code = (code << 6) | (s[k] & 0x3F);
    }
    if (extra < 0 || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) code = 0xFFFD;
    if (code >= 0x10000) {
      units.push_back(static_cast<jchar>(0xD800 + ((code - 0x10000) >> 10)));
      units.push_back(static_cast<jchar>(0xDC00 + ((code - 0x10000) & 0x3FF)));
    } else {
      units.push_back(static_cast<jchar>(code));
    }
    s += used;
  }
  static const jchar kNone = 0;
  return env->NewString(units.empty() ? &kNone : units.data(), static_cast<jsize>(units.size()));
}

// A Java String argument that may be null (the C API gives NULL a meaning).
class Utf8 {
 public:
  Utf8(JNIEnv* env, jstring text) : null_(text == nullptr) {
    if (!null_) text_ = to_utf8(env, text);
  }
  const char* c_str() const { return null_ ? nullptr : text_.c_str(); }

 private:
  bool null_;
  std::string text_;
};

// ---- errors ------------------------------------------------------------------------------

void throw_java(JNIEnv* env, const char* class_name, const std::string& message) {
  jclass type = env->FindClass(class_name);
  if (type != nullptr) env->ThrowNew(type, message.c_str());  // our messages are ASCII
}

// EdgekitException(status, ek_last_error()): read at once, it lives until the next ek_* call.
void throw_status(JNIEnv* env, ek_status status) {
  const char* line = ek_last_error();
  const std::string message =
      (line != nullptr && *line != '\0') ? line : std::string(ek_status_name(status)) + " error (no message)";
  jstring text = to_jstring(env, message.c_str());
  if (text == nullptr) return;  // OutOfMemoryError pending
  auto error = static_cast<jthrowable>(env->NewObject(g_exception, g_exception_init, static_cast<jint>(status), text));
  if (error != nullptr) env->Throw(error);
}

// No C++ exception may cross into the JVM (the C API throws none; this guards our own code).
template <typename Result, typename Body>
Result guarded(JNIEnv* env, Result fallback, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    throw_java(env, "java/lang/OutOfMemoryError", "edgekit JNI bridge: out of memory");
  } catch (const std::exception& e) {
    throw_java(env, "java/lang/RuntimeException", std::string("edgekit JNI bridge: ") + e.what());
  }
  return fallback;
}

// A JSON string from the core, handed to Java and released.
jstring take_json(JNIEnv* env, char* json) {
  jstring out = to_jstring(env, json != nullptr ? json : "null");
  ek_free(json);
  return out;
}

ek_assets* assets_of(jlong handle) { return reinterpret_cast<ek_assets*>(static_cast<std::intptr_t>(handle)); }

// ---- pixels ------------------------------------------------------------------------------

// Java pixels lent to the core for one call: the bounds are checked here, where the pointer
// is made, because the core trusts width/height/stride. An array is pinned (or copied) and
// released without copying back.
class Pixels {
 public:
  Pixels(JNIEnv* env, jobject direct, jbyteArray array, jint offset, jint width, jint height, jint stride, jint format)
      : env_(env), array_(array) {
    static const int kChannels[] = {1, 3, 3, 4, 4};  // EK_PIXEL_GRAY, _BGR, _RGB, _BGRA, _RGBA
    if (format < EK_PIXEL_GRAY || format > EK_PIXEL_RGBA) {
      throw_java(env, "java/lang/IllegalArgumentException", "pixel format " + std::to_string(format) + " is unknown");
      return;
    }
    const std::int64_t row = static_cast<std::int64_t>(width) * kChannels[format];
    const std::int64_t step = stride == 0 ? row : stride;
    if (width <= 0 || height <= 0 || stride < 0 || (stride != 0 && stride < row) || offset < 0) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 "bad frame: " + std::to_string(width) + "x" + std::to_string(height) + ", stride " +
                     std::to_string(stride) + ", offset " + std::to_string(offset));
      return;
    }
    const std::int64_t needed = offset + step * (height - 1) + row;
    std::int64_t size = 0;
    const std::uint8_t* base = nullptr;
    if (direct != nullptr) {
      base = static_cast<const std::uint8_t*>(env->GetDirectBufferAddress(direct));
      size = env->GetDirectBufferCapacity(direct);
      if (base == nullptr || size < 0) {
        throw_java(env, "java/lang/IllegalArgumentException", "the pixel buffer is not a direct ByteBuffer");
        return;
      }
    } else if (array != nullptr) {
      size = env->GetArrayLength(array);
    } else {
      throw_java(env, "java/lang/NullPointerException", "no pixels");
      return;
    }
    if (needed > size) {
      throw_java(env, "java/lang/IllegalArgumentException",
                 "the frame needs " + std::to_string(needed) + " bytes from the buffer's start, it has " +
                     std::to_string(size));
      return;
    }
    if (direct == nullptr) {
      elements_ = env->GetByteArrayElements(array, nullptr);
      if (elements_ == nullptr) return;  // OutOfMemoryError pending
      base = reinterpret_cast<const std::uint8_t*>(elements_);
    }
    image_ = ek_image{base + offset, width, height, stride, format};
    ok_ = true;
  }
  ~Pixels() {
    if (elements_ != nullptr) env_->ReleaseByteArrayElements(array_, elements_, JNI_ABORT);
  }
  Pixels(const Pixels&) = delete;
  Pixels& operator=(const Pixels&) = delete;

  bool ok() const { return ok_; }
  const ek_image* image() const { return &image_; }

 private:
  JNIEnv* env_;
  jbyteArray array_;
  jbyte* elements_ = nullptr;
  ek_image image_{};
  bool ok_ = false;
};

void set_flag(JNIEnv* env, jbooleanArray out, bool value) {
  if (out != nullptr && env->GetArrayLength(out) > 0) {
    const jboolean flag = value ? JNI_TRUE : JNI_FALSE;
    env->SetBooleanArrayRegion(out, 0, 1, &flag);
  }
}

// ---- the native methods ------------------------------------------------------------------

jstring JNICALL native_version(JNIEnv* env, jclass) { return to_jstring(env, ek_version()); }

jstring JNICALL native_status_name(JNIEnv* env, jclass, jint status) {
  if (status < EK_OK || status > EK_E_SELFTEST) return to_jstring(env, "unknown");
  return to_jstring(env, ek_status_name(static_cast<ek_status>(status)));
}

jlong JNICALL native_open(JNIEnv* env, jclass, jstring folder, jstring options) {
  return guarded<jlong>(env, 0, [&]() -> jlong {
    const Utf8 path(env, folder), opts(env, options);
    ek_assets* assets = nullptr;
    const ek_status status = ek_open(path.c_str(), opts.c_str(), &assets);
    if (status != EK_OK) {
      throw_status(env, status);
      return 0;
    }
    return static_cast<jlong>(reinterpret_cast<std::intptr_t>(assets));
  });
}

void JNICALL native_close(JNIEnv*, jclass, jlong handle) { ek_close(assets_of(handle)); }

jstring JNICALL native_describe(JNIEnv* env, jclass, jlong handle) {
  return guarded<jstring>(env, nullptr, [&]() -> jstring {
    char* json = nullptr;
    const ek_status status = ek_describe(assets_of(handle), &json);
    if (status != EK_OK) {
      throw_status(env, status);
      return nullptr;
    }
    return take_json(env, json);
  });
}

jstring JNICALL native_run(JNIEnv* env, jclass, jlong handle, jstring model, jobject direct, jbyteArray array,
                           jint offset, jint width, jint height, jint stride, jint format) {
  return guarded<jstring>(env, nullptr, [&]() -> jstring {
    const Utf8 name(env, model);
    const Pixels pixels(env, direct, array, offset, width, height, stride, format);
    if (!pixels.ok()) return nullptr;
    char* json = nullptr;
    const ek_status status = ek_run(assets_of(handle), name.c_str(), pixels.image(), &json);
    if (status != EK_OK) {
      throw_status(env, status);
      return nullptr;
    }
    return take_json(env, json);
  });
}

jstring JNICALL native_ocr(JNIEnv* env, jclass, jlong handle, jstring det, jstring rec, jstring cls, jobject direct,
                           jbyteArray array, jint offset, jint width, jint height, jint stride, jint format) {
  return guarded<jstring>(env, nullptr, [&]() -> jstring {
    const Utf8 det_name(env, det), rec_name(env, rec), cls_name(env, cls);
    const Pixels pixels(env, direct, array, offset, width, height, stride, format);
    if (!pixels.ok()) return nullptr;
    char* json = nullptr;
    const ek_status status =
        ek_ocr(assets_of(handle), det_name.c_str(), rec_name.c_str(), cls_name.c_str(), pixels.image(), &json);
    if (status != EK_OK) {
      throw_status(env, status);
      return nullptr;
    }
    return take_json(env, json);
  });
}

jdoubleArray JNICALL native_last_timings(JNIEnv* env, jclass, jlong handle) {
  ek_timings t{};
  const ek_status status = ek_last_timings(assets_of(handle), &t);
  if (status != EK_OK) {
    throw_status(env, status);
    return nullptr;
  }
  const jdouble values[] = {t.preprocess_ms, t.inference_ms, t.postprocess_ms, t.other_ms, t.total_ms};
  jdoubleArray out = env->NewDoubleArray(5);
  if (out != nullptr) env->SetDoubleArrayRegion(out, 0, 5, values);
  return out;
}

// EK_E_SELFTEST still returns its report: that is ok[0] = false, not an exception.
jstring selftest_result(JNIEnv* env, ek_status status, char* json, jbooleanArray ok) {
  if (status != EK_OK && status != EK_E_SELFTEST) {
    ek_free(json);
    throw_status(env, status);
    return nullptr;
  }
  set_flag(env, ok, status == EK_OK);
  return take_json(env, json);
}

jstring JNICALL native_selftest(JNIEnv* env, jclass, jlong handle, jstring model, jbooleanArray ok) {
  return guarded<jstring>(env, nullptr, [&]() -> jstring {
    const Utf8 name(env, model);
    char* json = nullptr;
    const ek_status status = ek_selftest(assets_of(handle), name.c_str(), &json);
    return selftest_result(env, status, json, ok);
  });
}

jstring JNICALL native_selftest_image(JNIEnv* env, jclass, jlong handle, jstring model, jint index, jobject direct,
                                      jbyteArray array, jint offset, jint width, jint height, jint stride, jint format,
                                      jbooleanArray ok) {
  return guarded<jstring>(env, nullptr, [&]() -> jstring {
    const Utf8 name(env, model);
    const Pixels pixels(env, direct, array, offset, width, height, stride, format);
    if (!pixels.ok()) return nullptr;
    char* json = nullptr;
    const ek_status status = ek_selftest_image(assets_of(handle), name.c_str(), index, pixels.image(), &json);
    return selftest_result(env, status, json, ok);
  });
}

// Decoded pixels are copied into a Java array; shape[] = {width, height, stride, format}.
jbyteArray JNICALL native_decode(JNIEnv* env, jclass, jbyteArray encoded, jintArray shape) {
  return guarded<jbyteArray>(env, nullptr, [&]() -> jbyteArray {
    if (env->GetArrayLength(shape) < 4) {
      throw_java(env, "java/lang/IllegalArgumentException", "shape must have 4 entries");
      return nullptr;
    }
    const jsize size = env->GetArrayLength(encoded);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    env->GetByteArrayRegion(encoded, 0, size, reinterpret_cast<jbyte*>(bytes.data()));
    ek_image image{};
    const ek_status status = ek_image_decode(bytes.data(), bytes.size(), &image);
    if (status != EK_OK) {
      throw_status(env, status);
      return nullptr;
    }
    const jsize length = static_cast<jsize>(static_cast<std::int64_t>(image.stride) * image.height);
    jbyteArray out = env->NewByteArray(length);
    if (out != nullptr) {
      env->SetByteArrayRegion(out, 0, length, reinterpret_cast<const jbyte*>(image.data));
      const jint dims[] = {image.width, image.height, image.stride, image.format};
      env->SetIntArrayRegion(shape, 0, 4, dims);
    }
    ek_image_free(&image);
    return out;
  });
}

// jni.h of some JDKs declares the table's strings as char*.
#define EK_METHOD(name, signature, function) \
  JNINativeMethod { const_cast<char*>(name), const_cast<char*>(signature), reinterpret_cast<void*>(function) }

}  // namespace

extern "C" JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  jclass exception = env->FindClass(kExceptionClass);
  if (exception == nullptr) return JNI_ERR;
  g_exception = static_cast<jclass>(env->NewGlobalRef(exception));
  g_exception_init = env->GetMethodID(g_exception, "<init>", "(ILjava/lang/String;)V");
  if (g_exception_init == nullptr) return JNI_ERR;

  const JNINativeMethod methods[] = {
      EK_METHOD("nativeVersion", "()Ljava/lang/String;", native_version),
      EK_METHOD("nativeStatusName", "(I)Ljava/lang/String;", native_status_name),
      EK_METHOD("nativeOpen", "(Ljava/lang/String;Ljava/lang/String;)J", native_open),
      EK_METHOD("nativeClose", "(J)V", native_close),
      EK_METHOD("nativeDescribe", "(J)Ljava/lang/String;", native_describe),
      EK_METHOD("nativeRun", "(JLjava/lang/String;Ljava/nio/ByteBuffer;[BIIIII)Ljava/lang/String;", native_run),
      EK_METHOD("nativeOcr",
                "(JLjava/lang/String;Ljava/lang/String;Ljava/lang/String;Ljava/nio/ByteBuffer;[BIIIII)Ljava/lang/String;",
                native_ocr),
      EK_METHOD("nativeLastTimings", "(J)[D", native_last_timings),
      EK_METHOD("nativeSelftest", "(JLjava/lang/String;[Z)Ljava/lang/String;", native_selftest),
      EK_METHOD("nativeSelftestImage", "(JLjava/lang/String;ILjava/nio/ByteBuffer;[BIIIII[Z)Ljava/lang/String;",
                native_selftest_image),
      EK_METHOD("nativeDecode", "([B[I)[B", native_decode),
  };
  jclass core = env->FindClass(kCoreClass);
  if (core == nullptr) return JNI_ERR;
  if (env->RegisterNatives(core, methods, static_cast<jint>(sizeof methods / sizeof methods[0])) != JNI_OK) {
    return JNI_ERR;
  }
  return JNI_VERSION_1_6;
}
