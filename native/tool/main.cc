// edgekit-core-tool: the app core's preprocessing and post-processing on files, so
// tests (and people) can drive exactly what an app runs, on the host or under qemu.
// Image decoding is not the core's job: images come as uint8 .npy arrays.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/npy.h"
#include "edgekit/postprocess.h"
#include "edgekit/preprocess.h"

namespace edgekit {
namespace {

const char* kUsage =
    "usage:\n"
    "  edgekit-core-tool preprocess --spec PREPROCESS.json --image IMAGE.npy --out TENSOR.npy\n"
    "                    [--order gray|bgr|rgb|bgra|rgba]\n"
    "  edgekit-core-tool postprocess --task TASK.json --output OUTPUT.npy --json RESULT.json\n"
    "                    [--labels LABELS.txt] [--top-k K]\n"
    "  edgekit-core-tool jobs JOBS.json REPORT.json\n"
    "  edgekit-core-tool --help\n"
    "\n"
    "IMAGE.npy is uint8 HxW or HxWxC; its order defaults to gray, bgr or bgra by C (as cv2 decodes).\n"
    "TENSOR.npy is float32 CxHxW or HxWxC (no batch axis). RESULT.json is {\"kind\", \"results\"}, the results\n"
    "in the keys of edgekit's Task.postprocess. JOBS.json is a list of {\"op\": \"preprocess\"|\"postprocess\"}\n"
    "objects with the options above as keys (top_k for --top-k); REPORT.json gets one {\"ok\", ...} per job.\n";

// One preprocess or postprocess call, from the command line or a jobs file.
struct Job {
  std::string op;
  std::map<std::string, std::string> values;

  const std::string& need(const std::string& key) const {
    auto it = values.find(key);
    if (it == values.end() || it->second.empty()) {
      throw Error(ExitCode::usage, op + " needs --" + key, "see edgekit-core-tool --help");
    }
    return it->second;
  }
  std::string get(const std::string& key) const {
    auto it = values.find(key);
    return it == values.end() ? std::string() : it->second;
  }
};

const std::vector<std::string>& known_keys(const std::string& op) {
  static const std::vector<std::string> pre = {"spec", "image", "out", "order"};
  static const std::vector<std::string> post = {"task", "output", "json", "labels", "top_k"};
  if (op == "preprocess") return pre;
  if (op == "postprocess") return post;
  throw Error(ExitCode::usage, "unknown operation '" + op + "'", "use preprocess or postprocess");
}

void check_keys(const Job& job) {
  const auto& known = known_keys(job.op);
  for (const auto& kv : job.values) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == kv.first;
    if (!ok) throw Error(ExitCode::usage, job.op + " has no option " + kv.first, "see edgekit-core-tool --help");
  }
}

Job job_from_args(const std::vector<std::string>& args) {
  Job job;
  job.op = args.at(0);
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag.rfind("--", 0) != 0 || i + 1 >= args.size()) {
      throw Error(ExitCode::usage, "unexpected argument '" + flag + "'", "give --option VALUE pairs");
    }
    std::string key = flag.substr(2);
    for (char& c : key) c = c == '-' ? '_' : c;
    job.values[key] = args[++i];
  }
  check_keys(job);
  return job;
}

Job job_from_json(const Json& item) {
  if (!item.is_object() || !item.find("op") || !item.at("op").is_string()) {
    throw Error(ExitCode::usage, "a job is not an object with an \"op\"", "write {\"op\": \"preprocess\", ...}");
  }
  Job job;
  job.op = item.at("op").as_string();
  for (const auto& member : item.members()) {
    if (member.first == "op") continue;
    job.values[member.first] = member.second.is_string() ? member.second.as_string() : member.second.dump();
  }
  check_keys(job);
  return job;
}

PixelOrder parse_order(const std::string& text, int channels) {
  if (text.empty()) return default_pixel_order(channels);
  for (PixelOrder o : {PixelOrder::gray, PixelOrder::bgr, PixelOrder::rgb, PixelOrder::bgra, PixelOrder::rgba}) {
    if (text == pixel_order_name(o)) return o;
  }
  throw Error(ExitCode::usage, "unknown pixel order '" + text + "'", "use gray, bgr, rgb, bgra or rgba");
}

// Parsed files are reused across the jobs of one run (a batch shares one spec).
struct Cache {
  std::map<std::string, std::shared_ptr<Preprocessor>> preprocessors;
  std::map<std::string, std::shared_ptr<Postprocessor>> postprocessors;
};

