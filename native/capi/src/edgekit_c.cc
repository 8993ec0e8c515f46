// The C API over the app core: every entry point catches everything, maps it to an
// ek_status and a thread-local message, and hands results out as malloc'd JSON.
#include "edgekit_c.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/decode.h"
#include "edgekit/engine.h"
#include "edgekit/error.h"
#include "edgekit/json.h"
#include "edgekit/model.h"
#include "edgekit/ocr.h"
#include "edgekit/platform.h"
#include "edgekit/selftest.h"
#include "edgekit/signature.h"

#ifndef EDGEKIT_VERSION
#define EDGEKIT_VERSION "0.0.0"
#endif

using namespace edgekit;

struct ek_assets {
  std::mutex lock;
  AssetSet set;
  std::shared_ptr<const Runtime> runtime;
  std::vector<std::unique_ptr<Model>> models;  // one per set.models entry; null when not loaded
  double cls_thresh = kClsThresh;
  ek_timings last{};
};

namespace {

thread_local std::string t_last_error;

// A part this build does not have (no runtime, no decoder).
class Unavailable : public Error {
 public:
  Unavailable(const std::string& what, std::string fix) : Error(ExitCode::usage, what, std::move(fix)) {}
};

ek_status status_of(const Error& e) {
  switch (e.code()) {
    case ExitCode::ok: return EK_OK;
    case ExitCode::internal: return EK_E_INTERNAL;
    case ExitCode::usage: return EK_E_ARGUMENT;
    case ExitCode::model: return EK_E_MODEL;
    case ExitCode::version: return EK_E_VERSION;
    case ExitCode::input: return EK_E_INPUT;
    case ExitCode::run: return EK_E_RUN;
    case ExitCode::output: return EK_E_OUTPUT;
    case ExitCode::signature: return EK_E_SIGNATURE;
  }
  return EK_E_INTERNAL;
}

// Runs `body`; no exception leaves: each becomes a status and the thread's message.
template <typename Body>
ek_status guarded(Body&& body) {
  try {
    t_last_error.clear();
    return body();
  } catch (const AssetError& e) {
    t_last_error = e.line();
    if (e.reason() == Refusal::signature) return EK_E_SIGNATURE;
    return e.reason() == Refusal::version_mismatch ? EK_E_VERSION : EK_E_ASSETS;
  } catch (const Unavailable& e) {
    t_last_error = e.line();
    return EK_E_UNAVAILABLE;
  } catch (const Error& e) {
    t_last_error = e.line();
    return status_of(e);
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory; close other models or use smaller inputs";
    return EK_E_INTERNAL;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what() + "; please report it";
    return EK_E_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: unknown exception; please report it";
    return EK_E_INTERNAL;
  }
}

char* copy_out(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void require(bool ok, const std::string& what, const std::string& fix) {
  if (!ok) throw Error(ExitCode::usage, what, fix);
}

ImageView view_of(const ek_image* image) {
  require(image != nullptr, "image is NULL", "pass an ek_image");
  if (image->format < EK_PIXEL_GRAY || image->format > EK_PIXEL_RGBA) {
    throw Error(ExitCode::input, "pixel format " + std::to_string(image->format) + " is unknown",
                "use EK_PIXEL_GRAY, _BGR, _RGB, _BGRA or _RGBA");
  }
  if (image->stride < 0) throw Error(ExitCode::input, "negative row stride", "give the stride in bytes (0: packed)");
  static const PixelOrder orders[] = {PixelOrder::gray, PixelOrder::bgr, PixelOrder::rgb, PixelOrder::bgra,
                                      PixelOrder::rgba};
  ImageView view = ImageView::of(image->data, image->height, image->width, orders[image->format],
                                 static_cast<std::size_t>(image->stride));
  view.check();
  return view;
}

struct Options {
  RunConfig run;
  int top_k = 1;
  double cls_thresh = kClsThresh;
  std::optional<std::vector<std::string>> only;  // "models": load only these ([] loads none)
};

Options parse_options(const char* text) {
  Options o;
  if (text == nullptr || *text == '\0') return o;
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Error& e) {
    throw Error(ExitCode::usage, std::string("options are not JSON: ") + e.what(), "pass NULL or a JSON object");
  }
  require(doc.is_object(), "options are not a JSON object", "pass NULL or {\"threads\": 2, ...}");
  for (const auto& [key, value] : doc.members()) {
    if (key == "threads") {
      require(value.is_integer() && value.as_int() >= 1 && value.as_int() <= 64, "threads must be 1..64", "e.g. 2");
      o.run.threads = static_cast<int>(value.as_int());
    } else if (key == "power_mode") {
      const auto mode = value.is_string() ? power_mode_from_name(value.as_string()) : std::nullopt;
      require(mode.has_value(), "power_mode " + value.dump() + " is unknown", "use one of " + power_mode_names());
      o.run.power_mode = *mode;
    } else if (key == "top_k") {
      require(value.is_integer() && value.as_int() >= 1, "top_k must be an integer >= 1", "e.g. 5");
      o.top_k = static_cast<int>(value.as_int());
    } else if (key == "cls_thresh") {
      require(value.is_number() && value.as_number() >= 0 && value.as_number() <= 1, "cls_thresh must be in [0, 1]",
              "PaddleOCR's default is 0.9");
      o.cls_thresh = value.as_number();
    } else if (key == "models") {
      require(value.is_array(), "models must be a list of names", "e.g. [\"ppocrv4-det\"]");
      o.only.emplace();
      for (const Json& name : value.items()) {
        require(name.is_string(), "models must be a list of names", "e.g. [\"ppocrv4-det\"]");
        o.only->push_back(name.as_string());
      }
    } else {
      throw Error(ExitCode::usage, "unknown option \"" + key + "\"",
                  "use threads, power_mode, top_k, cls_thresh or models");
    }
  }
  return o;
}

std::size_t model_index(const ek_assets* a, const char* name) {
  require(name != nullptr, "model name is NULL", "pass a name from ek_describe");
  const ModelAssets& wanted = a->set.model(name);  // Error(usage) listing the names
  return static_cast<std::size_t>(&wanted - a->set.models.data());
}

Model& loaded_model(ek_assets* a, std::size_t index) {
  if (!a->runtime) {
    throw Unavailable("this build has no Paddle-Lite runtime, so models cannot run",
                      "build native/ with EDGEKIT_LITE_DIR pointing to the runtime");
  }
  if (!a->models[index]) {
    throw Error(ExitCode::usage, "model " + a->set.models[index].name + " was not loaded (options \"models\")",
                "open the assets with that model in \"models\"");
  }
  return *a->models[index];
}

// NULL: the set's only model of this task; "": none (cls only).
Model* pick(ek_assets* a, const char* name, const char* task, bool optional) {
  if (name != nullptr) {
    if (optional && *name == '\0') return nullptr;
    return &loaded_model(a, model_index(a, name));
  }
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < a->set.models.size(); ++i) {
    if (a->set.models[i].task == task) found.push_back(i);
  }
  if (found.empty() && optional) return nullptr;
  require(found.size() == 1,
          std::to_string(found.size()) + " models have task " + task + ", so none can be picked automatically",
          "pass the model's name");
  return &loaded_model(a, found[0]);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string version_json() {
  Json out = Json::object();
  out.set("api", EK_API_VERSION);
  out.set("edgekit", EDGEKIT_VERSION);
  const auto runtime = lite_runtime();
  if (runtime) {
    try {
      out.set("runtime", runtime->version());
    } catch (const Error& e) {
      out.set("runtime", Json());
      out.set("runtime_error", e.line());
    }
  } else {
    out.set("runtime", Json());
  }
  out.set("abi", platform::compiled_abi());
#if defined(__VERSION__)
  out.set("compiler", __VERSION__);
#endif
  out.set("decoder", image_decoder_available() ? Json(image_decoder_name()) : Json());
  return out.dump();
}

}  // namespace

