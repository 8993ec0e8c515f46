// edgekit-lite-run: load a .nb once, run every sample of the given inputs through
// Paddle-Lite, write the outputs and a JSON record. One binary for every ARM
// target; `edgekit-lite-run --help` and native/README.md describe the interface.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "edgekit/cpuinfo.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/lite_engine.h"
#include "edgekit/nbfile.h"
#include "edgekit/npy.h"
#include "edgekit/npz.h"
#include "edgekit/platform.h"
#include "markers.h"
#include "options.h"
#include "record.h"

#ifndef EDGEKIT_LITE_DOTPROD
#define EDGEKIT_LITE_DOTPROD 0
#endif

namespace edgekit {
namespace runner {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Feed {
  std::string name;
  std::string file;
  Array array;
  std::size_t model_index = 0;
};

// Provisional records (status "running", with the phase reached) are written as
// the run goes, so a run killed by a signal on a remote board still says where.
class RecordSink {
 public:
  explicit RecordSink(std::string path) : path_(std::move(path)) {}
  void provisional(const RunReport& report) const {
    try {
      write_file_atomic(path_, report.to_json().dump(2) + "\n");
    } catch (const Error&) {
      // the final write reports the problem
    }
  }
  void final(const RunReport& report) const { write_file_atomic(path_, report.to_json().dump(2) + "\n"); }

