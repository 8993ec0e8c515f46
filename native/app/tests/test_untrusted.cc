// Crafted asset sets and images from issue 22: symlinks leaving the folder, golden
// files that do not fit the golden index, images whose header promises gigabytes,
// the JPEG Huffman table that overflows stb_image 2.27. Each is refused by name.
#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/decode.h"
#include "edgekit/file_io.h"
#include "edgekit/model.h"
#include "edgekit/nbfile.h"
#include "edgekit/npy.h"
#include "edgekit/selftest.h"
#include "edgekit/sha256.h"
#include "harness.h"
#include "temp_dir.h"

using namespace edgekit;
namespace fs = std::filesystem;

namespace {

const std::string kVersion = "v2.13-rc";

std::string npy_of(Shape shape) {
  Array a;
  a.shape = std::move(shape);
  a.data.resize(static_cast<std::size_t>(element_count(a.shape)) * sizeof(float), 0);
  return npy_bytes(a);
}

// A one-model asset set "m" with `files` (relative to m/) besides model.nb; returns the root.
std::string write_set(const test::TempDir& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  Json table = Json::object();
  auto add = [&](const std::string& rel, const std::string& content) {
    make_dirs(fs::path(dir.file("m/" + rel)).parent_path().string());
    write_file_atomic(dir.file("m/" + rel), content);
    Json e = Json::object();
    e.set("sha256", sha256_hex(content.data(), content.size()));
    e.set("bytes", content.size());
    table.set("m/" + rel, e);
  };
  add("model.nb", empty_nb_model(kVersion));
  for (const auto& [rel, content] : files) add(rel, content);
  Json model = Json::object();
  for (const char* key : {"name", "dir"}) model.set(key, "m");
  model.set("task", Json());
  model.set("target", "arm64");
  model.set("precision", "fp32");
  model.set("opt_version", kVersion);
  Json runtime = Json::object();
  runtime.set("opt_version", kVersion);
  Json doc = Json::object();
  doc.set("schema", "edgekit.assets/1");
  doc.set("runtime_required", runtime);
  Json models = Json::array();
  models.push(model);
  doc.set("models", models);
  doc.set("files", table);
  write_file_atomic(dir.file("assets.json"), doc.dump(1));
  return dir.file("");
}

// One float32 output of [batch, 2]: enough for the self-test's arithmetic.
class FakeEngine : public Engine {
 public:
  std::vector<std::string> input_names() const override { return {"x"}; }
  std::vector<std::string> output_names() const override { return {"y"}; }
  void set_input(std::size_t, DType, const Shape& shape, const void*) override { batch_ = shape.at(0); }
  void run() override {}
  Array output(std::size_t) const override {
    Array a;
    a.shape = {batch_, 2};
    a.data.resize(static_cast<std::size_t>(batch_) * 2 * sizeof(float), 0);
    return a;
  }

 private:
  std::int64_t batch_ = 1;
};

std::string golden_json(const std::string& input, const std::string& images) {
  return "{\"inputs\": [{\"name\": \"x\", \"file\": \"" + input +
         "\"}], \"outputs\": [{\"name\": \"y\", \"file\": \"golden/output_0.npy\"}]" + images + "}";
}

}  // namespace

// Issue 22: the loader's path check was textual; a listed file that is a symlink to
// anywhere was hashed and used (golden/x -> ~/.ssh put the keys into the set).
EK_TEST(untrusted, symlinks_must_stay_inside_the_folder) {
  test::TempDir outside, dir;
  write_file_atomic(outside.file("secret.txt"), "zero\none\n");
  const std::string root = write_set(dir, {{"labels.txt", "zero\none\n"}, {"copy.txt", "zero\none\n"}});
  EK_CHECK_EQ(open_assets(root, kVersion).files, std::int64_t{3});
  // issue 32: a set holds no links at all, not even one inside the folder (Python's --verify refuses it too)
  fs::remove(dir.file("m/copy.txt"));
  fs::create_symlink("labels.txt", dir.file("m/copy.txt"));
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/copy.txt is a symbolic link");
  // one that leaves it is not, though its bytes match the table
  fs::remove(dir.file("m/copy.txt"));
  write_set(dir, {{"labels.txt", "zero\none\n"}});
  fs::remove(dir.file("m/labels.txt"));
  fs::create_symlink(outside.file("secret.txt"), dir.file("m/labels.txt"));
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "outside the folder (a symlink leaving it?)");
  // nor a file reached through a linked folder
  write_file_atomic(outside.file("copy.txt"), "zero\none\n");
  write_set(dir, {{"labels.txt", "zero\none\n"}});
  fs::create_directory_symlink(outside.file(""), dir.file("m/sub"));
  Json doc = Json::parse(read_file_text(dir.file("assets.json"), ExitCode::input));
  Json files = doc.at("files");
  files.set("m/sub/copy.txt", files.at("m/labels.txt"));
  doc.set("files", files);
  write_file_atomic(dir.file("assets.json"), doc.dump());
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/sub/copy.txt\", which resolves to");
}

