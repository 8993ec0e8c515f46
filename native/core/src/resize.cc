// cv2.resize for uint8 images, reproduced from the arithmetic OpenCV 4.6.0 uses on
// the CPU (scalar and SIMD paths agree there): which path a scale takes, how the
// float positions become 11-bit weights, the two-stage fixed-point rounding of the
// bilinear sum, and the float accumulation order of the area filter. Every float
// and double step below is one IEEE operation in the same order as cv2's; the core
// is built with -ffp-contract=off so no compiler fuses a multiply-add.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "edgekit/error.h"
#include "edgekit/imgproc.h"

namespace edgekit {
namespace {

constexpr int kCoefBits = 11;
constexpr int kCoefScale = 1 << kCoefBits;

// cvRound: to nearest, ties to even (the default rounding mode).
int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }
int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }
int floor_int(double v) { return static_cast<int>(std::floor(v)); }
int floor_int(float v) { return static_cast<int>(std::floor(v)); }
int ceil_int(double v) { return static_cast<int>(std::ceil(v)); }

std::uint8_t saturate_u8(float v) {
  if (std::isnan(v)) return 0;  // cvRound(NaN) is INT_MIN on x86, saturated to 0
  const int i = round_even(v);
  return static_cast<std::uint8_t>(i < 0 ? 0 : (i > 255 ? 255 : i));
}

short saturate_short(float v) {
  const int i = round_even(v);
  return static_cast<short>(i < -32768 ? -32768 : (i > 32767 ? 32767 : i));
}

// One axis of a two-tap resize: source index and the two 11-bit weights per output.
struct Taps {
  std::vector<int> index;
  std::vector<short> w0, w1;
  int limit = 0;  // outputs from here on take one source sample (right edge); x only
};

// Positions of `dsize` outputs over `ssize` inputs. Bilinear: centre-aligned,
// (d + 0.5) * scale - 0.5. Area upscale: the fraction of the output cell covered.
// `clamp` (the x axis) pins positions outside the image to the edge with weight 0;
// the y axis keeps them and clamps rows when reading, as cv2 does.
Taps two_tap_axis(int ssize, int dsize, double scale, double inv_scale, bool area_mode, bool clamp) {
  Taps t;
  t.index.resize(dsize);
  t.w0.resize(dsize);
  t.w1.resize(dsize);
  t.limit = dsize;
  for (int d = 0; d < dsize; ++d) {
    int s;
    float f;
    if (!area_mode) {
      f = static_cast<float>((d + 0.5) * scale - 0.5);
      s = floor_int(f);
      f -= static_cast<float>(s);
    } else {
      s = floor_int(d * scale);
      f = static_cast<float>((d + 1) - (s + 1) * inv_scale);
      f = f <= 0 ? 0.f : f - static_cast<float>(floor_int(f));
    }
    if (clamp) {
      if (s < 0) f = 0, s = 0;
      if (s + 1 >= ssize) {
        t.limit = std::min(t.limit, d);
        if (s >= ssize - 1) f = 0, s = ssize - 1;
      }
    }
    t.index[d] = s;
    t.w0[d] = saturate_short((1.f - f) * kCoefScale);
    t.w1[d] = saturate_short(f * kCoefScale);
  }
  return t;
}

int clip_row(int y, int size) { return y >= 0 ? (y < size ? y : size - 1) : 0; }

// Horizontal pass of one source row into 32-bit sums scaled by 2^11.
void horizontal(const std::uint8_t* src, int cn, const Taps& x, int dwidth, std::int32_t* out) {
  for (int dx = 0; dx < dwidth; ++dx) {
    const std::uint8_t* s = src + static_cast<std::size_t>(x.index[dx]) * cn;
    std::int32_t* o = out + static_cast<std::size_t>(dx) * cn;
    if (dx < x.limit) {
      for (int c = 0; c < cn; ++c) o[c] = s[c] * x.w0[dx] + s[c + cn] * x.w1[dx];
    } else {
      for (int c = 0; c < cn; ++c) o[c] = s[c] * kCoefScale;
    }
  }
}

