#include "harness.h"
#include "options.h"
#include "record.h"

using namespace edgekit;
using namespace edgekit::runner;

EK_TEST(options, full_command_line) {
  const Options o = parse_options({"--model", "m.nb", "--input", "image=a.npy", "--input=mask=b.npy", "--out", "o",
                                   "--expect", "image:-1x1x32x32:float32", "--threads=2", "--power-mode", "high",
                                   "--batch", "4", "--warmup", "0", "--repeat", "3"});
  EK_CHECK(o.mode == Options::Mode::run);
  EK_CHECK_EQ(o.model, std::string("m.nb"));
  EK_CHECK_EQ(o.inputs.size(), 2u);
  EK_CHECK_EQ(o.inputs[1].name, std::string("mask"));
  EK_CHECK_EQ(o.inputs[1].path, std::string("b.npy"));
  EK_CHECK_EQ(o.expects.at(0).shape, (Shape{-1, 1, 32, 32}));
  EK_CHECK_EQ(o.config.threads, 2);
  EK_CHECK(o.config.power_mode == PowerMode::high);
  EK_CHECK_EQ(o.batch, 4);
  EK_CHECK_EQ(o.warmup, 0);
  EK_CHECK_EQ(o.repeat, 3);
  EK_CHECK(o.record.find("record.json") != std::string::npos);
}

EK_TEST(options, defaults_and_modes) {
  const Options o = parse_options({"--model", "m.nb", "--inputs", "x.npz", "--out", "o"});
  EK_CHECK_EQ(o.batch, 1);
  EK_CHECK_EQ(o.warmup, 1);
  EK_CHECK_EQ(o.repeat, 10);
  EK_CHECK(o.config.power_mode == PowerMode::no_bind);
  EK_CHECK(parse_options({"--version"}).mode == Options::Mode::version);
  EK_CHECK(parse_options({"--cpu-info"}).mode == Options::Mode::cpu_info);
  EK_CHECK(parse_options({"--model", "x", "--help"}).mode == Options::Mode::help);
  EK_CHECK_EQ(parse_options({"--model", "m", "--input", "a.npy", "--out", "o"}).inputs[0].name, std::string());
  EK_CHECK_EQ(parse_options({"--model", "m", "--input", "a.npy", "--out", "o", "--record", "r.json"}).record,
              std::string("r.json"));
}

EK_TEST(options, usage_errors) {
  EK_CHECK_ERROR(parse_options({"--input", "a.npy", "--out", "o"}), usage, "no model");
  EK_CHECK_ERROR(parse_options({"--model", "m", "--out", "o"}), usage, "no inputs");
  EK_CHECK_ERROR(parse_options({"--model", "m", "--input", "a.npy"}), usage, "no output folder");
  EK_CHECK_ERROR(parse_options({"--model", "m", "--input", "a.npy", "--inputs", "b.npz", "--out", "o"}), usage,
                 "together");
  EK_CHECK_ERROR(parse_options({"--model"}), usage, "--model needs a value");
  EK_CHECK_ERROR(parse_options({"--batch", "0"}), usage, "--batch needs an integer >= 1");
  EK_CHECK_ERROR(parse_options({"--threads", "two"}), usage, "got 'two'");
  EK_CHECK_ERROR(parse_options({"--power-mode", "turbo"}), usage, "no_bind|high|low|full|rand_high|rand_low");
  EK_CHECK_ERROR(parse_options({"--frobnicate"}), usage, "unknown argument '--frobnicate'");
  EK_CHECK_ERROR(parse_options({"--input", "image="}), usage, "has no file");
}

EK_TEST(options, expect_specs) {
  const Expect a = parse_expect("image:-1x3x224x224:float32");
  EK_CHECK_EQ(a.name, std::string("image"));
  EK_CHECK_EQ(a.shape, (Shape{-1, 3, 224, 224}));
  EK_CHECK(a.dtype == DType::float32);
  const Expect b = parse_expect("ids:1,16:int64");
  EK_CHECK_EQ(b.shape, (Shape{1, 16}));
  EK_CHECK(b.dtype == DType::int64);
  EK_CHECK(parse_expect("x:4").dtype == DType::float32);
  EK_CHECK_EQ(parse_expect("scope:name:2x2:int32").name, std::string("scope:name"));
  EK_CHECK_ERROR(parse_expect("image"), usage, "not NAME:SHAPE");
  EK_CHECK_ERROR(parse_expect("image:1x0x3"), usage, "dimension '0'");
  EK_CHECK_ERROR(parse_expect("image:1x-2"), usage, "dimension '-2'");
  EK_CHECK_ERROR(parse_expect("image:1x3:complex64"), usage, "unknown dtype 'complex64'");
  EK_CHECK_ERROR(parse_expect(":1x3"), usage, "no input name");
}

EK_TEST(record, schema_and_fields) {
  RunReport r;
  r.runtime_version = "v2.13-rc";
  r.model_file = "m.nb";
  NbHeader h;
  h.format_version = 2;
  h.opt_version = "v2.13-rc";
  h.program_bytes = 10;
  h.params_bytes = 5;
  h.file_bytes = 41;
  r.header = h;
  r.samples = 8;
  r.batch = 4;
  r.load_ms = 12.3456789;
  r.first_run_ms = 3.0;
  r.pass_ms = {3.0, 2.5};
  r.iteration_ms = {2.0, 4.0, 3.0};
  r.inputs.push_back({"image", {8, 1, 32, 32}, "float32", "a.npy", Shape{-1, 1, 32, 32}, std::string("float32"), Shape{}});
  r.outputs.push_back({"out", {8, 10}, "float32", "o/output_0.npy", std::nullopt, std::nullopt, std::nullopt});
  r.status = "ok";
  const Json j = Json::parse(r.to_json().dump(2));
  EK_CHECK_EQ(j.at("schema").as_string(), std::string("edgekit.runner/1"));
  EK_CHECK_EQ(j.at("status").as_string(), std::string("ok"));
  EK_CHECK_EQ(j.at("exit_code").as_int(), 0);
  EK_CHECK(j.at("error").is_null());
  EK_CHECK_EQ(j.at("opt_version").as_string(), std::string("v2.13-rc"));
  EK_CHECK_EQ(j.at("load_ms").as_number(), 12.346);
  EK_CHECK_EQ(j.at("pass_ms").size(), 2u);
  EK_CHECK_EQ(j.at("latency_ms").at("median").as_number(), 3.0);
  EK_CHECK_EQ(j.at("inputs").at(0).at("expected_shape").at(0).as_int(), -1);
  EK_CHECK(j.at("outputs").at(0).find("expected_shape") == nullptr);
  EK_CHECK_EQ(j.at("inputs").at(0).at("reported_shape").size(), 0u);
  EK_CHECK_EQ(j.at("power_mode").as_string(), std::string("no_bind"));
  EK_CHECK(j.at("runner").at("abi").is_string());
}

EK_TEST(record, failure_carries_code_and_fix) {
  RunReport r;
  r.fail(Error(ExitCode::version, "m.nb was converted by opt v2.12", "convert it again"));
  const Json j = r.to_json();
  EK_CHECK_EQ(j.at("status").as_string(), std::string("error"));
  EK_CHECK_EQ(j.at("exit_code").as_int(), 4);
  EK_CHECK_EQ(j.at("error").as_string(), std::string("m.nb was converted by opt v2.12"));
  EK_CHECK_EQ(j.at("fix").as_string(), std::string("convert it again"));
  EK_CHECK(j.at("model").at("file").is_string());
  EK_CHECK(j.at("latency_ms").is_null());
}
