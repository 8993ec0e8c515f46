// The optional display of a headless demo: each frame written as a PPM image with
// the detected text boxes drawn, for a look on another machine (or `feh` on the board).
#pragma once

#include <string>

#include "edgekit_c.h"

namespace camera_demo {

// DIR/frame_<index>.ppm (P6; gray frames P5); the boxes are every "box" of the result JSON.
void save_annotated(const ek_image& image, const std::string& result_json, const std::string& dir, long index);

}  // namespace camera_demo