 private:
  std::string path_;
};

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

std::vector<Feed> load_feeds(const Options& o) {
  std::vector<Feed> feeds;
  if (!o.inputs_npz.empty()) {
    for (auto& item : read_npz(o.inputs_npz)) {
      feeds.push_back({item.name, o.inputs_npz + ":" + item.name + ".npy", std::move(item.array), 0});
    }
    if (feeds.empty()) throw Error(ExitCode::input, o.inputs_npz + " holds no arrays", "write the inputs with numpy.savez");
  } else {
    for (const auto& f : o.inputs) feeds.push_back({f.name, f.path, read_npy(f.path), 0});
  }
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    for (std::size_t j = i + 1; j < feeds.size(); ++j) {
      if (feeds[i].name == feeds[j].name) {
        throw Error(ExitCode::input, "input '" + feeds[i].name + "' is given twice", "pass each input once");
      }
    }
  }
  return feeds;
}

// Lite checks none of this: a wrongly shaped tensor runs and returns numbers.
std::int64_t check_feeds(std::vector<Feed>& feeds, const LiteEngine& engine, const Options& o, RunReport& report) {
  const auto& names = engine.input_names();
  std::vector<std::string> given;
  for (const auto& f : feeds) given.push_back(f.name.empty() ? "(unnamed)" : f.name);
  if (feeds.size() != names.size()) {
    throw Error(ExitCode::input,
                "the model has " + std::to_string(names.size()) + " input(s) (" + list(names) + "), " +
                    std::to_string(feeds.size()) + " given (" + list(given) + ")",
                "pass one array per model input");
  }
  for (auto& f : feeds) {
    if (f.name.empty()) {
      if (names.size() != 1) throw Error(ExitCode::input, "an unnamed --input needs a one-input model", "write NAME=FILE.npy");
      f.name = names[0];
    }
    const auto at = std::find(names.begin(), names.end(), f.name);
    if (at == names.end()) {
      throw Error(ExitCode::input, "input '" + f.name + "' is not one of the model's inputs (" + list(names) + ")",
                  "name the arrays after the model's inputs");
    }
    f.model_index = static_cast<std::size_t>(at - names.begin());
  }
  for (const auto& e : o.expects) {
    if (std::find(names.begin(), names.end(), e.name) == names.end()) {
      throw Error(ExitCode::input, "--expect names '" + e.name + "', which is not a model input (" + list(names) + ")",
                  "check the manifest the expectations came from");
    }
  }
  std::sort(feeds.begin(), feeds.end(), [](const Feed& a, const Feed& b) { return a.model_index < b.model_index; });

  std::int64_t samples = -1;
  for (const auto& f : feeds) {
    const Array& a = f.array;
    if (a.shape.empty() || a.shape[0] < 1) {
      throw Error(ExitCode::input, "input '" + f.name + "' (" + f.file + ") has shape " + shape_text(a.shape) +
                                       "; its first dimension must count the samples",
                  "save an array of shape N x <model input shape without batch>");
    }
    if (samples < 0) samples = a.shape[0];
    if (a.shape[0] != samples) {
      throw Error(ExitCode::input, "inputs disagree on the sample count (" + std::to_string(samples) + " vs " +
                                       std::to_string(a.shape[0]) + " for '" + f.name + "')",
                  "give every input the same number of samples");
    }
    TensorRecord rec{f.name, a.shape, dtype_name(a.dtype), f.file, std::nullopt, std::nullopt,
                     engine.reported_input_shape(f.model_index)};
    const auto declared = engine.declared_input_dtype(f.model_index);
    if (declared) {
      rec.declared_dtype = dtype_name(*declared);
      if (*declared != a.dtype) {
        throw Error(ExitCode::input, "input '" + f.name + "' is " + dtype_name(a.dtype) + " but the model declares " +
                                         dtype_name(*declared),
                    std::string("convert it, e.g. numpy: a.astype(numpy.") + dtype_name(*declared) + ")");
      }
    }
    const Expect* expect = nullptr;
    for (const auto& e : o.expects) expect = e.name == f.name ? &e : expect;
    if (!expect) {
      report.notes.push_back("input '" + f.name + "': shape not checked (no --expect; Lite " +
                             engine.version() + " does not report declared shapes)");
    } else {
      rec.expected = expect->shape;
      if (expect->dtype != a.dtype) {
        throw Error(ExitCode::input, "input '" + f.name + "' is " + dtype_name(a.dtype) + ", expected " +
                                         dtype_name(expect->dtype),
                    std::string("convert it, e.g. numpy: a.astype(numpy.") + dtype_name(expect->dtype) + ")");
      }
      bool fits = expect->shape.size() == a.shape.size();
      for (std::size_t d = 1; fits && d < a.shape.size(); ++d) {
        fits = expect->shape[d] == -1 || expect->shape[d] == a.shape[d];
      }
      if (!fits) {
        Shape sample(a.shape.begin() + 1, a.shape.end()), want(expect->shape.begin() + 1, expect->shape.end());
        throw Error(ExitCode::input, "input '" + f.name + "' holds samples of shape " + shape_text(sample) +
                                         ", the model expects " + shape_text(want) + " (-1 = any)",
                    "preprocess the data to the model's input shape");
      }
      const auto fixed = expect->shape[0];
      if (fixed > 0 && (o.batch != fixed || samples % fixed != 0)) {
        throw Error(ExitCode::input, "input '" + f.name + "' has a fixed batch of " + std::to_string(fixed) +
                                         "; got --batch " + std::to_string(o.batch) + " over " +
                                         std::to_string(samples) + " samples",
                    "run with --batch " + std::to_string(fixed) + " and a multiple of it as the sample count");
      }
    }
    report.inputs.push_back(rec);
  }
  return samples;
}

void feed_chunk(LiteEngine& engine, const std::vector<Feed>& feeds, std::int64_t start, std::int64_t count) {
  for (const auto& f : feeds) {
    Shape shape = f.array.shape;
    const std::size_t per_sample = f.array.bytes() / static_cast<std::size_t>(shape[0]);
    shape[0] = count;
    engine.set_input(f.model_index, f.array.dtype, shape,
                     f.array.data.data() + static_cast<std::size_t>(start) * per_sample);
  }
}

// Outputs stream to output_<i>.npy.partial and are renamed only when all is written.
class OutputFiles {
 public:
  OutputFiles(std::string dir, std::size_t count)
      : dir_(std::move(dir)), writers_(count), sample_(count), dtype_(count) {}
  ~OutputFiles() {
    if (committed_) return;
    for (auto& w : writers_) w = NpyStreamWriter();  // closes what is open
    for (std::size_t i = 0; i < writers_.size(); ++i) remove_file_quietly(partial(i));
  }

  std::string final_path(std::size_t i) const { return join_path(dir_, "output_" + std::to_string(i) + ".npy"); }

  void append(std::size_t i, const std::string& name, const TensorView& view, std::int64_t chunk, std::int64_t total,
              RunReport& report) {
    if (view.shape.empty() || view.shape[0] != chunk) {
      throw Error(ExitCode::run, "output '" + name + "' has shape " + shape_text(view.shape) + " for a chunk of " +
                                     std::to_string(chunk) + " sample(s); its first dimension must count the samples",
                  "run with --batch 1, or export the model with a batch dimension");
    }
    Shape sample(view.shape.begin() + 1, view.shape.end());
    if (!writers_[i].is_open()) {
      Shape whole = sample;
      whole.insert(whole.begin(), total);
      writers_[i] = NpyStreamWriter(partial(i), view.dtype, whole);
      sample_[i] = sample;
      dtype_[i] = view.dtype;
      report.outputs.push_back({name, whole, dtype_name(view.dtype), final_path(i), std::nullopt, std::nullopt, std::nullopt});
    } else if (sample != sample_[i] || dtype_[i] != view.dtype) {
      throw Error(ExitCode::run, "output '" + name + "' changes from " + shape_text(sample_[i]) + " to " +
                                     shape_text(sample) + " per sample between chunks",
                  "run with --batch 1 and inputs of one shape");
    }
    writers_[i].append(view.data, view.bytes);
  }

