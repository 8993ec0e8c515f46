// A one-model asset set laid out as `edgekit package` writes it, for the loader's tests
// (test_assets.cc, test_signature.cc).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/nbfile.h"
#include "edgekit/sha256.h"
#include "temp_dir.h"

namespace edgekit {
namespace test {
namespace fixture {

inline const std::string kVersion = "v2.13-rc";

inline Json entry_of(const std::string& content) {
  Json e = Json::object();
  e.set("sha256", sha256_hex(content.data(), content.size()));
  e.set("bytes", content.size());
  return e;
}

inline void write_json(const std::string& path, const Json& doc) { write_file_atomic(path, doc.dump(1) + "\n"); }

// A one-model asset set laid out as `edgekit package` writes it; returns assets.json.
inline Json write_asset_set(const test::TempDir& dir, const std::string& nb_version = kVersion) {
  make_dirs(dir.file("digits/golden"));
  const std::vector<std::pair<std::string, std::string>> files = {
      {"digits/model.nb", empty_nb_model(nb_version)},
      {"digits/preprocess.json", "{\"inputs\": [\"image\"], \"preprocess\": null}\n"},
      {"digits/task.json", "{\"kind\": \"classification\", \"options\": {}, \"primary\": \"top1\"}\n"},
      {"digits/labels.txt", "zero\none\n"},
      {"digits/golden/golden.json", "{\"inputs\": [], \"outputs\": [], \"count\": 0}\n"},
  };
  Json table = Json::object();
  for (const auto& [rel, content] : files) {
    write_file_atomic(dir.file(rel), content);
    table.set(rel, entry_of(content));
  }
  Json model = Json::object();
  model.set("name", "digits");
  model.set("dir", "digits");
  model.set("task", "classification");
  model.set("target", "arm64");
  model.set("precision", "fp32");
  model.set("opt_version", kVersion);
  model.set("inputs", Json::array());
  model.set("outputs", Json::array());
  Json models = Json::array();
  models.push(model);
  Json runtime = Json::object();
  runtime.set("opt_version", kVersion);
  Json doc = Json::object();
  doc.set("schema", "edgekit.assets/1");
  doc.set("platform", "linux");
  doc.set("runtime_required", runtime);
  doc.set("models", models);
  doc.set("files", table);
  write_json(dir.file("assets.json"), doc);
  return doc;
}

}  // namespace fixture
}  // namespace test
}  // namespace edgekit
