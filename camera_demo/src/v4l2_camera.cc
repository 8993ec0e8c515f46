// A V4L2 camera with memory-mapped streaming: YUYV converted to BGR, MJPEG decoded.
// Compiled where <linux/videodev2.h> exists; NOT exercised on the development host
// (there is no /dev/video* there): see camera_demo/README.md.
#include "frame_source.h"

#if defined(__linux__) && __has_include(<linux/videodev2.h>)
#define CAMERA_DEMO_V4L2 1
#include <fcntl.h>
#include <linux/videodev2.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#endif

namespace camera_demo {

#if defined(CAMERA_DEMO_V4L2)
namespace {

using Clock = std::chrono::steady_clock;

int xioctl(int fd, unsigned long request, void* arg) {
  int r;
  do {
    r = ioctl(fd, request, arg);
  } while (r == -1 && errno == EINTR);
  return r;
}

std::string fourcc_text(std::uint32_t code) {
  std::string s(4, ' ');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((code >> (8 * i)) & 0xff);
  return s;
}

class V4l2Camera : public FrameSource {
 public:
  explicit V4l2Camera(const CameraSettings& s) : settings_(s) {
    h_.fd = open(s.device.c_str(), O_RDWR | O_NONBLOCK);
    if (h_.fd < 0) {
      throw DemoError("cannot open " + s.device + ": " + std::strerror(errno) +
                      "; check the device (ls /dev/video*) and that you are in the 'video' group", 2);
    }
    v4l2_capability cap{};
    if (xioctl(h_.fd, VIDIOC_QUERYCAP, &cap) < 0) fail("VIDIOC_QUERYCAP", "is this a V4L2 device?");
    const std::uint32_t caps = (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
    if (!(caps & V4L2_CAP_VIDEO_CAPTURE)) throw DemoError(s.device + " cannot capture video; pick another /dev/videoN", 2);
    if (!(caps & V4L2_CAP_STREAMING)) throw DemoError(s.device + " has no streaming I/O; this demo needs MMAP streaming", 2);
    driver_ = reinterpret_cast<const char*>(cap.card);

    v4l2_format fmt{};
    fmt.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    fmt.fmt.pix.width = static_cast<std::uint32_t>(s.width);
    fmt.fmt.pix.height = static_cast<std::uint32_t>(s.height);
    fmt.fmt.pix.pixelformat = s.pixel_format == "mjpeg" ? V4L2_PIX_FMT_MJPEG : V4L2_PIX_FMT_YUYV;
    fmt.fmt.pix.field = V4L2_FIELD_ANY;
    if (xioctl(h_.fd, VIDIOC_S_FMT, &fmt) < 0) fail("VIDIOC_S_FMT", "try another --size or --pixfmt");
    // the driver may pick another size or format: use what it chose
    format_ = fmt.fmt.pix.pixelformat;
    if (format_ != V4L2_PIX_FMT_YUYV && format_ != V4L2_PIX_FMT_MJPEG) {
      throw DemoError(s.device + " offers " + fourcc_text(format_) + ", not YUYV or MJPEG; pick --pixfmt yuyv|mjpeg "
                      "from v4l2-ctl --list-formats", 2);
    }
    width_ = static_cast<int>(fmt.fmt.pix.width);
    height_ = static_cast<int>(fmt.fmt.pix.height);
    stride_ = fmt.fmt.pix.bytesperline ? fmt.fmt.pix.bytesperline : static_cast<std::uint32_t>(width_) * 2;

    v4l2_requestbuffers req{};
    req.count = static_cast<std::uint32_t>(s.buffers);
    req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    req.memory = V4L2_MEMORY_MMAP;
    if (xioctl(h_.fd, VIDIOC_REQBUFS, &req) < 0) fail("VIDIOC_REQBUFS", "the driver has no MMAP buffers");
    if (req.count < 2) throw DemoError(s.device + " gave " + std::to_string(req.count) + " buffers; need at least 2", 2);
    for (std::uint32_t i = 0; i < req.count; ++i) {
      v4l2_buffer buf{};
      buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
      buf.memory = V4L2_MEMORY_MMAP;
      buf.index = i;
      if (xioctl(h_.fd, VIDIOC_QUERYBUF, &buf) < 0) fail("VIDIOC_QUERYBUF", "");
      void* start = mmap(nullptr, buf.length, PROT_READ | PROT_WRITE, MAP_SHARED, h_.fd, buf.m.offset);
      if (start == MAP_FAILED) fail("mmap", "");
      h_.mapped.push_back({start, buf.length});
      if (xioctl(h_.fd, VIDIOC_QBUF, &buf) < 0) fail("VIDIOC_QBUF", "");
    }
    v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (xioctl(h_.fd, VIDIOC_STREAMON, &type) < 0) fail("VIDIOC_STREAMON", "is another program using the camera?");
    h_.streaming = true;
  }

  bool next(Frame& frame) override {
    pollfd p{h_.fd, POLLIN, 0};
    int ready;
    do {
      ready = poll(&p, 1, 5000);
    } while (ready < 0 && errno == EINTR);
    if (ready == 0) throw DemoError(settings_.device + " sent no frame for 5 s; check the camera and its cable", 6);
    if (ready < 0) fail("poll", "");
    const auto start = Clock::now();
    v4l2_buffer buf{};
    buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    buf.memory = V4L2_MEMORY_MMAP;
    if (xioctl(h_.fd, VIDIOC_DQBUF, &buf) < 0) {
      if (errno == EAGAIN) return next(frame);
      fail("VIDIOC_DQBUF", "");
    }
    const auto* data = static_cast<const std::uint8_t*>(h_.mapped.at(buf.index).first);
    try {
      if (format_ == V4L2_PIX_FMT_YUYV) {
        std::vector<std::uint8_t> bgr(static_cast<std::size_t>(width_) * 3 * static_cast<std::size_t>(height_));
        yuyv_to_bgr(data, width_, height_, stride_, bgr.data());
        frame.set(std::move(bgr), width_, height_, 3, EK_PIXEL_BGR);
      } else {
        decode_into(data, buf.bytesused, settings_.device, frame);
      }
    } catch (...) {
      xioctl(h_.fd, VIDIOC_QBUF, &buf);
      throw;
    }
    // the buffer goes back to the driver as soon as its pixels are copied
    if (xioctl(h_.fd, VIDIOC_QBUF, &buf) < 0) fail("VIDIOC_QBUF", "");
    frame.origin = settings_.device + "#" + std::to_string(sequence_++);
    frame.capture_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return true;
  }

  std::string describe() const override {
    return "V4L2 " + settings_.device + " (" + driver_ + ", " + std::to_string(width_) + "x" + std::to_string(height_) +
           " " + fourcc_text(format_) + ")";
  }

 private:
  [[noreturn]] void fail(const char* call, const std::string& hint) {
    throw DemoError(settings_.device + ": " + call + " failed: " + std::strerror(errno) + (hint.empty() ? "" : "; " + hint), 6);
  }

  // Released in reverse order also when the constructor throws half-way.
  struct Handles {
    int fd = -1;
    std::vector<std::pair<void*, std::size_t>> mapped;
    bool streaming = false;
    ~Handles() {
      if (streaming) {
        v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        xioctl(fd, VIDIOC_STREAMOFF, &type);
      }
      for (const auto& m : mapped) munmap(m.first, m.second);
      if (fd >= 0) close(fd);
    }
  };

  CameraSettings settings_;
  Handles h_;
  std::string driver_;
  std::uint32_t format_ = 0;
  int width_ = 0, height_ = 0;
  std::uint32_t stride_ = 0;
  std::size_t sequence_ = 0;
};

}  // namespace

bool v4l2_available() { return true; }
std::unique_ptr<FrameSource> open_v4l2_camera(const CameraSettings& settings) {
  return std::make_unique<V4l2Camera>(settings);
}
#else
bool v4l2_available() { return false; }
std::unique_ptr<FrameSource> open_v4l2_camera(const CameraSettings&) {
  throw DemoError("this build has no V4L2 support (no <linux/videodev2.h>); use --images or --video", 2);
}
#endif

}  // namespace camera_demo