// Issue 22: golden.json's file names were joined to the folder unchecked.
EK_TEST(untrusted, golden_files_must_be_verified_files) {
  test::TempDir dir;
  const std::string root = write_set(dir, {{"golden/golden.json", golden_json("../outside.npy", "")},
                                           {"golden/output_0.npy", npy_of({2, 2})}});
  const AssetSet set = open_assets(root, kVersion);
  Model model(set.model("m"), std::make_unique<FakeEngine>());
  EK_CHECK_ERROR(GoldenSet(model.assets()).replay_vectors(model), model, "which is not one of its verified files");
  // the file it names, put into the set unlisted, is refused as the set opens (issue 32)
  write_file_atomic(dir.file("outside.npy"), npy_of({2, 1, 2}));
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "outside.npy is not in assets.json's file table");
}

// Issue 22: zero golden samples divided by zero (and passed), fewer samples than golden
// images overflowed the heap.
EK_TEST(untrusted, golden_sample_counts_are_checked) {
  test::TempDir dir;
  const std::string images =
      ", \"images\": {\"files\": [\"golden/images/a.png\", \"golden/images/b.png\"], "
      "\"input\": \"golden/images/input.npy\", \"outputs\": [\"golden/images/output_0.npy\"]}";
  const std::string root =
      write_set(dir, {{"golden/golden.json", golden_json("golden/input_0.npy", images)},
                      {"golden/input_0.npy", npy_of({0, 1, 2, 2})},
                      {"golden/output_0.npy", npy_of({0, 2})},
                      {"golden/images/a.png", "a"},
                      {"golden/images/b.png", "b"},
                      {"golden/images/input.npy", npy_of({1, 1, 2, 2})},  // one sample for two images
                      {"golden/images/output_0.npy", npy_of({1, 2})},
                      {"preprocess.json", "{\"inputs\": [\"x\"], \"preprocess\": {\"color\": \"gray\"}}"}});
  const AssetSet set = open_assets(root, kVersion);
  Model model(set.model("m"), std::make_unique<FakeEngine>());
  const GoldenSet golden(model.assets());
  EK_CHECK_ERROR(golden.replay_vectors(model), input, "no golden sample to replay");
  const std::uint8_t pixels[4] = {1, 2, 3, 4};
  const Json first = golden.check_image(model, 0, ImageView::gray(pixels, 2, 2));
  EK_CHECK(first.at("tensor").at("differing").as_int() == 4);
  EK_CHECK_ERROR(golden.check_image(model, 1, ImageView::gray(pixels, 2, 2)), input, "so no sample 1");
}

