#include "edgekit/lite_engine.h"

#include <paddle_api.h>

#include <cstdint>
#include <cstring>
#include <iterator>

#include "edgekit/error.h"
#include "edgekit/nbfile.h"
#include "edgekit/platform.h"

namespace edgekit {
namespace lite_api = paddle::lite_api;

namespace {

struct PrecisionMap {
  DType dtype;
  lite_api::PrecisionType precision;
};

// numpy dtype <-> Lite precision. uint16 has no entry: Lite stores FP16 in it.
const PrecisionMap kPrecisions[] = {
    {DType::float32, lite_api::PrecisionType::kFloat}, {DType::float64, lite_api::PrecisionType::kFP64},
    {DType::int8, lite_api::PrecisionType::kInt8},     {DType::int16, lite_api::PrecisionType::kInt16},
    {DType::int32, lite_api::PrecisionType::kInt32},   {DType::int64, lite_api::PrecisionType::kInt64},
    {DType::uint8, lite_api::PrecisionType::kUInt8},   {DType::boolean, lite_api::PrecisionType::kBool},
};

std::optional<DType> dtype_of(lite_api::PrecisionType precision) {
  for (const auto& m : kPrecisions) {
    if (m.precision == precision) return m.dtype;
  }
  return std::nullopt;
}

lite_api::PowerMode lite_power_mode(PowerMode mode) {
  switch (mode) {
    case PowerMode::no_bind: return lite_api::LITE_POWER_NO_BIND;
    case PowerMode::high: return lite_api::LITE_POWER_HIGH;
    case PowerMode::low: return lite_api::LITE_POWER_LOW;
    case PowerMode::full: return lite_api::LITE_POWER_FULL;
    case PowerMode::rand_high: return lite_api::LITE_POWER_RAND_HIGH;
    case PowerMode::rand_low: return lite_api::LITE_POWER_RAND_LOW;
  }
  return lite_api::LITE_POWER_NO_BIND;
}

// Lite's exception text is its CHECK line, sometimes with a backtrace after it.
std::string first_line(const char* what) {
  std::string text = what ? what : "";
  const auto nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "no reason given" : text;
}

void* mutable_data(lite_api::Tensor& t, DType dtype) {
  switch (dtype) {
    case DType::float32: return t.mutable_data<float>();
    case DType::float64: return t.mutable_data<double>();
    case DType::int8: return t.mutable_data<std::int8_t>();
    case DType::int16: return t.mutable_data<std::int16_t>();
    case DType::int32: return t.mutable_data<std::int32_t>();
    case DType::int64: return t.mutable_data<std::int64_t>();
    case DType::uint8: return t.mutable_data<std::uint8_t>();
    case DType::boolean: return t.mutable_data<bool>();
    case DType::uint16: break;
  }
  return nullptr;
}

const void* data_of(const lite_api::Tensor& t, DType dtype) {
  switch (dtype) {
    case DType::float32: return t.data<float>();
    case DType::float64: return t.data<double>();
    case DType::int8: return t.data<std::int8_t>();
    case DType::int16: return t.data<std::int16_t>();
    case DType::int32: return t.data<std::int32_t>();
    case DType::int64: return t.data<std::int64_t>();
    case DType::uint8: return t.data<std::uint8_t>();
    case DType::boolean: return t.data<bool>();
    case DType::uint16: break;
  }
  return nullptr;
}

}  // namespace

struct LiteEngine::Impl {
  std::shared_ptr<lite_api::PaddlePredictor> predictor;
  std::vector<std::string> inputs, outputs;
  std::vector<std::optional<DType>> declared;
  std::vector<Shape> reported;
};

std::string LiteEngine::runtime_version(const std::string& stamp, bool quiet) {
  const std::string probe = empty_nb_model(stamp);
  try {
    std::optional<platform::StderrSilencer> silence;
    if (quiet) silence.emplace();
    lite_api::MobileConfig config;
    config.set_model_from_buffer(probe);
    auto predictor = lite_api::CreatePaddlePredictor<lite_api::MobileConfig>(config);
    return predictor->GetVersion();
  } catch (const std::exception& e) {
    throw Error(ExitCode::model, "the Paddle-Lite runtime cannot load even an empty model (" + first_line(e.what()) + ")",
                "check that libpaddle_light_api_shared.so is a light-API build (tiny publish) with exceptions on");
  }
}

LiteEngine::LiteEngine(const std::string& nb_path, const RunConfig& config) : impl_(new Impl) {
  try {
    lite_api::MobileConfig mobile;
    mobile.set_model_from_file(nb_path);
    mobile.set_threads(config.threads);
    mobile.set_power_mode(lite_power_mode(config.power_mode));
    impl_->predictor = lite_api::CreatePaddlePredictor<lite_api::MobileConfig>(mobile);
    impl_->inputs = impl_->predictor->GetInputNames();
    impl_->outputs = impl_->predictor->GetOutputNames();
    for (std::size_t i = 0; i < impl_->inputs.size(); ++i) {
      auto tensor = impl_->predictor->GetInput(static_cast<int>(i));
      impl_->declared.push_back(dtype_of(tensor->precision()));
      impl_->reported.push_back(tensor->shape());
    }
  } catch (const std::exception& e) {
    throw Error(ExitCode::model, "Paddle-Lite cannot load " + nb_path + ": " + first_line(e.what()),
                "rebuild the .nb with the opt of the runtime's version, for this target");
  }
}

LiteEngine::~LiteEngine() = default;

std::string LiteEngine::version() const { return impl_->predictor->GetVersion(); }
const std::vector<std::string>& LiteEngine::input_names() const { return impl_->inputs; }
const std::vector<std::string>& LiteEngine::output_names() const { return impl_->outputs; }
std::optional<DType> LiteEngine::declared_input_dtype(std::size_t i) const { return impl_->declared.at(i); }
Shape LiteEngine::reported_input_shape(std::size_t i) const { return impl_->reported.at(i); }

void LiteEngine::set_input(std::size_t i, DType dtype, const Shape& shape, const void* data) {
  auto tensor = impl_->predictor->GetInput(static_cast<int>(i));
  tensor->Resize(lite_api::shape_t(shape.begin(), shape.end()));
  void* dst = mutable_data(*tensor, dtype);
  if (!dst) {
    throw Error(ExitCode::input, std::string("input '") + impl_->inputs.at(i) + "' has dtype " + dtype_name(dtype) +
                                     ", which Paddle-Lite cannot take",
                "convert it to the dtype the model declares");
  }
  std::memcpy(dst, data, static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype));
}

void LiteEngine::run() {
  try {
    impl_->predictor->Run();
  } catch (const std::exception& e) {
    throw Error(ExitCode::run, "Paddle-Lite failed while running: " + first_line(e.what()),
                "check the input shapes against the model (rerun with GLOG_v=3 for Lite's op log)");
  }
}

TensorView LiteEngine::output(std::size_t i) const {
  auto tensor = impl_->predictor->GetOutput(static_cast<int>(i));
  const auto dtype = dtype_of(tensor->precision());
  if (!dtype) {
    throw Error(ExitCode::run,
                "output '" + impl_->outputs.at(i) + "' has Lite precision " +
                    std::to_string(static_cast<int>(tensor->precision())) + ", which has no .npy counterpart",
                "report the model; the runner writes float, int and bool outputs");
  }
  TensorView view;
  view.dtype = *dtype;
  const auto shape = tensor->shape();
  view.shape.assign(shape.begin(), shape.end());
  view.data = data_of(*tensor, *dtype);
  view.bytes = static_cast<std::size_t>(element_count(view.shape)) * dtype_size(*dtype);
  return view;
}

}  // namespace edgekit