Image resize_two_tap(const ImageView& src, int dh, int dw, double scale_x, double scale_y, double inv_x,
                     double inv_y, bool area_mode) {
  const int cn = src.channels;
  const Taps x = two_tap_axis(src.width, dw, scale_x, inv_x, area_mode, true);
  const Taps y = two_tap_axis(src.height, dh, scale_y, inv_y, area_mode, false);
  Image out(dh, dw, src.order);
  const std::size_t row_len = static_cast<std::size_t>(dw) * cn;
  // Two cached horizontal rows, keyed by source row: consecutive outputs share them.
  std::vector<std::int32_t> rows[2] = {std::vector<std::int32_t>(row_len), std::vector<std::int32_t>(row_len)};
  int cached[2] = {-1, -1};
  auto slot_of = [&](int sy) { return cached[0] == sy ? 0 : (cached[1] == sy ? 1 : -1); };
  auto fill = [&](int sy, int slot) {
    horizontal(src.row(sy), cn, x, dw, rows[slot].data());
    cached[slot] = sy;
    return slot;
  };
  for (int dy = 0; dy < dh; ++dy) {
    const int r0 = clip_row(y.index[dy], src.height), r1 = clip_row(y.index[dy] + 1, src.height);
    int k0 = slot_of(r0), k1 = slot_of(r1);
    if (k0 < 0 && k1 < 0) {
      k0 = fill(r0, 0);
      k1 = r1 == r0 ? k0 : fill(r1, 1);
    } else if (k0 < 0) {
      k0 = fill(r0, 1 - k1);
    } else if (k1 < 0) {
      k1 = fill(r1, 1 - k0);
    }
    const std::int32_t* s0 = rows[k0].data();
    const std::int32_t* s1 = rows[k1].data();
    const int b0 = y.w0[dy], b1 = y.w1[dy];
    std::uint8_t* d = out.row(dy);
    // cv2's two-stage rounding: each product >> 16 on sums pre-shifted by 4, then (+2) >> 2.
    for (std::size_t i = 0; i < row_len; ++i) {
      d[i] = static_cast<std::uint8_t>((((b0 * (s0[i] >> 4)) >> 16) + ((b1 * (s1[i] >> 4)) >> 16) + 2) >> 2);
    }
  }
  return out;
}

Image resize_nearest(const ImageView& src, int dh, int dw) {
  const double ifx = 1. / (static_cast<double>(dw) / src.width), ify = 1. / (static_cast<double>(dh) / src.height);
  const int cn = src.channels;
  std::vector<int> xs(dw);
  for (int x = 0; x < dw; ++x) xs[x] = std::min(floor_int(x * ifx), src.width - 1) * cn;
  Image out(dh, dw, src.order);
  for (int y = 0; y < dh; ++y) {
    const std::uint8_t* s = src.row(std::min(floor_int(y * ify), src.height - 1));
    std::uint8_t* d = out.row(y);
    for (int x = 0; x < dw; ++x, d += cn) std::memcpy(d, s + xs[x], cn);
  }
  return out;
}

// Integer shrink factors: plain block sums.
Image resize_area_blocks(const ImageView& src, int dh, int dw, int fx, int fy) {
  const int cn = src.channels;
  const bool quad = fx == 2 && fy == 2 && cn != 2;
  const float scale = 1.f / static_cast<float>(fx * fy);
  const int full_width = (src.width / fx) * cn;
  Image out(dh, dw, src.order);
  for (int dy = 0; dy < dh; ++dy) {
    std::uint8_t* d = out.row(dy);
    const int sy0 = dy * fy;
    if (sy0 >= src.height) {
      std::memset(d, 0, out.stride());
      continue;
    }
    const int whole = sy0 + fy <= src.height ? full_width : 0;
    const int row_len = dw * cn;
    for (int i = 0; i < row_len; ++i) {
      const int px = i / cn, c = i % cn, sx0 = px * fx * cn + c;
      int sum = 0, count = 0;
      for (int sy = 0; sy < fy && sy0 + sy < src.height; ++sy) {
        const std::uint8_t* s = src.row(sy0 + sy);
        for (int k = 0; k < fx * cn && sx0 + k < src.width * cn; k += cn, ++count) sum += s[sx0 + k];
      }
      if (i < whole) {
        d[i] = quad ? static_cast<std::uint8_t>((sum + 2) >> 2) : saturate_u8(static_cast<float>(sum) * scale);
      } else {
        d[i] = count == 0 ? 0 : saturate_u8(static_cast<float>(sum) / static_cast<float>(count));
      }
    }
  }
  return out;
}

