// The optional display of a headless demo: each frame written as a PPM image with
// the detected text boxes, object boxes or masks drawn, for a look on another machine (or `feh` on the board).
#pragma once

#include <string>

#include "edgekit_c.h"

namespace camera_demo {

// DIR/frame_<index>.ppm (P6; gray frames P5). OCR: every "box" of the result JSON in red;
// detection: boxes scoring >= min_score in a colour per class with "label score"; segmentation:
// the mask blended over the frame (overlay.h).
void save_annotated(const ek_image& image, const std::string& result_json, const std::string& dir, long index,
                    double min_score = 0.5);

}  // namespace camera_demo
