#include "edgekit/postprocess.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/limits.h"
#include "edgekit/numpy_compat.h"

namespace edgekit {
namespace {

constexpr TaskKind kKinds[] = {TaskKind::classification, TaskKind::ocr_det, TaskKind::ocr_rec, TaskKind::ocr_cls};

Error bad_option(TaskKind kind, const std::string& what, const std::string& fix) {
  return Error(ExitCode::input, std::string("task ") + task_kind_name(kind) + " " + what, fix);
}

void check_known(TaskKind kind, const Json& options, std::initializer_list<const char*> known) {
  std::string names;
  for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
  for (const auto& member : options.members()) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return member.first == k; })) {
      throw bad_option(kind, "has an unknown option: " + member.first, "known options: " + (names.empty() ? "none" : names));
    }
  }
}

// Python's number_option: a number (not a boolean) within [low, high], else the default.
double number_option(TaskKind kind, const Json& options, const char* key, double fallback, double low, double high) {
  const Json* v = options.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->as_number() >= low && v->as_number() <= high)) {
    throw bad_option(kind, std::string("option ") + key + " = " + v->dump() + " is not a number in [" +
                               json_number(low) + ", " + json_number(high) + "]",
                     std::string("write ") + key + " as a number, e.g. " + json_number(fallback));
  }
  return v->as_number();
}

std::vector<std::string> string_list(const Json& value) {
  std::vector<std::string> out;
  for (const Json& item : value.items()) out.push_back(item.as_string());
  return out;
}

bool all_strings(const Json& value) {
  return value.is_array() &&
         std::all_of(value.items().begin(), value.items().end(), [](const Json& v) { return v.is_string(); });
}

// Python's scores.sum(axis=-1) closeness to 1: abs(s - 1) <= atol + rtol * abs(1); non-finite never.
bool sums_to_one(double sum) { return std::isfinite(sum) && std::abs(sum - 1.0) <= 1e-3 + 1e-5 * 1.0; }

const Array& check_output(TaskKind kind, const Array& output, std::size_t rank, const char* what) {
  if (output.dtype != DType::float32) {
    throw Error(ExitCode::input,
                std::string("task ") + task_kind_name(kind) + " reads float32 outputs, got " + dtype_name(output.dtype),
                "pass the model's output as Lite returns it (float32)");
  }
  if (rank != 0 && output.shape.size() != rank) {
    throw Error(ExitCode::input,
                std::string("task ") + task_kind_name(kind) + " reads " + what +
                    ", but the model's first output has shape " + shape_text(output.shape),
                "pick the task kind that matches the model ([task] kind)");
  }
  return output;
}

}  // namespace

const char* task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::classification: return "classification";
    case TaskKind::ocr_det: return "ocr_det";
    case TaskKind::ocr_rec: return "ocr_rec";
    case TaskKind::ocr_cls: return "ocr_cls";
  }
  return "?";
}

bool is_token(const std::string& text) {
  if (text.empty()) return false;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead == '\n' || lead == '\r') return false;  // dictionary files hold one token a line
    const std::size_t length =
        lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

std::vector<std::string> read_labels(const std::string& path) {
  const std::string text = read_file_text(path, ExitCode::input);
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    const char* space = " \t\r\n\v\f";
    const std::size_t first = line.find_first_not_of(space);
    if (first != std::string::npos) names.push_back(line.substr(first, line.find_last_not_of(space) - first + 1));
    start = end + 1;
  }
  if (names.empty()) throw Error(ExitCode::input, "labels file " + path + " is empty", "give one class name per line");
  return names;
}

// --- the computations ----------------------------------------------------------------