struct AreaTap {
  int dst, src;
  float weight;
};

// Which source cells each output cell covers, and by what share (cv2's table).
std::vector<AreaTap> area_axis(int ssize, int dsize, int cn, double scale) {
  std::vector<AreaTap> tab;
  for (int d = 0; d < dsize; ++d) {
    const double fs1 = d * scale, fs2 = fs1 + scale;
    const double cell = std::min(scale, ssize - fs1);
    int s1 = ceil_int(fs1), s2 = floor_int(fs2);
    s2 = std::min(s2, ssize - 1);
    s1 = std::min(s1, s2);
    if (s1 - fs1 > 1e-3) tab.push_back({d * cn, (s1 - 1) * cn, static_cast<float>((s1 - fs1) / cell)});
    for (int s = s1; s < s2; ++s) tab.push_back({d * cn, s * cn, static_cast<float>(1.0 / cell)});
    if (fs2 - s2 > 1e-3) {
      tab.push_back({d * cn, s2 * cn, static_cast<float>(std::min(std::min(fs2 - s2, 1.), cell) / cell)});
    }
  }
  return tab;
}

Image resize_area_cells(const ImageView& src, int dh, int dw, double scale_x, double scale_y) {
  const int cn = src.channels;
  const std::vector<AreaTap> xt = area_axis(src.width, dw, cn, scale_x);
  const std::vector<AreaTap> yt = area_axis(src.height, dh, 1, scale_y);
  const std::size_t row_len = static_cast<std::size_t>(dw) * cn;
  std::vector<float> buf(row_len), sum(row_len, 0.f);
  Image out(dh, dw, src.order);
  auto emit = [&](int dy) {
    std::uint8_t* d = out.row(dy);
    for (std::size_t i = 0; i < row_len; ++i) d[i] = saturate_u8(sum[i]);
  };
  int prev = yt.empty() ? 0 : yt.front().dst;
  for (const AreaTap& row : yt) {
    const std::uint8_t* s = src.row(row.src);
    std::fill(buf.begin(), buf.end(), 0.f);
    for (const AreaTap& col : xt) {
      for (int c = 0; c < cn; ++c) buf[col.dst + c] += static_cast<float>(s[col.src + c]) * col.weight;
    }
    if (row.dst != prev) {
      emit(prev);
      for (std::size_t i = 0; i < row_len; ++i) sum[i] = row.weight * buf[i];
      prev = row.dst;
    } else {
      for (std::size_t i = 0; i < row_len; ++i) sum[i] += row.weight * buf[i];
    }
  }
  emit(prev);
  return out;
}

}  // namespace

const char* interpolation_name(Interpolation interpolation) {
  switch (interpolation) {
    case Interpolation::linear: return "linear";
    case Interpolation::nearest: return "nearest";
    case Interpolation::area: return "area";
  }
  return "?";
}

Image resize(const ImageView& src, int height, int width, Interpolation interpolation) {
  src.check();
  if (height < 1 || width < 1) {
    throw Error(ExitCode::input, "resize to " + std::to_string(height) + "x" + std::to_string(width),
                "give a positive height and width");
  }
  if (height == src.height && width == src.width) return Image::copy_of(src);
  if (interpolation == Interpolation::nearest) return resize_nearest(src, height, width);

  const double inv_x = static_cast<double>(width) / src.width, inv_y = static_cast<double>(height) / src.height;
  const double scale_x = 1. / inv_x, scale_y = 1. / inv_y;
  const int int_x = round_even(scale_x), int_y = round_even(scale_y);
  const bool integer_factors = std::abs(scale_x - int_x) < DBL_EPSILON && std::abs(scale_y - int_y) < DBL_EPSILON;

  // cv2: an exact 2x shrink both ways is the same as the 2x2 box filter, and takes it.
  if (interpolation == Interpolation::linear && integer_factors && int_x == 2 && int_y == 2) {
    interpolation = Interpolation::area;
  }
  if (interpolation == Interpolation::area && scale_x >= 1 && scale_y >= 1) {
    if (integer_factors) return resize_area_blocks(src, height, width, int_x, int_y);
    return resize_area_cells(src, height, width, scale_x, scale_y);
  }
  return resize_two_tap(src, height, width, scale_x, scale_y, inv_x, inv_y, interpolation == Interpolation::area);
}

}  // namespace edgekit
