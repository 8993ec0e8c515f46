#include <filesystem>
#include <fstream>
#include <string>

#include "edgekit/assets.h"
#include "edgekit/file_io.h"
#include "edgekit/nbfile.h"
#include "edgekit/sha256.h"
#include "asset_fixture.h"
#include "harness.h"
#include "temp_dir.h"

using namespace edgekit;
using namespace edgekit::test::fixture;
namespace fs = std::filesystem;

namespace {

// Runs the loader, which must refuse with `reason` and a message holding `part`.
void expect_refusal(const std::string& path, const std::optional<std::string>& runtime, Refusal reason,
                    const std::string& part) {
  try {
    open_assets(path, runtime);
  } catch (const AssetError& e) {
    EK_CHECK_EQ(std::string(refusal_name(e.reason())), std::string(refusal_name(reason)));
    if (e.line().find(part) == std::string::npos) test::fail(__FILE__, __LINE__, "message lacks '" + part + "': " + e.line());
    EK_CHECK(e.line().find(std::string("refused (") + refusal_name(reason) + ")") == 0);
    return;
  }
  test::fail(__FILE__, __LINE__, std::string("expected a refusal: ") + refusal_name(reason));
}

void append_byte(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << 'x';
}

}  // namespace

EK_TEST(assets, a_packaged_set_loads) {
  test::TempDir dir;
  write_asset_set(dir);
  const AssetSet set = open_assets(dir.file(""), kVersion);
  EK_CHECK(set.kind == AssetKind::asset_set);
  EK_CHECK_EQ(set.models.size(), std::size_t{1});
  EK_CHECK_EQ(set.files, std::int64_t{5});
  const ModelAssets& m = set.model("digits");
  EK_CHECK_EQ(m.task, std::string("classification"));
  EK_CHECK_EQ(fs::path(m.nb_file).filename().string(), std::string("model.nb"));
  EK_CHECK(!m.labels_file.empty() && !m.golden_file.empty());
  EK_CHECK_EQ(*set.runtime_version, kVersion);
  EK_CHECK_ERROR(set.model("nope"), usage, "use one of: digits");
  // the index file itself also opens it; no runtime skips only the runtime check
  EK_CHECK_EQ(open_assets(dir.file("assets.json"), std::nullopt).models.size(), std::size_t{1});
}

EK_TEST(assets, a_changed_byte_is_a_checksum_mismatch) {
  test::TempDir dir;
  write_asset_set(dir);
  std::string nb = read_file_text(dir.file("digits/model.nb"), ExitCode::input);
  nb[nb.size() - 1] = static_cast<char>(nb.back() ^ 1);
  write_file_atomic(dir.file("digits/model.nb"), nb);
  expect_refusal(dir.file(""), kVersion, Refusal::checksum_mismatch, "digits/model.nb has sha256");
  append_byte(dir.file("digits/labels.txt"));
  expect_refusal(dir.file(""), kVersion, Refusal::checksum_mismatch, "digits/labels.txt has 10 bytes");
}

EK_TEST(assets, a_missing_file_is_named) {
  test::TempDir dir;
  write_asset_set(dir);
  fs::remove(dir.file("digits/task.json"));
  expect_refusal(dir.file(""), kVersion, Refusal::missing_file, "digits/task.json is listed in assets.json but absent");
  test::TempDir empty;
  expect_refusal(empty.file(""), kVersion, Refusal::missing_file, "neither assets.json nor manifest.json");
}

EK_TEST(assets, versions_must_match_the_runtime_and_the_index) {
  test::TempDir dir;
  write_asset_set(dir);
  expect_refusal(dir.file(""), std::string("v2.12"), Refusal::version_mismatch,
                 "converted by opt v2.13-rc but the app links Paddle-Lite v2.12");
  // a .nb of another version whose checksum was made consistent: the header decides
  test::TempDir other;
  Json doc = write_asset_set(other, "v2.12");
  expect_refusal(other.file(""), kVersion, Refusal::version_mismatch, "converted by opt v2.12");
  expect_refusal(other.file(""), std::nullopt, Refusal::version_mismatch, "header says opt v2.12, the index says v2.13-rc");
  try {
    open_assets(other.file(""), kVersion);
  } catch (const Error& e) {
    EK_CHECK(e.code() == ExitCode::version);
  }
}

EK_TEST(assets, schema_problems_are_refused) {
  test::TempDir dir;
  Json doc = write_asset_set(dir);
  doc.set("schema", "edgekit.assets/2");
  write_json(dir.file("assets.json"), doc);
  expect_refusal(dir.file(""), kVersion, Refusal::schema, "expected edgekit.assets/1");

  doc = write_asset_set(dir);
  Json files = doc.at("files");
  files.set("../outside.txt", entry_of("x"));
  doc.set("files", files);
  write_json(dir.file("assets.json"), doc);
  expect_refusal(dir.file(""), kVersion, Refusal::schema, "a path outside the folder");

  // a file the app would read must be verifiable
  doc = write_asset_set(dir);
  Json trimmed = Json::object();
  for (const auto& [rel, meta] : doc.at("files").members()) {
    if (rel != "digits/labels.txt") trimmed.set(rel, meta);
  }
  doc.set("files", trimmed);
  write_json(dir.file("assets.json"), doc);
  expect_refusal(dir.file(""), kVersion, Refusal::schema, "digits/labels.txt is present but not in the file table");

  write_file_atomic(dir.file("assets.json"), "{\"schema\": ");
  expect_refusal(dir.file(""), kVersion, Refusal::schema, "not readable JSON");
}

EK_TEST(assets, a_bundle_folder_loads_and_refuses_extras) {
  test::TempDir dir;
  const std::string nb = empty_nb_model(kVersion), task = "{\"kind\": \"ocr_cls\", \"options\": {}}\n";
  write_file_atomic(dir.file("model.nb"), nb);
  write_file_atomic(dir.file("task.json"), task);
  Json files = Json::object();
  files.set("model.nb", entry_of(nb));
  files.set("task.json", entry_of(task));
  Json model = Json::object();
  for (const char* key : {"name", "target", "precision", "opt_version", "file"}) model.set(key, "x");
  model.set("name", "cls");
  model.set("opt_version", kVersion);
  model.set("file", "model.nb");
  Json task_meta = Json::object();
  task_meta.set("kind", "ocr_cls");
  Json manifest = Json::object();
  manifest.set("schema", "edgekit.bundle/1");
  manifest.set("model", model);
  for (const char* key : {"host_twin", "golden", "parity", "config"}) manifest.set(key, Json::object());
  manifest.set("task", task_meta);
  manifest.set("files", files);
  write_json(dir.file("manifest.json"), manifest);
  const AssetSet set = open_assets(dir.file(""), kVersion);
  EK_CHECK(set.kind == AssetKind::bundle);
  EK_CHECK_EQ(set.model("cls").task, std::string("ocr_cls"));
  EK_CHECK(set.model("cls").preprocess_file.empty());
  write_file_atomic(dir.file("notes.txt"), "hello");
  expect_refusal(dir.file(""), kVersion, Refusal::schema, "notes.txt is not in manifest.json's file table");
}
