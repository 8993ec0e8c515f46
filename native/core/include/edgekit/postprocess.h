// A bundle's task.json interpreted: the model's first output becomes readable
// results with the arithmetic of edgekit's Python tasks (edgekit/tasks/*.py), so
// an app reports what `edgekit` reported when the bundle was verified.
//
//   auto post = Postprocessor::from_file(bundle + "/task.json");
//   Json results = post.run(output0);            // the same keys as Task.postprocess
//   auto lines = post.recognize(output0);        // or typed, per task kind
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/json.h"
#include "edgekit/npy.h"

namespace edgekit {

enum class TaskKind { classification, ocr_det, ocr_rec, ocr_cls };

const char* task_kind_name(TaskKind kind);

// --- classification -------------------------------------------------------------

struct ClassScore {
  std::int64_t index = 0;
  std::string label;  // the class name, or the index as text
  double score = 0;   // probability, rounded to 6 decimals as Python reports it
};

struct ClassResult {
  ClassScore top;               // Python's {"class", "label", "score"}
  std::vector<ClassScore> best; // the k best, best first (ties: lower index); best[0] == top
};

// `scores` is [samples, classes] (row-major). Rows stay when the whole batch already
// is distributions (>= 0, every row sums to 1 within 1e-3), else a float64 softmax,
// as Python decides per call; an app calling per frame decides per frame.
std::vector<ClassResult> classify(const float* scores, std::int64_t samples, std::int64_t classes,
                                  const std::vector<std::string>& labels, int top_k = 1);

// --- PP-OCR detection (DB) ---------------------------------------------------------

struct DbOptions {
  double thresh = 0.3;
  double box_thresh = 0.6;
  double unclip_ratio = 1.5;
  int min_size = 3;
  int max_candidates = 1000;
  bool slow_score = false;  // score_mode "slow": the mean inside the contour, not its rectangle
};

struct TextBox {
  std::array<std::array<std::int64_t, 2>, 4> quad{};  // map pixels: top-left, top-right, bottom-right, bottom-left
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;              // the quad's axis-aligned bounds
  double score = 0;                                   // mean probability inside the rectangle, rounded to 6 decimals
};

// One probability map [height, width]: PaddleOCR's DB post-processing as
// edgekit/tasks/db.py's db_quads (contours, minimum-area rectangles, box score,
// Clipper unclip), in cv2.findContours' order. Geometry: edgekit/db_geometry.h.
std::vector<TextBox> db_boxes(const float* prob, int height, int width, const DbOptions& options);

// --- PP-OCR recognition (CTC) and direction -------------------------------------

struct TextLine {
  std::string text;       // UTF-8
  double confidence = 0;  // mean max probability of the kept steps, rounded to 6 decimals
};

// `probs` is [steps, classes]; characters[0] is the blank.
TextLine ctc_greedy_decode(const float* probs, std::int64_t steps, std::int64_t classes,
                           const std::vector<std::string>& characters);

struct Direction {
  std::int64_t index = 0;
  std::string label;
  double score = 0;  // rounded to 6 decimals
};

// --- task.json --------------------------------------------------------------------

struct TaskSpec {
  TaskKind kind = TaskKind::classification;
  std::string primary;
  Json options = Json::object();

  static TaskSpec from_json(const Json& document);
  static TaskSpec read(const std::string& path);  // Error(input) naming the file
};

class Postprocessor {
 public:
  // Checks the options as Python's Task.from_options does (unknown keys, ranges).
  explicit Postprocessor(TaskSpec spec);
  static Postprocessor from_file(const std::string& path);

  TaskKind kind() const { return spec_.kind; }
  // Classification labels from labels.txt when task.json has none (Python reads
  // them into the options); top_k > 1 adds the k best to each result.
  void set_labels(std::vector<std::string> labels) { labels_ = std::move(labels); }
  void set_top_k(int k);

  // Per task kind; Error(input) when the output does not have the rank or size the task reads.
  std::vector<ClassResult> classify(const Array& output) const;
  std::vector<std::vector<TextBox>> detect(const Array& output) const;    // [N, 1, H, W]
  std::vector<TextLine> recognize(const Array& output) const;             // [N, steps, classes]
  std::vector<Direction> directions(const Array& output) const;           // [N, labels]

  // Python's Task.postprocess(outputs) as JSON: one entry per sample (plus "top"
  // with the k best for classification when top_k > 1).
  Json run(const Array& output) const;

  const std::vector<std::string>& characters() const { return characters_; }

 private:
  TaskSpec spec_;
  std::vector<std::string> labels_;      // classification / ocr_cls
  std::vector<std::string> characters_;  // ocr_rec: blank, dictionary, optional space
  DbOptions db_;
  int top_k_ = 1;
};

// A CTC dictionary token: non-empty valid UTF-8 without line breaks, of any number of code points (PP-OCRv5's
// flags such as "\U0001F1E9\U0001F1EA" are one class). Python: edgekit.tasks.ocr.token_problem(c) is None.
bool is_token(const std::string& text);
// labels.txt as Python's read_labels: stripped lines, empty ones skipped.
std::vector<std::string> read_labels(const std::string& path);

Json to_json(const ClassScore& value);
Json to_json(const TextBox& value);
Json to_json(const TextLine& value);
Json to_json(const Direction& value);

}  // namespace edgekit