std::vector<ClassResult> classify(const float* scores, std::int64_t samples, std::int64_t classes,
                                  const std::vector<std::string>& labels, int top_k) {
  if (classes < 1 || samples < 0) {
    throw Error(ExitCode::input, "task classification got " + std::to_string(classes) + " class scores per sample",
                "the model must return [N, classes] scores");
  }
  const std::size_t n = static_cast<std::size_t>(samples), c = static_cast<std::size_t>(classes);
  std::vector<double> probs(scores, scores + n * c);
  // Python's as_probabilities decides for the whole batch.
  bool distributions = !probs.empty();
  for (double v : probs) distributions = distributions && v >= 0.0;  // NaN fails too
  for (std::size_t i = 0; distributions && i < n; ++i) distributions = sums_to_one(numpy_sum(&probs[i * c], c));
  if (!distributions) {
    std::vector<double> e(c);
    for (std::size_t i = 0; i < n; ++i) {
      double* row = &probs[i * c];
      const double peak = row[numpy_argmax(row, c)];
      for (std::size_t j = 0; j < c; ++j) e[j] = std::exp(row[j] - peak);
      const double total = numpy_sum(e.data(), c);
      for (std::size_t j = 0; j < c; ++j) row[j] = e[j] / total;
    }
  }
  auto entry = [&](std::size_t index, double p) {
    ClassScore s;
    s.index = static_cast<std::int64_t>(index);
    s.label = index < labels.size() ? labels[index] : std::to_string(index);
    s.score = python_round(p, 6);
    return s;
  };
  std::vector<ClassResult> out(n);
  std::vector<std::size_t> order(c);
  for (std::size_t i = 0; i < n; ++i) {
    const double* row = &probs[i * c];
    const std::size_t best = numpy_argmax(row, c);
    out[i].top = entry(best, row[best]);
    const std::size_t k = std::min(c, static_cast<std::size_t>(std::max(1, top_k)));
    std::iota(order.begin(), order.end(), 0);
    // Highest first, ties by index; a NaN ranks first, as numpy's argmax picks it.
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
      return na != nb ? na : (!na && row[a] > row[b]);
    });
    for (std::size_t j = 0; j < k; ++j) out[i].best.push_back(entry(order[j], row[order[j]]));
  }
  return out;
}

TextLine ctc_greedy_decode(const float* probs, std::int64_t steps, std::int64_t classes,
                           const std::vector<std::string>& characters) {
  TextLine line;
  std::vector<float> kept;
  std::size_t previous = 0;
  for (std::int64_t t = 0; t < steps; ++t) {
    const float* row = probs + static_cast<std::size_t>(t) * static_cast<std::size_t>(classes);
    const std::size_t index = numpy_argmax(row, static_cast<std::size_t>(classes));
    if (index != 0 && (t == 0 || index != previous)) {
      line.text += characters.at(index);
      kept.push_back(row[index]);
    }
    previous = index;
  }
  line.confidence = kept.empty() ? 0.0 : python_round(numpy_mean(kept.data(), kept.size()), 6);
  return line;
}

// --- task.json -----------------------------------------------------------------------------

TaskSpec TaskSpec::from_json(const Json& document) {
  if (!document.is_object() || !document.find("kind") || !document.at("kind").is_string()) {
    throw Error(ExitCode::input, "task.json has no kind", "give {\"kind\": ..., \"options\": {...}}");
  }
  TaskSpec spec;
  const std::string& kind = document.at("kind").as_string();
  std::string names;
  bool found = false;
  for (TaskKind k : kKinds) {
    names += std::string(names.empty() ? "" : ", ") + task_kind_name(k);
    if (kind == task_kind_name(k)) spec.kind = k, found = true;
  }
  if (!found) throw Error(ExitCode::input, "task kind '" + kind + "' is not known", "use one of " + names);
  if (const Json* primary = document.find("primary"); primary && primary->is_string()) spec.primary = primary->as_string();
  if (const Json* options = document.find("options"); options && !options->is_null()) {
    if (!options->is_object()) throw Error(ExitCode::input, "task.json options is not an object", "write key/value pairs");
    spec.options = *options;
  }
  return spec;
}

TaskSpec TaskSpec::read(const std::string& path) {
  try {
    return from_json(Json::parse(read_file_text(path, ExitCode::input)));
  } catch (const Error& e) {
    if (e.line().rfind(path, 0) == 0) throw;
    throw Error(e.code(), path + ": " + e.what(), e.fix());
  }
}

