// Frames from files: image folders (sorted like edgekit's image_files), MJPEG AVI
// files and raw YUYV streams; plus the pixel helpers every source shares.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frame_source.h"

namespace camera_demo {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DemoError("cannot read " + path + "; check the path");
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::uint8_t clamp_byte(int v) { return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v); }

// edgekit's IMAGE_SUFFIXES; .webp is listed but stb_image cannot decode it.
bool image_suffix(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".webp";
}

class ImageFolder : public FrameSource {
 public:
  explicit ImageFolder(const std::string& folder) : folder_(folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) throw DemoError(folder + " is not a folder; pass a folder of PNG/JPEG images", 2);
    for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file(ec) && image_suffix(it->path())) files_.push_back(it->path());
    }
    // Python's sorted(Path.rglob): by path components
    std::sort(files_.begin(), files_.end(), [](const fs::path& a, const fs::path& b) {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                          [](const fs::path& x, const fs::path& y) { return x.string() < y.string(); });
    });
    if (files_.empty()) throw DemoError(folder + " holds no .png/.jpg/.jpeg/.bmp images; put images in it", 2);
  }

  bool next(Frame& frame) override {
    if (index_ >= files_.size()) return false;
    const auto start = Clock::now();
    const std::string path = files_[index_++].string();
    const std::vector<std::uint8_t> bytes = read_bytes(path);
    decode_into(bytes.data(), bytes.size(), path, frame);
    frame.origin = path;
    frame.capture_ms = ms_since(start);
    return true;
  }

  std::string describe() const override {
    return "image folder " + folder_ + " (" + std::to_string(files_.size()) + " images)";
  }

 private:
  std::string folder_;
  std::vector<fs::path> files_;
  std::size_t index_ = 0;
};

std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[3]) << 24);
}

bool fourcc(const std::uint8_t* p, const char* code) { return std::memcmp(p, code, 4) == 0; }

// RIFF AVI with one MJPEG video stream: the frames are the 'NNdc'/'NNdb' chunks of
// the 'movi' list (inside 'rec ' lists too); chunks are padded to even sizes.
class MjpegAvi : public FrameSource {
 public:
  explicit MjpegAvi(const std::string& file) : file_(file), data_(read_bytes(file)) {
    if (data_.size() < 12 || !fourcc(data_.data(), "RIFF") || !fourcc(data_.data() + 8, "AVI ")) {
      throw DemoError(file + " is not an AVI file; --video reads MJPEG .avi only (convert: ffmpeg -i IN -c:v mjpeg "
                      "-q:v 3 OUT.avi), or extract frames into a folder for --images", 2);
    }
    scan(12, data_.size(), false);
    if (!mjpeg_) {
      throw DemoError(file + "'s video stream is not MJPEG (" + codec_ + "); --video reads MJPEG .avi only "
                      "(convert: ffmpeg -i IN -c:v mjpeg -q:v 3 OUT.avi)", 2);
    }
    if (frames_.empty()) throw DemoError(file + " holds no video frames", 2);
  }

  bool next(Frame& frame) override {
    if (index_ >= frames_.size()) return false;
    const auto start = Clock::now();
    const auto [offset, size] = frames_[index_];
    decode_into(data_.data() + offset, size, file_ + "#" + std::to_string(index_), frame);
    frame.origin = file_ + "#" + std::to_string(index_++);
    frame.capture_ms = ms_since(start);
    return true;
  }

  std::string describe() const override {
    return "MJPEG AVI " + file_ + " (" + std::to_string(frames_.size()) + " frames)";
  }

 private:
  void scan(std::size_t at, std::size_t end, bool in_movi) {
    while (at + 8 <= end) {
      const std::uint8_t* chunk = data_.data() + at;
      const std::size_t size = le32(chunk + 4);
      const std::size_t body = at + 8;
      if (body + size > end) break;  // truncated recording: keep what is whole
      if (fourcc(chunk, "LIST") && size >= 4) {
        scan(body + 4, body + size, in_movi || fourcc(chunk + 8, "movi"));
      } else if (fourcc(chunk, "strf") && size >= 20 && !video_format_seen_) {
        // BITMAPINFOHEADER of the first stream: biCompression at offset 16
        video_format_seen_ = true;
        codec_ = std::string(reinterpret_cast<const char*>(chunk + 8 + 16), 4);
        mjpeg_ = codec_ == "MJPG" || codec_ == "mjpg" || codec_ == "AVRn" || codec_ == "JPEG";
      } else if (in_movi && (chunk[2] == 'd') && (chunk[3] == 'c' || chunk[3] == 'b') && size > 0) {
        frames_.emplace_back(body, size);
      }
      at = body + size + (size & 1);
    }
  }

