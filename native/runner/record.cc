#include "record.h"

#include <cmath>

#include "edgekit/platform.h"
#include "edgekit/stats.h"

#ifndef EDGEKIT_VERSION
#define EDGEKIT_VERSION "0.0.0"
#endif

namespace edgekit {
namespace runner {
namespace {

// Timings are kept to the microsecond: finer digits are clock noise.
double ms(double value) { return std::round(value * 1000.0) / 1000.0; }

Json ms_list(const std::vector<double>& values) {
  Json out = Json::array();
  for (double v : values) out.push(ms(v));
  return out;
}

Json optional_ms(const std::optional<double>& value) { return value ? Json(ms(*value)) : Json(); }

Json tensor_json(const TensorRecord& t) {
  Json out = Json::object();
  out.set("name", t.name);
  out.set("shape", Json::array_of(t.shape));
  out.set("dtype", t.dtype);
  out.set("file", t.file);
  if (t.expected) out.set("expected_shape", Json::array_of(*t.expected));
  if (t.declared_dtype) out.set("declared_dtype", *t.declared_dtype);
  if (t.reported_shape) out.set("reported_shape", Json::array_of(*t.reported_shape));
  return out;
}

}  // namespace

void RunReport::fail(const Error& e) {
  status = "error";
  exit_code = e.code();
  error = e.what();
  fix = e.fix();
}

Json runner_identity() {
  Json out = Json::object();
  out.set("version", EDGEKIT_VERSION);
  out.set("abi", platform::compiled_abi());
#if defined(__clang__)
  out.set("compiler", std::string("clang ") + __clang_version__);
#elif defined(__GNUC__)
  out.set("compiler", std::string("gcc ") + __VERSION__);
#else
  out.set("compiler", "unknown");
#endif
  return out;
}

Json RunReport::to_json() const {
  Json r = Json::object();
  r.set("schema", kRecordSchema);
  r.set("status", status);
  r.set("exit_code", static_cast<int>(exit_code));
  r.set("error", error.empty() ? Json() : Json(error));
  r.set("fix", fix.empty() ? Json() : Json(fix));
  r.set("phase", phase);
  r.set("runner", runner_identity());
  r.set("runtime_version", runtime_version.empty() ? Json() : Json(runtime_version));
  if (header) {
    Json m = Json::object();
    m.set("file", model_file);
    m.set("bytes", header->file_bytes);
    m.set("format_version", header->format_version);
    m.set("opt_version", header->opt_version);
    m.set("program_bytes", header->program_bytes);
    m.set("params_bytes", header->params_bytes);
    m.set("param_count", header->param_count >= 0 ? Json(header->param_count) : Json());
    r.set("model", m);
    r.set("opt_version", header->opt_version);
  } else {
    Json m = Json::object();
    m.set("file", model_file);
    r.set("model", m);
    r.set("opt_version", Json());
  }
  r.set("threads", config.threads);
  r.set("power_mode", power_mode_name(config.power_mode));
  r.set("batch", batch);
  r.set("warmup", warmup);
  r.set("repeat", repeat);
  r.set("samples", samples ? Json(*samples) : Json());
  Json ins = Json::array();
  for (const auto& t : inputs) ins.push(tensor_json(t));
  r.set("inputs", ins);
  Json outs = Json::array();
  for (const auto& t : outputs) outs.push(tensor_json(t));
  r.set("outputs", outs);
  r.set("load_ms", optional_ms(load_ms));
  r.set("first_run_ms", optional_ms(first_run_ms));
  r.set("pass_ms", ms_list(pass_ms));
  r.set("warmup_ms", ms_list(warmup_ms));
  r.set("iteration_ms", ms_list(iteration_ms));
  r.set("latency_ms", summarize(iteration_ms).to_json());
  r.set("peak_rss_kb", peak_rss_kb);
  r.set("cpu", cpu ? cpu->to_json() : Json());
  r.set("notes", Json::array_of(notes));
  Json maps = Json::array();
  for (const auto& m : code_maps) {
    Json entry = Json::object();
    entry.set("start", m.start);
    entry.set("end", m.end);
    entry.set("offset", m.offset);
    entry.set("path", m.path);
    maps.push(entry);
  }
  r.set("code_maps", maps);
  Json resolved_json = Json::object();
  for (const auto& [name, address] : resolved) resolved_json.set(name, address);
  r.set("resolved", resolved_json);
  return r;
}

}  // namespace runner
}  // namespace edgekit