Postprocessor::Postprocessor(TaskSpec spec) : spec_(std::move(spec)) {
  const Json& o = spec_.options;
  const TaskKind kind = spec_.kind;
  switch (kind) {
    case TaskKind::classification:
      check_known(kind, o, {"labels"});
      if (const Json* labels = o.find("labels")) {
        if (!all_strings(*labels)) {
          throw bad_option(kind, "option labels is not a list of class names", "write labels = [\"cat\", \"dog\", ...] or leave it out");
        }
        labels_ = string_list(*labels);
      }
      break;
    case TaskKind::ocr_det:
      check_known(kind, o, {"thresh", "box_thresh", "unclip_ratio", "min_size", "max_candidates", "score_mode", "match_iou"});
      db_.thresh = number_option(kind, o, "thresh", 0.3, 0.0, 1.0);
      db_.box_thresh = number_option(kind, o, "box_thresh", 0.6, 0.0, 1.0);
      db_.unclip_ratio = number_option(kind, o, "unclip_ratio", 1.5, 0.0, 10.0);
      db_.min_size = static_cast<int>(number_option(kind, o, "min_size", 3, 0, 1000));  // Python's int(): truncates
      db_.max_candidates = static_cast<int>(number_option(kind, o, "max_candidates", 1000, 1, 100000));
      if (const Json* mode = o.find("score_mode")) {
        if (!mode->is_string() || (mode->as_string() != "fast" && mode->as_string() != "slow")) {
          throw bad_option(kind, "option score_mode = " + mode->dump() + " is not one of fast, slow",
                           "write score_mode = \"fast\" (PaddleOCR's default)");
        }
        db_.slow_score = mode->as_string() == "slow";
      }
      number_option(kind, o, "match_iou", 0.5, 0.0, 1.0);  // evaluation only
      break;
    case TaskKind::ocr_rec: {
      check_known(kind, o, {"dictionary", "use_space_char", "ignore_space"});
      const Json* dictionary = o.find("dictionary");
      if (dictionary == nullptr || !all_strings(*dictionary) || dictionary->size() == 0 ||
          !std::all_of(dictionary->items().begin(), dictionary->items().end(),
                       [](const Json& c) { return is_token(c.as_string()); })) {
        throw bad_option(kind, "needs option dictionary: a list of tokens (non-empty UTF-8 strings without line breaks)",
                         "rebuild the bundle: edgekit writes the dictionary into task.json as a list");
      }
      bool space = true;
      for (const char* key : {"use_space_char", "ignore_space"}) {
        if (const Json* flag = o.find(key)) {
          if (flag->type() != Json::Type::boolean) {
            throw bad_option(kind, std::string("option ") + key + " = " + flag->dump() + " is not true/false",
                             std::string("write ") + key + " = true");
          }
          if (std::string(key) == "use_space_char") space = flag->as_bool();
        }
      }
      characters_.push_back("");  // the CTC blank
      for (const std::string& c : string_list(*dictionary)) characters_.push_back(c);
      if (space) characters_.push_back(" ");
      break;
    }
    case TaskKind::ocr_cls:
      check_known(kind, o, {"labels"});
      labels_ = {"0", "180"};
      if (const Json* labels = o.find("labels")) {
        if (!all_strings(*labels) || labels->size() < 2) {
          throw bad_option(kind, "option labels is not a list of at least two names", "e.g. labels = [\"0\", \"180\"]");
        }
        labels_ = string_list(*labels);
      }
      break;
  }
}

Postprocessor Postprocessor::from_file(const std::string& path) { return Postprocessor(TaskSpec::read(path)); }

void Postprocessor::set_top_k(int k) {
  if (k < 1) throw Error(ExitCode::usage, "top-k " + std::to_string(k), "give k >= 1");
  top_k_ = k;
}

std::vector<ClassResult> Postprocessor::classify(const Array& output) const {
  check_output(spec_.kind, output, 0, "class scores [N, classes]");
  if (output.shape.empty()) {
    throw Error(ExitCode::input, "task classification got a scalar output", "the model must return [N, classes] scores");
  }
  const std::int64_t n = output.shape[0];
  const std::int64_t classes = n ? output.count() / n : 0;
  return edgekit::classify(output.as<float>(), n, classes, labels_, top_k_);
}