  void commit() {
    for (auto& w : writers_) w.close();
    for (std::size_t i = 0; i < writers_.size(); ++i) rename_file(partial(i), final_path(i));
    committed_ = true;
  }

 private:
  std::string partial(std::size_t i) const { return final_path(i) + ".partial"; }
  std::string dir_;
  std::vector<NpyStreamWriter> writers_;
  std::vector<Shape> sample_;
  std::vector<DType> dtype_;
  bool committed_ = false;
};

// --rows: NMS rows + counts (PaddleDetection's multiclass_nms3 outputs). Each chunk's outputs are
// checked against the count output (1-D, integer, one value per sample), and the first sum(counts)
// rows of every output but the counts are kept; all are written, concatenated, at the end.
class RowFiles {
 public:
  RowFiles(std::string dir, std::size_t count) : dir_(std::move(dir)), parts_(count) {}

  void append(const std::vector<std::string>& names, const std::vector<TensorView>& views, std::int64_t chunk) {
    std::int64_t counted = -1;
    std::size_t counts_at = views.size();
    for (std::size_t i = 0; i < views.size() && counts_at == views.size(); ++i) {
      const TensorView& v = views[i];
      const bool integer = v.dtype == DType::int32 || v.dtype == DType::int64;
      if (integer && v.shape.size() == 1 && v.shape[0] == chunk) counts_at = i;
    }
    if (counts_at == views.size()) {
      std::string shapes;
      for (std::size_t i = 0; i < views.size(); ++i) {
        shapes += (i ? ", " : "") + names[i] + " " + shape_text(views[i].shape) + " " + dtype_name(views[i].dtype);
      }
      throw Error(ExitCode::run, "--rows: no output counts the rows of each of the chunk's " + std::to_string(chunk) +
                                     " sample(s) (a 1-D int32/int64 output of that length); outputs: " + shapes,
                  "use --rows only for models ending in NMS rows + a per-sample count (multiclass_nms3)");
    }
    const TensorView& c = views[counts_at];
    counted = 0;
    for (std::int64_t k = 0; k < chunk; ++k) {
      const std::int64_t n = c.dtype == DType::int32 ? static_cast<const std::int32_t*>(c.data)[k]
                                                     : static_cast<const std::int64_t*>(c.data)[k];
      if (n < 0) throw Error(ExitCode::run, "--rows: output '" + names[counts_at] + "' holds a negative count",
                             "report the model: its NMS output is malformed");
      counted += n;
    }
    for (std::size_t i = 0; i < views.size(); ++i) {
      const TensorView& v = views[i];
      Part& part = parts_[i];
      const bool counts = i == counts_at;
      const std::int64_t take = counts ? chunk : counted;
      if (!counts && take == 0) {                    // no rows: Lite may hand back a placeholder of any shape
        if (!part.seen) part.dtype = v.dtype;
        continue;
      }
      if (v.shape.empty() || v.shape[0] < take) {
        throw Error(ExitCode::run, "--rows: output '" + names[i] + "' has shape " + shape_text(v.shape) + " but '" +
                                       names[counts_at] + "' counts " + std::to_string(take) + " rows",
                    "report the model: its NMS output is malformed");
      }
      Shape row(v.shape.begin() + 1, v.shape.end());
      if (part.seen && (row != part.row || v.dtype != part.dtype)) {
        throw Error(ExitCode::run, "--rows: output '" + names[i] + "' changes from rows of " + shape_text(part.row) +
                                       " to " + shape_text(row) + " between chunks",
                    "report the model: its NMS output is malformed");
      }
      part.seen = true;
      part.row = row;
      part.dtype = v.dtype;
      part.counts = counts;
      const std::size_t per_row = v.bytes / static_cast<std::size_t>(std::max<std::int64_t>(1, v.shape[0]));
      const auto* bytes = static_cast<const std::uint8_t*>(v.data);
      part.bytes.insert(part.bytes.end(), bytes, bytes + per_row * static_cast<std::size_t>(take));
      part.rows += take;
    }
  }