extern "C" {

const char* ek_version(void) {
  static const std::string text = [] {
    try {
      return version_json();
    } catch (...) {
      return std::string("{\"api\": 1}");
    }
  }();
  return text.c_str();
}

const char* ek_last_error(void) { return t_last_error.c_str(); }

const char* ek_status_name(ek_status status) {
  switch (status) {
    case EK_OK: return "ok";
    case EK_E_INTERNAL: return "internal";
    case EK_E_ARGUMENT: return "argument";
    case EK_E_MODEL: return "model";
    case EK_E_VERSION: return "version";
    case EK_E_INPUT: return "input";
    case EK_E_RUN: return "run";
    case EK_E_OUTPUT: return "output";
    case EK_E_ASSETS: return "assets";
    case EK_E_UNAVAILABLE: return "unavailable";
    case EK_E_SELFTEST: return "selftest";
    case EK_E_SIGNATURE: return "signature";
  }
  return "unknown";
}

ek_status ek_open(const char* path, const char* options_json, ek_assets** out) {
  return ek_open_signed(path, options_json, nullptr, out);
}

ek_status ek_open_signed(const char* path, const char* options_json, const uint8_t* public_key, ek_assets** out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL", "pass the address of an ek_assets*");
    *out = nullptr;
    require(path != nullptr && *path != '\0', "path is empty", "pass the asset folder");
    const Options options = parse_options(options_json);
    std::optional<PublicKey> key;
    if (public_key != nullptr) {
      if (!signatures_available()) {
        throw Unavailable("this build cannot check signatures (no libsodium), so it cannot open a set with a public key",
                          "rebuild native/ with libsodium (Debian: libsodium-dev); the ARM cross builds have none");
      }
      key = public_key_from_raw(public_key, 32);
    }
    auto handle = std::make_unique<ek_assets>();
    handle->runtime = lite_runtime();
    handle->cls_thresh = options.cls_thresh;
    const std::optional<std::string> version =
        handle->runtime ? std::optional<std::string>(handle->runtime->version()) : std::nullopt;
    handle->set = open_assets(path, version, key);
    const auto& only = options.only;
    if (only) {
      for (const std::string& name : *only) handle->set.model(name);  // unknown names are an error
    }
    for (const ModelAssets& m : handle->set.models) {
      const bool wanted = !only || std::find(only->begin(), only->end(), m.name) != only->end();
      std::unique_ptr<Engine> engine;
      if (wanted && handle->runtime) engine = handle->runtime->load(m.nb_file, options.run);
      // Specs are read (and refused when invalid) even without a runtime.
      handle->models.push_back(wanted ? std::make_unique<Model>(m, std::move(engine), options.top_k) : nullptr);
    }
    *out = handle.release();
    return EK_OK;
  });
}