Json run_preprocess(const Job& job, Cache& cache) {
  const std::string& spec_path = job.need("spec");
  auto& pre = cache.preprocessors[spec_path];
  if (!pre) pre = std::make_shared<Preprocessor>(Preprocessor::from_file(spec_path));
  const std::string& image_path = job.need("image");
  const Array image = read_npy(image_path);
  if (image.dtype != DType::uint8 || image.shape.size() < 2 || image.shape.size() > 3) {
    throw Error(ExitCode::input,
                image_path + " is " + dtype_name(image.dtype) + " " + shape_text(image.shape) + ", not a uint8 image",
                "save the decoded image as uint8 HxW or HxWxC");
  }
  const int channels = image.shape.size() == 3 ? static_cast<int>(image.shape[2]) : 1;
  const PixelOrder order = parse_order(job.get("order"), channels);
  if (pixel_order_channels(order) != channels) {
    throw Error(ExitCode::usage, std::string("order ") + pixel_order_name(order) + " does not fit " +
                                     std::to_string(channels) + " channel(s)",
                "give the order of the array's channels");
  }
  const ImageView view = ImageView::of(image.data.data(), static_cast<int>(image.shape[0]),
                                       static_cast<int>(image.shape[1]), order);
  Tensor tensor = pre->run(view);
  Array out;
  out.dtype = DType::float32;
  out.shape = tensor.shape;
  out.data.resize(tensor.data.size() * sizeof(float));
  std::copy(tensor.data.begin(), tensor.data.end(), out.as<float>());
  write_npy(job.need("out"), out);
  Json done = Json::object();
  done.set("shape", Json::array_of(tensor.shape));
  return done;
}

Json run_postprocess(const Job& job, Cache& cache) {
  const std::string key = job.need("task") + "\n" + job.get("labels") + "\n" + job.get("top_k");
  auto& post = cache.postprocessors[key];
  if (!post) {
    post = std::make_shared<Postprocessor>(Postprocessor::from_file(job.need("task")));
    if (!job.get("labels").empty()) post->set_labels(read_labels(job.get("labels")));
    if (!job.get("top_k").empty()) {
      const std::string& k = job.get("top_k");
      if (k.find_first_not_of("0123456789") != std::string::npos || k.size() > 6) {
        throw Error(ExitCode::usage, "--top-k " + k + " is not a count", "give a positive integer");
      }
      post->set_top_k(std::stoi(k));
    }
  }
  Json document = Json::object();
  document.set("kind", task_kind_name(post->kind()));
  document.set("results", post->run(read_npy(job.need("output"))));
  write_file_atomic(job.need("json"), document.dump(1) + "\n");
  return Json::object();
}

Json run_job(const Job& job, Cache& cache) {
  return job.op == "preprocess" ? run_preprocess(job, cache) : run_postprocess(job, cache);
}

int run_jobs(const std::string& jobs_path, const std::string& report_path) {
  const Json jobs = Json::parse(read_file_text(jobs_path, ExitCode::input));
  if (!jobs.is_array()) throw Error(ExitCode::usage, jobs_path + " is not a list of jobs", "write [{\"op\": ...}, ...]");
  Cache cache;
  Json results = Json::array();
  int first_failure = 0, failed = 0;
  for (const Json& item : jobs.items()) {
    Json entry;
    try {
      entry = run_job(job_from_json(item), cache);
      entry.set("ok", true);
    } catch (const Error& e) {
      entry = Json::object();
      entry.set("ok", false);
      entry.set("exit_code", static_cast<int>(e.code()));
      entry.set("error", e.line());
      if (first_failure == 0) first_failure = static_cast<int>(e.code());
      ++failed;
    } catch (const std::exception& e) {
      entry = Json::object();
      entry.set("ok", false);
      entry.set("exit_code", static_cast<int>(ExitCode::internal));
      entry.set("error", std::string("internal error: ") + e.what());
      if (first_failure == 0) first_failure = static_cast<int>(ExitCode::internal);
      ++failed;
    }
    results.push(entry);
  }
  Json report = Json::object();
  report.set("jobs", results);
  report.set("failed", failed);
  write_file_atomic(report_path, report.dump(1) + "\n");
  return first_failure;
}

}  // namespace
}  // namespace edgekit

int main(int argc, char** argv) {
  using namespace edgekit;
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      std::fputs(kUsage, args.empty() ? stderr : stdout);
      return args.empty() ? static_cast<int>(ExitCode::usage) : 0;
    }
    if (args[0] == "jobs") {
      if (args.size() != 3) throw Error(ExitCode::usage, "jobs takes JOBS.json REPORT.json", "see --help");
      return run_jobs(args[1], args[2]);
    }
    Cache cache;
    run_job(job_from_args(args), cache);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "edgekit-core-tool: error: %s\n", e.line().c_str());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgekit-core-tool: error: %s\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
}