// Issue 23: a dynamic-width bundle's golden groups at other widths (golden.json's "widths") replay like the
// main group, at their own shape; a malformed entry or a group whose files do not fit is refused by name.
EK_TEST(untrusted, golden_width_groups_replay_and_are_checked) {
  const std::string wide =
      ", \"widths\": [{\"width\": 4, \"count\": 2, \"inputs\": [{\"name\": \"x\", \"file\": \"golden/w4_input_0.npy\"}], "
      "\"outputs\": [{\"name\": \"y\", \"file\": \"golden/w4_output_0.npy\"}]}]";
  auto set_with = [&](const test::TempDir& dir, const std::string& widths, Shape wide_output) {
    return write_set(dir, {{"golden/golden.json", golden_json("golden/input_0.npy", widths)},
                           {"golden/input_0.npy", npy_of({2, 1, 2, 2})},
                           {"golden/output_0.npy", npy_of({2, 2})},
                           {"golden/w4_input_0.npy", npy_of({2, 1, 2, 4})},
                           {"golden/w4_output_0.npy", npy_of(std::move(wide_output))}});
  };
  test::TempDir good, bad_output, not_a_list, no_width;
  const AssetSet set = open_assets(set_with(good, wide, {2, 2}), kVersion);
  Model model(set.model("m"), std::make_unique<FakeEngine>());
  const Json out = GoldenSet(model.assets()).replay_vectors(model);
  EK_CHECK(out.at("ok").as_bool());
  EK_CHECK_EQ(out.at("widths").items().size(), std::size_t{1});
  const Json& group = out.at("widths").at(0);
  EK_CHECK_EQ(group.at("width").as_int(), std::int64_t{4});
  EK_CHECK_EQ(group.at("samples").as_int(), std::int64_t{2});
  EK_CHECK(group.at("ok").as_bool());

  const AssetSet other = open_assets(set_with(bad_output, wide, {2, 3}), kVersion);
  Model m2(other.model("m"), std::make_unique<FakeEngine>());
  EK_CHECK_ERROR(GoldenSet(m2.assets()).replay_vectors(m2), run, "an output has 4 values, the golden file 6");

  const AssetSet listless = open_assets(set_with(not_a_list, ", \"widths\": {\"width\": 4}", {2, 2}), kVersion);
  Model m3(listless.model("m"), std::make_unique<FakeEngine>());
  EK_CHECK_ERROR(GoldenSet(m3.assets()).replay_vectors(m3), input, "golden.json's widths is");

  const AssetSet widthless = open_assets(set_with(no_width, ", \"widths\": [{\"count\": 2}]", {2, 2}), kVersion);
  Model m4(widthless.model("m"), std::make_unique<FakeEngine>());
  EK_CHECK_ERROR(GoldenSet(m4.assets()).replay_vectors(m4), input, "not a group with a width");

  test::TempDir no_inputs;
  const AssetSet bare = open_assets(set_with(no_inputs, ", \"widths\": [{\"width\": 4, \"count\": 2}]", {2, 2}),
                                    kVersion);
  Model m5(bare.model("m"), std::make_unique<FakeEngine>());
  EK_CHECK_ERROR(GoldenSet(m5.assets()).replay_vectors(m5), input, "group at width 4 has no list of inputs");
}

