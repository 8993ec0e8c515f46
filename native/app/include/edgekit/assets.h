// The apps' loader: an asset set written by `edgekit package` (assets.json, schema
// edgekit.assets/1) or one bundle written by `edgekit build` (manifest.json, schema
// edgekit.bundle/1), opened and checked before any model reaches Paddle-Lite:
//
//  - every file of the file table exists, has its size and its sha256;
//  - the files the app reads (model.nb, preprocess.json, task.json, labels.txt,
//    golden/) are in that table, so nothing unverified is used;
//  - each model.nb's header names the opt version the index declares and, when a
//    runtime is linked, the runtime's own version (Lite only warns; we refuse);
//  - with a public key (signature.h), assets.json is signed by that key: checked on
//    the bytes of assets.json before they are parsed or any file is hashed. Checksums
//    alone detect corruption, not tampering (docs/security.md).
//
// A refusal is an AssetError with one line: "... refused (<reason>): <what>; <fix>".
// Lite-free: the runtime version comes in as a string, so the host tests cover it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/error.h"
#include "edgekit/json.h"
#include "edgekit/signature.h"

namespace edgekit {

// signature: a public key was given and the set is unsigned, signed by another key, or
// its signature does not verify over assets.json (or the build cannot verify at all).
enum class Refusal { missing_file, checksum_mismatch, version_mismatch, schema, signature };
const char* refusal_name(Refusal reason);  // "missing file", "checksum mismatch", ..., "signature"

// ExitCode::version for a version mismatch, ExitCode::signature for a signature,
// ExitCode::model for the others.
class AssetError : public Error {
 public:
  AssetError(Refusal reason, const std::string& what, std::string fix);
  Refusal reason() const { return reason_; }

 private:
  Refusal reason_;
};

enum class AssetKind { asset_set, bundle };

struct ModelAssets {
  std::string name;
  std::string dir;        // absolute folder of the model's files
  std::string task;       // classification, ocr_det, ocr_rec, ocr_cls; "" without task.json
  std::string target;     // arm64, armv7
  std::string precision;  // fp32, int8, ...
  std::string opt_version;
  std::string nb_file;          // absolute paths; empty when the folder has no such file
  std::string preprocess_file;
  std::string task_file;
  std::string labels_file;
  std::string golden_file;      // golden/golden.json
  std::vector<std::string> files;  // the verified files in `dir`, relative to it (sorted)
  Json inputs = Json::array();  // [{name, shape, dtype}] as the manifest lists them
  Json outputs = Json::array();
};

struct AssetSet {
  AssetKind kind = AssetKind::asset_set;
  std::string root;         // absolute
  std::string schema;
  std::string platform;     // android, ios, linux; "" for a bundle
  std::string opt_version;  // the runtime every model needs
  std::optional<std::string> runtime_version;  // what it was checked against; nullopt: not checked
  std::string signed_by;    // PublicKey::id() of the key whose signature verified; "" when none was required
  std::vector<ModelAssets> models;
  std::int64_t files = 0;   // verified files and bytes
  std::uint64_t bytes = 0;
  double verify_ms = 0;

  // Error(usage) naming the models there are.
  const ModelAssets& model(const std::string& name) const;
  Json to_json() const;
};

// Opens `path`: a folder holding assets.json or manifest.json (or either file).
// runtime_version: the linked runtime's GetVersion(); nullopt skips that check
// (builds without a runtime, where no model can run anyway).
// public_key: when given, only an asset set signed by it opens (a bundle, which has
// no signature, is refused); nullopt checks the checksums only.
AssetSet open_assets(const std::string& path, const std::optional<std::string>& runtime_version,
                     const std::optional<PublicKey>& public_key = std::nullopt);

// `rel` (as golden.json names golden files) when it is one of the model's verified
// files, as an absolute path; else AssetError(schema): a golden file must not be read
// from outside the set or unverified.
std::string verified_file(const ModelAssets& model, const std::string& rel);

}  // namespace edgekit
