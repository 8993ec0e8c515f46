// edgekit-detect-tool: the core's detection and segmentation post-processing on files, so tests
// compare it with edgekit's Python tasks on the host and under qemu (one process, many jobs).
//
//   edgekit-detect-tool JOBS.json REPORT.json
//
// JOBS.json is a list of jobs:
//   {"op": "detect", "task": TASK.json, "outputs": [OUT0.npy, ...], "preprocess": PREPROCESS.json,
//    "image": [height, width]}      preprocess + image (optional): boxes mapped back to that image
//   {"op": "segment", "task": TASK.json, "output": OUT.npy, "size": [height, width]}   size optional, or
//    "preprocess" + "image" as for detect: the map onto that image (letterbox border cut off)
// REPORT.json gets one entry per job: {"ok": true, "results": [...]} or {"ok": false, "error": "..."};
// detect results are per image lists of {"box", "class", "label", "score"}, segment results per image
// {"size": [h, w], "classes": [row-major class indices]}.
#include <cstdio>
#include <string>
#include <vector>

#include "edgekit/detection.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/npy.h"
#include "edgekit/preprocess.h"

namespace edgekit {
namespace {

Json task_options(const std::string& path, const char* kind) {
  const Json task = Json::parse(read_file_text(path, ExitCode::input));
  if (!task.is_object() || task.find("kind") == nullptr || task.at("kind").as_string() != kind) {
    throw Error(ExitCode::input, path + " is not a task.json of kind " + kind, "pass the bundle's task.json");
  }
  const Json* options = task.find("options");
  return options ? *options : Json::object();
}

Json detect_job(const Json& job) {
  const DetectionOptions options = DetectionOptions::from_json(task_options(job.at("task").as_string(), "detection"));
  std::vector<Array> arrays;
  for (const Json& path : job.at("outputs").items()) arrays.push_back(read_npy(path.as_string()));
  std::vector<const Array*> outputs;
  for (const Array& a : arrays) outputs.push_back(&a);
  auto found = detect(outputs, options);
  if (const Json* pre = job.find("preprocess")) {
    const BundlePreprocess bundle = BundlePreprocess::read(pre->as_string());
    const Json& image = job.at("image");
    const Geometry g = bundle.spec->geometry(static_cast<int>(image.at(0).as_int()), static_cast<int>(image.at(1).as_int()));
    for (auto& per_image : found) {
      for (Detection& d : per_image) g.to_image(d.box);
    }
  }
  Json results = Json::array();
  for (const auto& per_image : found) {
    Json list = Json::array();
    for (const Detection& d : per_image) list.push(to_json(d, options.labels));
    results.push(list);
  }
  return results;
}

Json segment_job(const Json& job) {
  const SegmentationOptions options =
      SegmentationOptions::from_json(task_options(job.at("task").as_string(), "segmentation"));
  const Array output = read_npy(job.at("output").as_string());
  Json results = Json::array();
  for (ClassMap map : class_maps(output, options)) {
    if (const Json* pre = job.find("preprocess")) {
      const BundlePreprocess bundle = BundlePreprocess::read(pre->as_string());
      const Json& image = job.at("image");
      map = map_to_image(map, *bundle.spec, static_cast<int>(image.at(0).as_int()), static_cast<int>(image.at(1).as_int()));
    } else if (const Json* size = job.find("size")) {
      map = resize_nearest(map, static_cast<int>(size->at(0).as_int()), static_cast<int>(size->at(1).as_int()));
    }
    Json entry = Json::object();
    Json shape = Json::array();
    shape.push(Json(map.height));
    shape.push(Json(map.width));
    entry.set("size", shape);
    Json classes = Json::array();
    for (std::uint8_t c : map.classes) classes.push(Json(static_cast<int>(c)));
    entry.set("classes", classes);
    results.push(entry);
  }
  return results;
}

int run(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: edgekit-detect-tool JOBS.json REPORT.json\n");
    return static_cast<int>(ExitCode::usage);
  }
  const Json jobs = Json::parse(read_file_text(argv[1], ExitCode::input));
  Json report = Json::array();
  for (const Json& job : jobs.items()) {
    Json entry = Json::object();
    try {
      const std::string& op = job.at("op").as_string();
      if (op == "detect") entry.set("results", detect_job(job));
      else if (op == "segment") entry.set("results", segment_job(job));
      else throw Error(ExitCode::usage, "unknown op '" + op + "'", "use detect or segment");
      entry.set("ok", Json(true));
    } catch (const Error& e) {
      entry.set("ok", Json(false));
      entry.set("error", std::string(e.what()));
    }
    report.push(entry);
  }
  write_file_atomic(argv[2], report.dump() + "\n");
  return 0;
}

}  // namespace
}  // namespace edgekit

int main(int argc, char** argv) {
  try {
    return edgekit::run(argc, argv);
  } catch (const edgekit::Error& e) {
    std::fprintf(stderr, "edgekit-detect-tool: %s\n", e.what());
    return static_cast<int>(e.code());
  }
}