// Issue 23: a variable-width bundle's golden images of different widths come one file each ("per_image"):
// each image is checked against its own tensor and outputs, and an image of the wrong width is named.
EK_TEST(untrusted, golden_images_of_different_widths_have_a_file_each) {
  test::TempDir dir;
  const std::string images =
      ", \"images\": {\"files\": [\"golden/images/a.png\", \"golden/images/b.png\"], \"per_image\": ["
      "{\"input\": \"golden/images/input_0000.npy\", \"outputs\": [\"golden/images/output_0000_0.npy\"]}, "
      "{\"input\": \"golden/images/input_0001.npy\", \"outputs\": [\"golden/images/output_0001_0.npy\"]}]}";
  const std::string root =
      write_set(dir, {{"golden/golden.json", golden_json("golden/input_0.npy", images)},
                      {"golden/input_0.npy", npy_of({2, 1, 2, 2})},
                      {"golden/output_0.npy", npy_of({2, 2})},
                      {"golden/images/a.png", "a"},
                      {"golden/images/b.png", "b"},
                      {"golden/images/input_0000.npy", npy_of({1, 1, 2, 2})},
                      {"golden/images/output_0000_0.npy", npy_of({1, 2})},
                      {"golden/images/input_0001.npy", npy_of({1, 1, 2, 4})},   // the wider line
                      {"golden/images/output_0001_0.npy", npy_of({1, 2})},
                      {"preprocess.json", "{\"inputs\": [\"x\"], \"preprocess\": {\"color\": \"gray\"}}"}});
  const AssetSet set = open_assets(root, kVersion);
  Model model(set.model("m"), std::make_unique<FakeEngine>());
  const GoldenSet golden(model.assets());
  EK_CHECK_EQ(golden.image_count(), std::size_t{2});
  const std::uint8_t narrow[4] = {0, 0, 0, 0};
  const std::uint8_t wide[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const Json first = golden.check_image(model, 0, ImageView::gray(narrow, 2, 2));
  EK_CHECK(first.at("tensor").at("differing").as_int() == 0);
  const Json second = golden.check_image(model, 1, ImageView::gray(wide, 2, 4));
  EK_CHECK(second.at("tensor").at("differing").as_int() == 0);
  EK_CHECK(second.at("outputs").at(0).at("ok").as_bool());
  EK_CHECK_ERROR(golden.check_image(model, 1, ImageView::gray(narrow, 2, 2)), input,
                 "the preprocessed tensor has 4 values, ");
}

// Issue 32: the loader accepted what Python's package --verify refuses (an unlisted file, a link to a file or a
// folder anywhere, a FIFO), and the reverse; one rule now (docs/security.md, "What a set may contain").
EK_TEST(untrusted, a_set_holds_exactly_its_listed_regular_files) {
  test::TempDir outside, dir;
  write_file_atomic(outside.file("hostname"), "host\n");
  const std::string root = write_set(dir, {{"labels.txt", "zero\none\n"}});
  EK_CHECK_EQ(open_assets(root, kVersion).files, std::int64_t{2});
  write_file_atomic(dir.file("m/extra.txt"), "x");
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/extra.txt is not in assets.json's file table");
  fs::remove(dir.file("m/extra.txt"));
  fs::create_symlink(outside.file("hostname"), dir.file("m/hostname"));
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/hostname is a symbolic link");
  fs::remove(dir.file("m/hostname"));
  fs::create_directory_symlink(outside.file(""), dir.file("m/linked"));
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/linked is a symbolic link");
  fs::remove(dir.file("m/linked"));
  EK_CHECK(::mkfifo(dir.file("m/fifo").c_str(), 0600) == 0);
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "m/fifo is not a regular file");
  fs::remove(dir.file("m/fifo"));
  EK_CHECK_EQ(open_assets(root, kVersion).files, std::int64_t{2});
}

// Issue 32: one spelling of names, paths, hashes and sizes in assets.json, as Python reads them.
EK_TEST(untrusted, the_index_is_spelled_one_way) {
  test::TempDir dir;
  const std::string root = write_set(dir, {});
  const Json good = Json::parse(read_file_text(dir.file("assets.json"), ExitCode::input));
  const auto with = [&](const std::function<void(Json&)>& edit) {
    Json doc = Json::parse(good.dump());
    edit(doc);
    write_file_atomic(dir.file("assets.json"), doc.dump(1));
  };
  const auto model_set = [](Json& doc, const char* key, const Json& value) {
    Json models = doc.at("models");
    Json m = models.at(0);
    m.set(key, value);
    Json list = Json::array();
    list.push(m);
    doc.set("models", list);
  };
  const auto entry_set = [](Json& doc, const char* key, const Json& value) {
    Json files = doc.at("files");
    Json e = files.at("m/model.nb");
    e.set(key, value);
    files.set("m/model.nb", e);
    doc.set("files", files);
  };
  with([&](Json& d) { model_set(d, "name", Json("..")); });
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "name \"..\" is not 1-64 letters");
  with([&](Json& d) { model_set(d, "task", Json(5)); });
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "task is not a string or null");
  with([&](Json& d) { entry_set(d, "sha256", Json(std::string(64, 'A'))); });
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "lacks a sha256 (64 lowercase hex digits)");
  with([&](Json& d) { Json files = d.at("files"); Json e = files.at("m/model.nb"); Json o = Json::object();
                      o.set("sha256", e.at("sha256")); files.set("m/model.nb", o); d.set("files", files); });
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "or a byte count");
  with([&](Json& d) { d.set("runtime_required", Json()); });
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "runtime_required");
  with([&](Json&) {});
  EK_CHECK_EQ(open_assets(root, kVersion).files, std::int64_t{1});
  write_file_atomic(dir.file("assets.json"), "{\"schema\": \"edgekit.assets/1\", \"x\": 1e999}");
  EK_CHECK_ERROR(open_assets(root, kVersion), model, "beyond a double's range (not finite)");
}