  void commit(const std::vector<std::string>& names, RunReport& report) {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const Part& part = parts_[i];
      Shape whole = part.seen ? part.row : Shape{6};   // never any rows: [0, 6], as PaddleDetection's rows are
      whole.insert(whole.begin(), part.rows);
      const std::string path = join_path(dir_, "output_" + std::to_string(i) + ".npy");
      NpyStreamWriter writer(path + ".partial", part.dtype, whole);
      writer.append(part.bytes.data(), part.bytes.size());
      writer.close();
      report.outputs.push_back({names[i], whole, dtype_name(part.dtype), path, std::nullopt, std::nullopt, std::nullopt});
    }
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const std::string path = join_path(dir_, "output_" + std::to_string(i) + ".npy");
      rename_file(path + ".partial", path);
    }
    report.notes.push_back("--rows: outputs are NMS rows concatenated over the samples, split by the count output");
  }

 private:
  struct Part {
    std::vector<std::uint8_t> bytes;
    Shape row;
    DType dtype = DType::float32;
    std::int64_t rows = 0;
    bool seen = false;
    bool counts = false;
  };
  std::string dir_;
  std::vector<Part> parts_;
};

// One inference between the instruction-count markers (native/plugin/markers.h): NOPs on a
// device, region bounds for the counting plugin under qemu. Every engine.run() goes through
// here, so region i of the plugin's counts is the i-th run: the pass's chunks, then the
// warm-ups, then the timed iterations.
void measured_run(LiteEngine& engine) {
  EDGEKIT_ICOUNT_MARK(EDGEKIT_ICOUNT_BEGIN);
  engine.run();
  EDGEKIT_ICOUNT_MARK(EDGEKIT_ICOUNT_END);
}

// The pass in chunks of `batch` samples, each run timed; `collect(count)` takes the chunk's outputs.
template <typename Collect>
void run_chunks(LiteEngine& engine, const std::vector<Feed>& feeds, std::int64_t samples, int batch,
                RunReport& report, Collect collect) {
  for (std::int64_t start = 0; start < samples; start += batch) {
    const std::int64_t count = std::min<std::int64_t>(batch, samples - start);
    feed_chunk(engine, feeds, start, count);
    const auto t0 = Clock::now();
    measured_run(engine);
    const double took = ms_since(t0);
    if (report.pass_ms.empty()) report.first_run_ms = took;
    report.pass_ms.push_back(took);
    collect(count);
  }
}

void run_pass(LiteEngine& engine, const std::vector<Feed>& feeds, std::int64_t samples, int batch, bool rows,
              const std::string& out_dir, RunReport& report) {
  const auto& names = engine.output_names();
  if (rows) {
    RowFiles files(out_dir, names.size());
    run_chunks(engine, feeds, samples, batch, report, [&](std::int64_t count) {
      std::vector<TensorView> views;
      for (std::size_t i = 0; i < names.size(); ++i) views.push_back(engine.output(i));
      files.append(names, views, count);
    });
    files.commit(names, report);
    return;
  }
  OutputFiles files(out_dir, names.size());
  run_chunks(engine, feeds, samples, batch, report, [&](std::int64_t count) {
    for (std::size_t i = 0; i < names.size(); ++i) files.append(i, names[i], engine.output(i), count, samples, report);
  });
  files.commit();
}

// delay_ms > 0 only under the test hook (EDGEKIT_RUNNER_DELAY_MS): the sleep is
// inside the timed interval, so the figures show a slowdown a suite must catch.
void measure_latency(LiteEngine& engine, const std::vector<Feed>& feeds, std::int64_t samples, const Options& o,
                     int delay_ms, RunReport& report) {
  if (o.warmup + o.repeat == 0) return;
  feed_chunk(engine, feeds, 0, std::min<std::int64_t>(o.batch, samples));
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    const auto t0 = Clock::now();
    measured_run(engine);
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    (i < o.warmup ? report.warmup_ms : report.iteration_ms).push_back(ms_since(t0));
  }
}

void check_version(const std::string& model, const NbHeader& header, const std::string& runtime) {
  if (header.opt_version == runtime) return;
  throw Error(ExitCode::version,
              model + " was converted by opt " + header.opt_version + " but the runtime is Paddle-Lite " + runtime,
              "convert the model with opt " + runtime + " or run it with a " + header.opt_version + " runtime");
}

