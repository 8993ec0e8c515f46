#include "options.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "edgekit/error.h"
#include "edgekit/file_io.h"

namespace edgekit {
namespace runner {
namespace {

Error usage(const std::string& what, const std::string& fix = "see edgekit-lite-run --help") {
  return Error(ExitCode::usage, what, fix);
}

int parse_count(const std::string& flag, const std::string& text, int min) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min || value > std::numeric_limits<int>::max()) {
    throw usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

Shape parse_shape(const std::string& text, const std::string& whole) {
  Shape shape;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find_first_of("x,", start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* stop = nullptr;
    const long long dim = std::strtoll(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || dim == 0 || dim < -1) {
      throw usage("--expect " + whole + ": dimension '" + part + "' is not a positive integer or -1",
                  "write it like image:-1x3x224x224:float32");
    }
    shape.push_back(dim);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return shape;
}

}  // namespace

int parse_delay_ms(const char* text) {
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < 0 || value > 60000) {
    throw usage(std::string(kDelayVariable) + "='" + text + "' is not a whole number of milliseconds in 0..60000",
                std::string("unset ") + kDelayVariable + " (it is a test hook) or give e.g. 20");
  }
  return static_cast<int>(value);
}

Expect parse_expect(const std::string& text) {
  // Split from the right: feed names may hold ':' (rare), shapes and dtypes never do.
  Expect expect;
  std::string rest = text;
  auto colon = rest.rfind(':');
  if (colon == std::string::npos) throw usage("--expect " + text + " is not NAME:SHAPE[:DTYPE]", "write it like image:-1x3x224x224:float32");
  if (auto dtype = dtype_from_name(rest.substr(colon + 1))) {
    expect.dtype = *dtype;
    rest.resize(colon);
    colon = rest.rfind(':');
    if (colon == std::string::npos) throw usage("--expect " + text + " is not NAME:SHAPE[:DTYPE]", "write it like image:-1x3x224x224:float32");
  } else if (rest.substr(colon + 1).find_first_not_of("-0123456789x,") != std::string::npos) {
    throw usage("--expect " + text + ": unknown dtype '" + rest.substr(colon + 1) + "'", "use one of " + dtype_names());
  }
  expect.name = rest.substr(0, colon);
  if (expect.name.empty()) throw usage("--expect " + text + " has no input name", "write it like image:-1x3x224x224:float32");
  expect.shape = parse_shape(rest.substr(colon + 1), text);
  return expect;
}

Options parse_options(const std::vector<std::string>& args) {
  Options o;
  bool record_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool inline_value = false;
    if (flag.rfind("--", 0) == 0) {
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag.resize(eq);
        inline_value = true;
      }
    }
    const auto take = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= args.size()) throw usage(flag + " needs a value");
      return args[++i];
    };
    if (flag == "-h" || flag == "--help") {
      o.mode = Options::Mode::help;
      return o;
    } else if (flag == "--version") {
      o.mode = Options::Mode::version;
    } else if (flag == "--cpu-info") {
      o.mode = Options::Mode::cpu_info;
    } else if (flag == "--model") {
      o.model = take();
    } else if (flag == "--input") {
      const std::string spec = take();
      const auto eq = spec.find('=');
      FeedFile feed;
      if (eq == std::string::npos) {
        feed.path = spec;
      } else {
        feed.name = spec.substr(0, eq);
        feed.path = spec.substr(eq + 1);
      }
      if (feed.path.empty()) throw usage("--input " + spec + " has no file", "write NAME=FILE.npy");
      o.inputs.push_back(feed);
    } else if (flag == "--inputs") {
      o.inputs_npz = take();
    } else if (flag == "--out") {
      o.out_dir = take();
    } else if (flag == "--record") {
      o.record = take();
      record_given = true;
    } else if (flag == "--expect") {
      o.expects.push_back(parse_expect(take()));
    } else if (flag == "--threads") {
      o.config.threads = parse_count(flag, take(), 1);
    } else if (flag == "--power-mode") {
      const std::string name = take();
      auto mode = power_mode_from_name(name);
      if (!mode) throw usage("--power-mode " + name + " is not a Lite power mode", "use one of " + power_mode_names());
      o.config.power_mode = *mode;
    } else if (flag == "--batch") {
      o.batch = parse_count(flag, take(), 1);
    } else if (flag == "--rows") {
      o.rows = true;
    } else if (flag == "--warmup") {
      o.warmup = parse_count(flag, take(), 0);
    } else if (flag == "--repeat") {
      o.repeat = parse_count(flag, take(), 0);
    } else {
      throw usage("unknown argument '" + args[i] + "'");
    }
  }
  if (o.mode != Options::Mode::run) return o;
  if (o.model.empty()) throw usage("no model given", "pass --model MODEL.nb");
  if (o.inputs.empty() && o.inputs_npz.empty()) throw usage("no inputs given", "pass --input NAME=FILE.npy or --inputs FILE.npz");
  if (!o.inputs.empty() && !o.inputs_npz.empty()) throw usage("--input and --inputs given together", "use one of them");
  if (o.out_dir.empty()) throw usage("no output folder given", "pass --out DIR");
  if (!record_given) o.record = join_path(o.out_dir, "record.json");
  return o;
}

std::string usage_text() {
  return "usage: edgekit-lite-run --model MODEL.nb (--input NAME=FILE.npy ... | --inputs FILE.npz) --out DIR\n"
         "                        [--record FILE] [--expect NAME:SHAPE[:DTYPE] ...] [--batch B] [--rows]\n"
         "                        [--threads N] [--power-mode " + power_mode_names() + "]\n"
         "                        [--warmup W] [--repeat R]\n"
         "       edgekit-lite-run --version | --cpu-info | --help\n"
         "\n"
         "Loads MODEL.nb once with Paddle-Lite's light API and runs every sample of the inputs\n"
         "(the leading dimension of each array) in chunks of B, writing DIR/output_<i>.npy\n"
         "(concatenated over samples, in the model's output order) and a JSON record\n"
         "(default DIR/record.json, schema edgekit.runner/1). Then W untimed-in-stats warm-up\n"
         "runs and R timed runs on the first chunk (defaults: B=1, W=1, R=10, N=1, no_bind).\n"
         "\n"
         "  --expect NAME:SHAPE[:DTYPE]  the shape (-1 = any) and dtype the model declares for\n"
         "                               an input; Lite does not report declared shapes, so\n"
         "                               without it shapes are not checked (the record says so)\n"
         "  --rows                       the outputs are NMS rows and a per-sample count\n"
         "                               (PaddleDetection's multiclass_nms3: rows [K, 6] of all\n"
         "                               samples of a chunk, count [B] int32): a 1-D integer\n"
         "                               output of one value per sample gives the split, the\n"
         "                               first sum(counts) rows of every other output are kept\n"
         "                               and concatenated over chunks (without it, every\n"
         "                               output's first dimension must count the samples)\n"
         "  --version                    print the Paddle-Lite runtime version\n"
         "  --cpu-info                   print the CPU as Lite will see it (JSON)\n"
         "\n"
         "environment: EDGEKIT_RUNNER_DELAY_MS=N (test hook) sleeps N ms inside every warm-up\n"
         "and timed run; the record's notes say so\n"
         "\n"
         "exit codes: 0 ok, 1 internal error, 2 usage, 3 unreadable/foreign model or Lite load\n"
         "failure, 4 model opt version differs from the runtime, 5 bad inputs, 6 run failure,\n"
         "7 cannot write outputs or the record\n";
}

}  // namespace runner
}  // namespace edgekit