  std::string file_;
  std::vector<std::uint8_t> data_;
  std::vector<std::pair<std::size_t, std::size_t>> frames_;
  std::size_t index_ = 0;
  bool video_format_seen_ = false;
  bool mjpeg_ = false;
  std::string codec_ = "no video stream format";
};

class YuyvFile : public FrameSource {
 public:
  YuyvFile(const std::string& file, int width, int height) : file_(file), width_(width), height_(height), in_(file, std::ios::binary) {
    if (width < 2 || height < 1 || width % 2 != 0) throw DemoError("--size must be WxH with an even W for YUYV", 2);
    if (!in_) throw DemoError("cannot read " + file + "; check the path", 2);
  }

  bool next(Frame& frame) override {
    const auto start = Clock::now();
    const std::size_t bytes = static_cast<std::size_t>(width_) * 2 * static_cast<std::size_t>(height_);
    std::vector<std::uint8_t> raw(bytes);
    if (!in_.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(bytes))) return false;
    std::vector<std::uint8_t> bgr(static_cast<std::size_t>(width_) * 3 * static_cast<std::size_t>(height_));
    yuyv_to_bgr(raw.data(), width_, height_, static_cast<std::size_t>(width_) * 2, bgr.data());
    frame.set(std::move(bgr), width_, height_, 3, EK_PIXEL_BGR);
    frame.origin = file_ + "#" + std::to_string(index_++);
    frame.capture_ms = ms_since(start);
    return true;
  }

  std::string describe() const override {
    return "raw YUYV " + file_ + " (" + std::to_string(width_) + "x" + std::to_string(height_) + ")";
  }

 private:
  std::string file_;
  int width_, height_;
  std::ifstream in_;
  std::size_t index_ = 0;
};

}  // namespace

void Frame::set(std::vector<std::uint8_t> data, int width, int height, int channels, ek_pixel_format format) {
  pixels = std::move(data);
  image = ek_image{pixels.data(), width, height, width * channels, format};
}

void decode_into(const std::uint8_t* bytes, std::size_t size, const std::string& what, Frame& frame) {
  ek_image decoded;
  const ek_status status = ek_image_decode(bytes, size, &decoded);
  if (status == EK_E_UNAVAILABLE) {
    throw DemoError(std::string(ek_last_error()) + " (install libstb-dev and rebuild; V4L2 YUYV needs no decoder)", 9);
  }
  if (status != EK_OK) throw DemoError(what + ": " + ek_last_error(), static_cast<int>(status));
  const int channels = decoded.stride / decoded.width;
  std::vector<std::uint8_t> copy(decoded.data, decoded.data + static_cast<std::size_t>(decoded.stride) * decoded.height);
  const auto format = static_cast<ek_pixel_format>(decoded.format);
  const int width = decoded.width, height = decoded.height;
  ek_image_free(&decoded);
  frame.set(std::move(copy), width, height, channels, format);
}

void yuyv_to_bgr(const std::uint8_t* yuyv, int width, int height, std::size_t stride, std::uint8_t* bgr) {
  // ITU-R BT.601, limited range, 20-bit fixed point (OpenCV's YUV422 -> RGB constants)
  constexpr int kShift = 20, kCY = 1220542, kCUB = 2116026, kCUG = -409993, kCVG = -852492, kCVR = 1673527;
  constexpr int kHalf = 1 << (kShift - 1);
  for (int y = 0; y < height; ++y) {
    const std::uint8_t* src = yuyv + static_cast<std::size_t>(y) * stride;
    std::uint8_t* dst = bgr + static_cast<std::size_t>(y) * static_cast<std::size_t>(width) * 3;
    for (int x = 0; x + 1 < width; x += 2, src += 4, dst += 6) {
      const int u = src[1] - 128, v = src[3] - 128;
      const int ruv = kHalf + kCVR * v, guv = kHalf + kCVG * v + kCUG * u, buv = kHalf + kCUB * u;
      for (int k = 0; k < 2; ++k) {
        const int yy = std::max(0, src[2 * k] - 16) * kCY;
        dst[3 * k + 0] = clamp_byte((yy + buv) >> kShift);
        dst[3 * k + 1] = clamp_byte((yy + guv) >> kShift);
        dst[3 * k + 2] = clamp_byte((yy + ruv) >> kShift);
      }
    }
  }
}

std::unique_ptr<FrameSource> open_image_folder(const std::string& folder) { return std::make_unique<ImageFolder>(folder); }
std::unique_ptr<FrameSource> open_mjpeg_avi(const std::string& file) { return std::make_unique<MjpegAvi>(file); }
std::unique_ptr<FrameSource> open_yuyv_file(const std::string& file, int width, int height) {
  return std::make_unique<YuyvFile>(file, width, height);
}

}  // namespace camera_demo