int run(const Options& o) {
  RunReport report;
  report.model_file = o.model;
  report.config = o.config;
  report.batch = o.batch;
  report.warmup = o.warmup;
  report.repeat = o.repeat;
  std::optional<RecordSink> sink;
  try {
    make_dirs(o.out_dir);
    const auto record_dir = std::filesystem::path(o.record).parent_path();
    if (!record_dir.empty()) make_dirs(record_dir.string());
    sink.emplace(o.record);
    report.cpu = detect_cpu(EDGEKIT_LITE_DOTPROD != 0);
    const int delay_ms = parse_delay_ms(std::getenv(kDelayVariable));
    if (delay_ms > 0) {
      report.notes.push_back(std::string("test hook ") + kDelayVariable + "=" + std::to_string(delay_ms) + ": every warm-up and " +
                             "timed run includes a " + std::to_string(delay_ms) + " ms sleep (latency inflated on purpose)");
    }
    // The header first: a foreign or truncated file is refused before Lite sees it.
    report.phase = "header";
    sink->provisional(report);
    report.header = read_nb_header(o.model);
    report.phase = "probe";
    try {
      // Stamped with the model's version, the probe is silent when they match and
      // lets Lite's one-per-process CPU detection log through as a normal load would.
      report.runtime_version = LiteEngine::runtime_version(report.header->opt_version, false);
    } catch (const Error& e) {
      report.notes.push_back(std::string("runtime version probe failed (") + e.what() +
                             "); the version was read from the loaded model");
    }
    if (!report.runtime_version.empty()) check_version(o.model, *report.header, report.runtime_version);

    report.phase = "inputs";
    std::vector<Feed> feeds = load_feeds(o);

    report.phase = "load";
    sink->provisional(report);
    const auto t0 = Clock::now();
    LiteEngine engine(o.model, o.config);
    report.load_ms = ms_since(t0);
    if (report.runtime_version.empty()) {
      report.runtime_version = engine.version();
      check_version(o.model, *report.header, report.runtime_version);
    }

    report.phase = "check";
    const std::int64_t samples = check_feeds(feeds, engine, o, report);
    report.samples = samples;

    report.phase = "pass";
    sink->provisional(report);
    run_pass(engine, feeds, samples, o.batch, o.rows, o.out_dir, report);

    report.phase = "latency";
    sink->provisional(report);
    measure_latency(engine, feeds, samples, o, delay_ms, report);
    report.phase = "done";
    report.status = "ok";
  } catch (const Error& e) {
    report.fail(e);
  } catch (const std::bad_alloc&) {
    report.fail(Error(ExitCode::internal, "out of memory", "use a smaller --batch or fewer samples per run"));
  } catch (const std::exception& e) {
    report.fail(Error(ExitCode::internal, std::string("unexpected failure: ") + e.what(), "report this with the record"));
  }
  report.peak_rss_kb = platform::peak_rss_kb();
  report.code_maps = platform::code_mappings();   // after the counted runs: reading it costs them nothing
  report.resolved = platform::resolved_memory_functions();
  if (sink) {
    try {
      sink->final(report);
    } catch (const Error& e) {
      if (report.status == "ok") report.fail(e);
    }
  }
  if (report.status != "ok") {
    Error e(report.exit_code, report.error, report.fix);
    std::fprintf(stderr, "edgekit-lite-run: error: %s\n", e.line().c_str());
    return static_cast<int>(report.exit_code);
  }
  return 0;
}

}  // namespace
}  // namespace runner
}  // namespace edgekit

int main(int argc, char** argv) {
  using namespace edgekit;
  using runner::Options;
  try {
    const Options o = runner::parse_options(std::vector<std::string>(argv + 1, argv + argc));
    switch (o.mode) {
      case Options::Mode::help:
        std::fputs(runner::usage_text().c_str(), stdout);
        return 0;
      case Options::Mode::version:
        std::printf("%s\n", LiteEngine::runtime_version().c_str());
        return 0;
      case Options::Mode::cpu_info:
        std::printf("%s\n", detect_cpu(EDGEKIT_LITE_DOTPROD != 0).to_json().dump(2).c_str());
        return 0;
      case Options::Mode::run:
        return runner::run(o);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "edgekit-lite-run: error: %s\n", e.line().c_str());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "edgekit-lite-run: error: unexpected failure: %s; report this\n", e.what());
    return static_cast<int>(ExitCode::internal);
  }
  return 0;
}
