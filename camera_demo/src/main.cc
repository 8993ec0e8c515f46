// camera_demo: edgekit's Linux board demo over the C API (edgekit_c.h). Frames from
// a V4L2 camera, an MJPEG .avi, a raw YUYV recording or an image folder go through
// one model (ek_run) or the OCR system (ek_ocr); every frame prints one JSON line
// with the result and per-stage timings. See README.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "annotate.h"
#include "edgekit_c.h"
#include "frame_source.h"

namespace camera_demo {
namespace {

const char* kUsage =
    "usage: camera_demo --assets DIR SOURCE [--model NAME | --ocr] [options]\n"
    "       camera_demo --assets DIR --selftest [--model NAME]\n"
    "       camera_demo --version\n"
    "\n"
    "DIR is an asset set (`edgekit package --platform linux`) or one bundle folder.\n"
    "SOURCE is one of:\n"
    "  --images FOLDER          PNG/JPEG/BMP files below FOLDER, sorted\n"
    "  --video FILE.avi         an MJPEG AVI file\n"
    "  --yuyv FILE --size WxH   raw YUYV 4:2:2 frames back to back (v4l2-ctl --stream-to)\n"
    "  --camera /dev/videoN     a V4L2 camera (MMAP streaming; --size WxH, --pixfmt yuyv|mjpeg)\n"
    "Options:\n"
    "  --model NAME             the model to run (default: the set's only model, or OCR when the set\n"
    "                           has a detector and a recogniser)\n"
    "  --ocr                    detect -> classify direction -> recognise (ek_ocr)\n"
    "  --frames N               stop after N frames (cameras run until stopped otherwise)\n"
    "  --threads N              Paddle-Lite threads per model (default 1)\n"
    "  --save DIR               write each frame as DIR/frame_<n>.ppm with detected boxes (labels, scores)\n"
    "                           or the segmentation mask drawn\n"
    "  --min-score S            --save draws detections scoring >= S (default 0.5; the JSON has them all)\n"
    "Output: one JSON object per frame on stdout; a summary on stderr.\n";

struct Options {
  std::string assets, images, video, yuyv, model, save;
  double min_score = 0.5;
  bool ocr = false, selftest = false, camera = false;
  long frames = -1;
  int threads = 1;
  CameraSettings cam;
};

[[noreturn]] void usage_error(const std::string& what) {
  throw DemoError(what + "; see camera_demo --help", 2);
}

void parse_size(const std::string& text, int& width, int& height) {
  if (std::sscanf(text.c_str(), "%dx%d", &width, &height) != 2 || width < 1 || height < 1) {
    usage_error("--size " + text + " is not WxH");
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--assets") o.assets = value();
    else if (flag == "--images") o.images = value();
    else if (flag == "--video") o.video = value();
    else if (flag == "--yuyv") o.yuyv = value();
    else if (flag == "--camera") o.camera = true, o.cam.device = value();
    else if (flag == "--size") parse_size(value(), o.cam.width, o.cam.height);
    else if (flag == "--pixfmt") o.cam.pixel_format = value();
    else if (flag == "--model") o.model = value();
    else if (flag == "--ocr") o.ocr = true;
    else if (flag == "--selftest") o.selftest = true;
    else if (flag == "--frames") o.frames = std::strtol(value().c_str(), nullptr, 10);
    else if (flag == "--threads") o.threads = std::atoi(value().c_str());
    else if (flag == "--save") o.save = value();
    else if (flag == "--min-score") o.min_score = std::strtod(value().c_str(), nullptr);
    else usage_error("unknown argument " + flag);
  }
  if (o.assets.empty()) usage_error("--assets is required");
  const int sources = !o.images.empty() + !o.video.empty() + !o.yuyv.empty() + o.camera;
  if (!o.selftest && sources != 1) usage_error("give exactly one of --images, --video, --yuyv, --camera");
  if (o.cam.pixel_format != "yuyv" && o.cam.pixel_format != "mjpeg") usage_error("--pixfmt is yuyv or mjpeg");
  if (o.threads < 1) usage_error("--threads must be >= 1");
  if (o.ocr && !o.model.empty()) usage_error("--ocr and --model exclude each other");
  return o;
}

void check(ek_status status, const char* what) {
  if (status != EK_OK) throw DemoError(std::string(what) + ": " + ek_last_error(), static_cast<int>(status));
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string number(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  return buf;
}

// The run mode when neither --model nor --ocr is given: OCR when the set has a
// detector and a recogniser, else its only model.
void pick_mode(ek_assets* assets, Options& o) {
  if (o.ocr || !o.model.empty()) return;
  const int count = ek_model_count(assets);
  bool det = false, rec = false;
  for (int i = 0; i < count; ++i) {
    det = det || std::strcmp(ek_model_task(assets, i), "ocr_det") == 0;
    rec = rec || std::strcmp(ek_model_task(assets, i), "ocr_rec") == 0;
  }
  if (det && rec) {
    o.ocr = true;
  } else if (count == 1) {
    o.model = ek_model_name(assets, 0);
  } else {
    usage_error("the asset set holds " + std::to_string(count) + " models: pick one with --model or use --ocr");
  }
}

int selftest(ek_assets* assets, const Options& o) {
  char* json = nullptr;
  const ek_status status = ek_selftest(assets, o.model.empty() ? nullptr : o.model.c_str(), &json);
  if (json) {
    std::printf("%s\n", json);
    ek_free(json);
  }
  if (status != EK_OK) std::fprintf(stderr, "camera_demo: %s: %s\n", ek_status_name(status), ek_last_error());
  return static_cast<int>(status);
}

std::unique_ptr<FrameSource> open_source(const Options& o) {
  if (!o.images.empty()) return open_image_folder(o.images);
  if (!o.video.empty()) return open_mjpeg_avi(o.video);
  if (!o.yuyv.empty()) return open_yuyv_file(o.yuyv, o.cam.width, o.cam.height);
  return open_v4l2_camera(o.cam);
}

int run(const Options& given) {
  Options o = given;
  ek_assets* raw = nullptr;
  const std::string options = "{\"threads\": " + std::to_string(o.threads) + "}";
  check(ek_open(o.assets.c_str(), options.c_str(), &raw), "cannot use the assets");
  std::unique_ptr<ek_assets, void (*)(ek_assets*)> assets(raw, ek_close);
  if (o.selftest) return selftest(assets.get(), o);
  pick_mode(assets.get(), o);
  auto source = open_source(o);
  std::fprintf(stderr, "camera_demo: %s -> %s\n", source->describe().c_str(),
               o.ocr ? "OCR system" : ("model " + o.model).c_str());
  if (!o.save.empty()) std::filesystem::create_directories(o.save);

  Frame frame;
  long count = 0;
  double capture = 0, pre = 0, infer = 0, post = 0, total = 0;
  while ((o.frames < 0 || count < o.frames) && source->next(frame)) {
    const auto start = std::chrono::steady_clock::now();
    char* json = nullptr;
    const ek_status status = o.ocr ? ek_ocr(assets.get(), nullptr, nullptr, nullptr, &frame.image, &json)
                                   : ek_run(assets.get(), o.model.c_str(), &frame.image, &json);
    check(status, frame.origin.c_str());
    const double frame_ms =
        frame.capture_ms + std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ek_timings t{};
    ek_last_timings(assets.get(), &t);
    const std::string result = json;
    ek_free(json);
    // {"frame", "source", "width", "height", "capture_ms", "frame_ms", + the API's own keys}
    std::printf("{\"frame\":%ld,\"source\":%s,\"width\":%d,\"height\":%d,\"capture_ms\":%s,\"frame_ms\":%s,%s\n", count,
                json_string(frame.origin).c_str(), frame.image.width, frame.image.height, number(frame.capture_ms).c_str(),
                number(frame_ms).c_str(), result.c_str() + 1);
    std::fflush(stdout);
    if (!o.save.empty()) save_annotated(frame.image, result, o.save, count, o.min_score);
    capture += frame.capture_ms, pre += t.preprocess_ms, infer += t.inference_ms, post += t.postprocess_ms;
    total += frame_ms;
    ++count;
  }
  if (count > 0) {
    const double n = static_cast<double>(count);
    std::fprintf(stderr,
                 "camera_demo: %ld frames; mean ms per frame: capture %.2f, preprocess %.2f, inference %.2f, "
                 "postprocess %.2f, total %.2f (%.2f frames/s)\n",
                 count, capture / n, pre / n, infer / n, post / n, total / n, 1000.0 * n / total);
  }
  return 0;
}

}  // namespace
}  // namespace camera_demo

int main(int argc, char** argv) {
  using namespace camera_demo;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("%s", kUsage);
      return 0;
    }
    if (std::strcmp(argv[i], "--version") == 0) {
      std::printf("%s\n", ek_version());
      return 0;
    }
  }
  try {
    return run(parse(argc, argv));
  } catch (const DemoError& e) {
    std::fprintf(stderr, "camera_demo: error: %s\n", e.what());
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "camera_demo: error: %s\n", e.what());
    return 1;
  }
}
