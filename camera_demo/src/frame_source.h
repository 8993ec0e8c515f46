// Where frames come from: an image folder, an MJPEG .avi file, a raw YUYV stream
// file (what `v4l2-ctl --stream-to` records) or a V4L2 camera. Each hands out 8-bit
// pixels with their order, which the app core takes as they are.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "edgekit_c.h"

namespace camera_demo {

// A failure the demo reports in one line ("<what>; <fix>") and exits with `code`.
struct DemoError : std::runtime_error {
  DemoError(const std::string& what, int exit_code = 5) : std::runtime_error(what), code(exit_code) {}
  int code;
};

struct Frame {
  std::vector<std::uint8_t> pixels;  // owned pixels, `image.data` points into them
  ek_image image{nullptr, 0, 0, 0, EK_PIXEL_BGR};
  std::string origin;                // file path, "file.avi#12", "/dev/video0#3"
  double capture_ms = 0;             // read + decode / convert

  void set(std::vector<std::uint8_t> data, int width, int height, int channels, ek_pixel_format format);
};

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // false at the end of the source.
  virtual bool next(Frame& frame) = 0;
  virtual std::string describe() const = 0;
};

struct CameraSettings {
  std::string device = "/dev/video0";
  int width = 640;
  int height = 480;
  std::string pixel_format = "yuyv";  // yuyv or mjpeg
  int buffers = 4;
};

std::unique_ptr<FrameSource> open_image_folder(const std::string& folder);
std::unique_ptr<FrameSource> open_mjpeg_avi(const std::string& file);
std::unique_ptr<FrameSource> open_yuyv_file(const std::string& file, int width, int height);
std::unique_ptr<FrameSource> open_v4l2_camera(const CameraSettings& settings);
bool v4l2_available();  // compiled with <linux/videodev2.h>

// Decoding through the app core's decoder (ek_image_decode): PNG, JPEG, BMP.
void decode_into(const std::uint8_t* bytes, std::size_t size, const std::string& what, Frame& frame);
// YUYV 4:2:2 (Y0 U Y1 V) to BGR with OpenCV's integer BT.601 arithmetic (COLOR_YUV2BGR_YUYV).
void yuyv_to_bgr(const std::uint8_t* yuyv, int width, int height, std::size_t stride, std::uint8_t* bgr);

}  // namespace camera_demo