std::vector<std::vector<TextBox>> Postprocessor::detect(const Array& output) const {
  check_output(spec_.kind, output, 4, "probability maps [N, 1, H, W]");
  const std::int64_t n = output.shape[0], maps = output.shape[1], h = output.shape[2], w = output.shape[3];
  // Python reads output[:, 0]: without a map there is nothing to read (an empty batch is fine).
  // The map sides become ints in db_boxes, so they must be image sides.
  if (n > 0 && (maps < 1 || h > limits::kMaxImageSide || w > limits::kMaxImageSide)) {
    throw Error(ExitCode::input,
                "task ocr_det reads the first of the probability maps [N, 1, H, W], but the model's first output has "
                "shape " + shape_text(output.shape),
                "pick the task kind that matches the model ([task] kind)");
  }
  std::vector<std::vector<TextBox>> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* first_map = output.as<float>() + static_cast<std::size_t>(i * maps * h * w);
    out.push_back(db_boxes(first_map, static_cast<int>(h), static_cast<int>(w), db_));
  }
  return out;
}

std::vector<TextLine> Postprocessor::recognize(const Array& output) const {
  check_output(spec_.kind, output, 3, "CTC scores [N, steps, classes]");
  const std::int64_t n = output.shape[0], steps = output.shape[1], classes = output.shape[2];
  if (classes != static_cast<std::int64_t>(characters_.size())) {
    throw Error(ExitCode::input,
                "the model scores " + std::to_string(classes) + " classes, the dictionary gives " +
                    std::to_string(characters_.size()) + " (blank + characters" +
                    (characters_.back() == " " ? " + space)" : ")"),
                "use the dictionary the recognition model was trained with (use_space_char as trained)");
  }
  std::vector<TextLine> out;
  for (std::int64_t i = 0; i < n; ++i) {
    out.push_back(ctc_greedy_decode(output.as<float>() + static_cast<std::size_t>(i * steps * classes), steps, classes,
                                    characters_));
  }
  return out;
}

std::vector<Direction> Postprocessor::directions(const Array& output) const {
  check_output(spec_.kind, output, 2, "direction scores [N, labels]");
  const std::int64_t n = output.shape[0], classes = output.shape[1];
  if (classes != static_cast<std::int64_t>(labels_.size())) {
    throw Error(ExitCode::input,
                "the model scores " + std::to_string(classes) + " directions, the task names " +
                    std::to_string(labels_.size()),
                "give one label per class (task option labels)");
  }
  std::vector<Direction> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = output.as<float>() + static_cast<std::size_t>(i * classes);
    const std::size_t best = numpy_argmax(row, static_cast<std::size_t>(classes));
    out.push_back({static_cast<std::int64_t>(best), labels_[best], python_round(row[best], 6)});
  }
  return out;
}

Json Postprocessor::run(const Array& output) const {
  Json out = Json::array();
  switch (spec_.kind) {
    case TaskKind::classification:
      for (const ClassResult& r : classify(output)) {
        Json item = to_json(r.top);
        if (top_k_ > 1) {
          Json best = Json::array();
          for (const ClassScore& s : r.best) best.push(to_json(s));
          item.set("top", best);
        }
        out.push(item);
      }
      break;
    case TaskKind::ocr_det:
      for (const auto& image : detect(output)) {
        Json boxes = Json::array();
        for (const TextBox& b : image) boxes.push(to_json(b));
        out.push(boxes);
      }
      break;
    case TaskKind::ocr_rec:
      for (const TextLine& line : recognize(output)) out.push(to_json(line));
      break;
    case TaskKind::ocr_cls:
      for (const Direction& d : directions(output)) out.push(to_json(d));
      break;
  }
  return out;
}

Json to_json(const ClassScore& value) {
  Json out = Json::object();
  out.set("class", value.index);
  out.set("label", value.label);
  out.set("score", value.score);
  return out;
}

Json to_json(const TextBox& value) {
  Json box = Json::array();
  for (double v : {value.x0, value.y0, value.x1, value.y1}) box.push(v);
  Json quad = Json::array();
  for (const auto& p : value.quad) quad.push(Json::array_of(std::vector<std::int64_t>{p[0], p[1]}));
  Json out = Json::object();
  out.set("box", box);
  out.set("quad", quad);
  out.set("score", value.score);
  return out;
}

Json to_json(const TextLine& value) {
  Json out = Json::object();
  out.set("text", value.text);
  out.set("confidence", value.confidence);
  return out;
}

Json to_json(const Direction& value) {
  Json out = Json::object();
  out.set("label", value.label);
  out.set("score", value.score);
  return out;
}

}  // namespace edgekit