void ek_close(ek_assets* assets) { delete assets; }

ek_status ek_public_key_from_pem(const char* pem, uint8_t* out) {
  return guarded([&] {
    require(pem != nullptr && out != nullptr, "pem or out is NULL", "pass the PEM text and a uint8_t[32]");
    const PublicKey key = public_key_from_pem(pem, "the key");
    std::copy(key.bytes.begin(), key.bytes.end(), out);
    return EK_OK;
  });
}

ek_status ek_describe(ek_assets* assets, char** json) {
  return guarded([&] {
    require(assets != nullptr && json != nullptr, "assets or json is NULL", "pass an open handle and a char**");
    *json = nullptr;
    std::lock_guard<std::mutex> hold(assets->lock);
    Json doc = assets->set.to_json();
    Json models = Json::array();
    for (std::size_t i = 0; i < assets->set.models.size(); ++i) {
      Json item = doc.at("models").at(i);
      Json images = Json::array();
      if (!assets->set.models[i].golden_file.empty()) {
        const GoldenSet golden(assets->set.models[i]);
        for (const std::string& f : golden.image_files()) images.push(f);
      }
      item.set("golden_images", images);
      item.set("loaded", assets->models[i] != nullptr && assets->runtime != nullptr);
      models.push(item);
    }
    doc.set("models", models);
    *json = copy_out(doc.dump());
    return EK_OK;
  });
}

int32_t ek_model_count(ek_assets* assets) {
  t_last_error.clear();
  return assets ? static_cast<int32_t>(assets->set.models.size()) : 0;
}

const char* ek_model_name(ek_assets* assets, int32_t index) {
  t_last_error.clear();
  if (!assets || index < 0 || static_cast<std::size_t>(index) >= assets->set.models.size()) return nullptr;
  return assets->set.models[static_cast<std::size_t>(index)].name.c_str();
}

const char* ek_model_task(ek_assets* assets, int32_t index) {
  t_last_error.clear();
  if (!assets || index < 0 || static_cast<std::size_t>(index) >= assets->set.models.size()) return nullptr;
  return assets->set.models[static_cast<std::size_t>(index)].task.c_str();
}

ek_status ek_run(ek_assets* assets, const char* model, const ek_image* image, char** json) {
  return guarded([&] {
    require(assets != nullptr && json != nullptr, "assets or json is NULL", "pass an open handle and a char**");
    *json = nullptr;
    std::lock_guard<std::mutex> hold(assets->lock);
    const auto start = std::chrono::steady_clock::now();
    Model& m = loaded_model(assets, model_index(assets, model));
    const Prediction p = m.predict(view_of(image));
    Json doc = Json::object();
    doc.set("model", m.name());
    doc.set("task", m.task_name());
    doc.set("result", p.result);
    doc.set("timings_ms", p.times.to_json());
    *json = copy_out(doc.dump());
    assets->last = {p.times.preprocess_ms, p.times.inference_ms, p.times.postprocess_ms, 0, ms_since(start)};
    return EK_OK;
  });
}

ek_status ek_ocr(ek_assets* assets, const char* det, const char* rec, const char* cls, const ek_image* image,
                 char** json) {
  return guarded([&] {
    require(assets != nullptr && json != nullptr, "assets or json is NULL", "pass an open handle and a char**");
    *json = nullptr;
    std::lock_guard<std::mutex> hold(assets->lock);
    Model* d = pick(assets, det, "ocr_det", false);
    Model* r = pick(assets, rec, "ocr_rec", false);
    Model* c = pick(assets, cls, "ocr_cls", true);
    const OcrResult result = ocr_system(view_of(image), *d, *r, c, assets->cls_thresh);
    Json doc = Json::object();
    Json models = Json::object();
    models.set("det", d->name());
    models.set("rec", r->name());
    models.set("cls", c ? Json(c->name()) : Json());
    doc.set("models", models);
    doc.set("lines", result.lines);
    doc.set("timings_ms", result.times.to_json());
    *json = copy_out(doc.dump());
    StageTimes all = result.times.det;
    all += result.times.cls;
    all += result.times.rec;
    assets->last = {all.preprocess_ms, all.inference_ms, all.postprocess_ms, result.times.crop_ms, result.times.total_ms};
    return EK_OK;
  });
}

ek_status ek_last_timings(ek_assets* assets, ek_timings* out) {
  return guarded([&] {
    require(assets != nullptr && out != nullptr, "assets or out is NULL", "pass an open handle and an ek_timings*");
    std::lock_guard<std::mutex> hold(assets->lock);
    *out = assets->last;
    return EK_OK;
  });
}

ek_status ek_selftest(ek_assets* assets, const char* model, char** json) {
  return guarded([&] {
    require(assets != nullptr && json != nullptr, "assets or json is NULL", "pass an open handle and a char**");
    *json = nullptr;
    std::lock_guard<std::mutex> hold(assets->lock);
    if (!assets->runtime) {
      throw Unavailable("this build has no Paddle-Lite runtime, so the golden vectors cannot run",
                        "build native/ with EDGEKIT_LITE_DIR pointing to the runtime");
    }
    std::vector<std::size_t> which;
    if (model != nullptr) {
      which.push_back(model_index(assets, model));
    } else {
      for (std::size_t i = 0; i < assets->models.size(); ++i) {
        if (assets->models[i]) which.push_back(i);
      }
    }
    Json reports = Json::array();
    bool ok = true;
    for (std::size_t i : which) {
      Json one = selftest_model(loaded_model(assets, i));
      ok = ok && one.at("ok").as_bool();
      reports.push(one);
    }
    Json doc = Json::object();
    doc.set("ok", ok);
    doc.set("runtime", assets->runtime->version());
    doc.set("models", reports);
    *json = copy_out(doc.dump());
    if (!ok) t_last_error = "the self-test failed; see the report's checks with \"ok\": false";
    return ok ? EK_OK : EK_E_SELFTEST;
  });
}

ek_status ek_selftest_image(ek_assets* assets, const char* model, int32_t index, const ek_image* image, char** json) {
  return guarded([&] {
    require(assets != nullptr && json != nullptr, "assets or json is NULL", "pass an open handle and a char**");
    *json = nullptr;
    require(index >= 0, "negative golden image index", "use 0 .. count - 1");
    std::lock_guard<std::mutex> hold(assets->lock);
    Model& m = loaded_model(assets, model_index(assets, model));
    const Json report = GoldenSet(m.assets()).check_image(m, static_cast<std::size_t>(index), view_of(image));
    *json = copy_out(report.dump());
    const bool ok = report.at("ok").as_bool();
    if (!ok) t_last_error = "golden image " + std::to_string(index) + " of " + m.name() + " failed; see the report";
    return ok ? EK_OK : EK_E_SELFTEST;
  });
}

ek_status ek_image_decode(const uint8_t* bytes, size_t size, ek_image* out) {
  return guarded([&] {
    require(out != nullptr, "out is NULL", "pass an ek_image to fill");
    *out = ek_image{nullptr, 0, 0, 0, EK_PIXEL_GRAY};
    if (!image_decoder_available()) {
      throw Unavailable("this build has no image decoder", "decode with the platform, or rebuild with stb_image");
    }
    const Image image = decode_image(bytes, size, "from memory");
    auto* pixels = static_cast<uint8_t*>(std::malloc(image.data.size()));
    if (!pixels) throw std::bad_alloc();
    std::memcpy(pixels, image.data.data(), image.data.size());
    const int32_t format = image.order == PixelOrder::gray  ? EK_PIXEL_GRAY
                           : image.order == PixelOrder::rgb ? EK_PIXEL_RGB
                                                            : EK_PIXEL_RGBA;
    *out = ek_image{pixels, image.width, image.height, static_cast<int32_t>(image.stride()), format};
    return EK_OK;
  });
}

void ek_image_free(ek_image* image) {
  if (image == nullptr) return;
  std::free(const_cast<uint8_t*>(image->data));
  *image = ek_image{nullptr, 0, 0, 0, EK_PIXEL_GRAY};
}

void ek_free(char* text) { std::free(text); }

}  // extern "C"
