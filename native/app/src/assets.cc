#include "edgekit/assets.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "edgekit/file_io.h"
#include "edgekit/limits.h"
#include "edgekit/nbfile.h"
#include "edgekit/sha256.h"

namespace edgekit {
namespace fs = std::filesystem;

namespace {

constexpr const char* kAssetsIndex = "assets.json";
constexpr const char* kAssetsSchema = "edgekit.assets/1";
constexpr const char* kBundleManifest = "manifest.json";
constexpr const char* kBundleSchema = "edgekit.bundle/1";
// Python's edgekit.build.bundle.REQUIRED_KEYS: a manifest without them was not written by `edgekit build`.
const char* const kBundleKeys[] = {"model", "host_twin", "golden", "files", "parity", "config"};

struct Listed {
  std::string sha256;
  std::uint64_t bytes = 0;
  fs::path resolved;  // inside the root, symlinks resolved: what is checked is what is hashed
};
using FileTable = std::map<std::string, Listed>;  // relative path (as written) -> expected

[[noreturn]] void refuse(Refusal reason, const std::string& what, const std::string& fix) {
  throw AssetError(reason, what, fix);
}

std::string repackage_hint(AssetKind kind) {
  return kind == AssetKind::asset_set ? "write the asset set again with `edgekit package` and copy it whole"
                                      : "rebuild the bundle with `edgekit build` (or copy it again, whole)";
}

const Json& member(const Json& object, const std::string& key, const std::string& where, AssetKind kind) {
  const Json* found = object.is_object() ? object.find(key) : nullptr;
  if (!found) refuse(Refusal::schema, where + " has no \"" + key + "\"", repackage_hint(kind));
  return *found;
}

std::string text_member(const Json& object, const std::string& key, const std::string& where, AssetKind kind) {
  const Json& value = member(object, key, where, kind);
  if (!value.is_string()) refuse(Refusal::schema, where + " \"" + key + "\" is not a string", repackage_hint(kind));
  return value.as_string();
}

// A listed path must stay inside the folder: relative POSIX, no "..", ".", empty parts, backslash or NUL, at most
// 1024 bytes and 255 a part (Python's edgekit.contracts.safe_relative, docs/security.md).
bool safe_relative(const std::string& rel) {
  if (rel.empty() || rel.size() > 1024 || rel.front() == '/' || rel.find('\\') != std::string::npos ||
      rel.find('\0') != std::string::npos) {
    return false;
  }
  std::size_t start = 0;
  while (start <= rel.size()) {
    const std::size_t end = std::min(rel.find('/', start), rel.size());
    const std::string part = rel.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.size() > 255) return false;
    start = end + 1;
  }
  return true;
}

// A model name (it is a folder name): 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit
// (Python's edgekit.contracts.NAME_RULE).
bool safe_name(const std::string& name) {
  const auto alnum = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (name.empty() || name.size() > 64 || !alnum(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '_' || c == '-' || c == '.'; });
}

// 64 lowercase hex digits: the one spelling of a sha256 (Python writes hexdigest()).
bool sha256_spelling(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Where `rel` really is: symlinks resolved (std::filesystem::weakly_canonical, so a missing
// file still has an answer), and refused when that lies outside `root` (already
// canonical). The textual check above cannot see a symlink such as golden/x -> ~/.ssh.
fs::path resolve_inside(const std::string& root, const std::string& rel, const std::string& index_name,
                        AssetKind kind) {
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::path(root) / rel, ec);
  const fs::path inner = ec ? fs::path("..") : resolved.lexically_relative(root);
  if (inner.empty() || *inner.begin() == ".." || inner.is_absolute()) {
    refuse(Refusal::schema,
           index_name + " lists \"" + rel + "\", which resolves to " + (ec ? "nothing readable" : resolved.string()) +
               ", outside the folder (a symlink leaving it?)",
           "replace the link by the file itself; " + repackage_hint(kind));
  }
  return resolved;
}

// The index's bytes, read once: what a signature is checked on is what is parsed.
std::string read_index_bytes(const std::string& file, AssetKind kind) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (!ec && size > limits::kMaxJsonBytes) {
    refuse(Refusal::schema, file + " has " + std::to_string(size) + " bytes, beyond the limit MAX_JSON_BYTES = " +
                                std::to_string(limits::kMaxJsonBytes),
           repackage_hint(kind));
  }
  try {
    return read_file_text(file, ExitCode::model);
  } catch (const Error& e) {
    refuse(Refusal::schema, file + " is not readable JSON (" + std::string(e.what()) + ")", repackage_hint(kind));
  }
}

Json parse_index(const std::string& file, const std::string& bytes, AssetKind kind) {
  Json doc;
  try {
    doc = Json::parse(bytes);
  } catch (const Error& e) {
    refuse(Refusal::schema, file + " is not readable JSON (" + std::string(e.what()) + ")", repackage_hint(kind));
  }
  if (!doc.is_object()) refuse(Refusal::schema, file + " is not a JSON object", repackage_hint(kind));
  return doc;
}

FileTable file_table(const std::string& root, const Json& doc, const std::string& index_name, AssetKind kind) {
  const Json& files = member(doc, "files", index_name, kind);
  if (!files.is_object()) refuse(Refusal::schema, index_name + " \"files\" is not an object", repackage_hint(kind));
  FileTable table;
  for (const auto& [rel, meta] : files.members()) {
    if (!safe_relative(rel)) {
      refuse(Refusal::schema, index_name + " lists \"" + rel + "\", a path outside the folder", repackage_hint(kind));
    }
    const Json* sha = meta.is_object() ? meta.find("sha256") : nullptr;
    const Json* bytes = meta.is_object() ? meta.find("bytes") : nullptr;
    const bool has_bytes = bytes != nullptr && bytes->is_integer() && bytes->as_int() >= 0;
    if (!sha || !sha->is_string() || !sha256_spelling(sha->as_string()) || !has_bytes) {
      refuse(Refusal::schema,
             index_name + " entry \"" + rel + "\" lacks a sha256 (64 lowercase hex digits) or a byte count",
             repackage_hint(kind));
    }
    Listed listed{sha->as_string(), static_cast<std::uint64_t>(bytes->as_int()),
                  resolve_inside(root, rel, index_name, kind)};
    table.emplace(rel, listed);
  }
  return table;
}

// Every listed file: present, its size, its sha256. Sizes first, so a truncated
// model is refused without hashing the rest of the set.
void verify_files(const FileTable& table, AssetKind kind, AssetSet& out) {
  const std::string index_name = kind == AssetKind::asset_set ? kAssetsIndex : kBundleManifest;
  for (const auto& [rel, listed] : table) {
    std::error_code ec;
    const fs::path& path = listed.resolved;
    if (!fs::is_regular_file(path, ec)) {
      refuse(Refusal::missing_file, rel + " is listed in " + index_name + " but absent", repackage_hint(kind));
    }
    const std::uint64_t size = fs::file_size(path, ec);
    if (!ec && listed.bytes != UINT64_MAX && size != listed.bytes) {
      refuse(Refusal::checksum_mismatch,
             rel + " has " + std::to_string(size) + " bytes, " + index_name + " says " + std::to_string(listed.bytes),
             repackage_hint(kind));
    }
  }
  for (const auto& [rel, listed] : table) {
    std::uint64_t bytes = 0;
    const std::string got = sha256_file(listed.resolved.string(), ExitCode::model, &bytes);
    if (got != listed.sha256) {
      refuse(Refusal::checksum_mismatch, rel + " has sha256 " + got.substr(0, 12) + "..., " + index_name + " says " +
                                             listed.sha256.substr(0, 12) + "...",
             repackage_hint(kind));
    }
    out.files += 1;
    out.bytes += bytes;
  }
}

// A set (or bundle) holds exactly the files its index lists, besides the index itself (and, for an asset set,
// assets.json.sig): no symbolic link (to a file or a folder, wherever it points), no special file, no unlisted
// file. Python's package --verify and edgekit inspect apply the same rule (docs/security.md).
void refuse_unlisted(const std::string& root, const FileTable& table, AssetKind kind) {
  const std::string index_name = kind == AssetKind::asset_set ? kAssetsIndex : kBundleManifest;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(root).generic_string();
    const fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(status)) {
      refuse(Refusal::schema, rel + " is a symbolic link; a set holds its own files, never links",
             "replace the link by the file itself; " + repackage_hint(kind));
    }
    if (fs::is_directory(status)) continue;
    if (!fs::is_regular_file(status)) {
      refuse(Refusal::schema, rel + " is not a regular file (a FIFO, socket or device)", repackage_hint(kind));
    }
    const bool own = rel == index_name || (kind == AssetKind::asset_set && rel == kSignatureFile);
    if (!own && !table.count(rel)) {
      refuse(Refusal::schema, rel + " is not in " + index_name + "'s file table",
             "remove it, or " + repackage_hint(kind));
    }
  }
  if (ec) refuse(Refusal::schema, "cannot list " + root + ": " + ec.message(), repackage_hint(kind));
}

// The model's files the app reads, by their path relative to the index.
void attach_files(ModelAssets& m, const std::string& root, const std::string& prefix, const FileTable& table,
                  const std::string& nb_name, AssetKind kind) {
  for (const auto& [rel, entry] : table) {
    if (prefix.empty() || rel.rfind(prefix + "/", 0) == 0) m.files.push_back(rel.substr(prefix.empty() ? 0 : prefix.size() + 1));
  }
  const auto listed = [&](const std::string& name) -> std::string {
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    if (table.count(rel)) return (fs::path(root) / rel).string();
    std::error_code ec;
    if (fs::exists(fs::path(root) / rel, ec)) {
      refuse(Refusal::schema, rel + " is present but not in the file table, so it cannot be verified",
             repackage_hint(kind));
    }
    return "";
  };
  m.nb_file = listed(nb_name);
  if (m.nb_file.empty()) {
    refuse(Refusal::schema, "model " + m.name + " has no " + (prefix.empty() ? "" : prefix + "/") + nb_name +
                                " in the file table",
           repackage_hint(kind));
  }
  m.preprocess_file = listed("preprocess.json");
  m.task_file = listed("task.json");
  m.labels_file = listed("labels.txt");
  m.golden_file = listed("golden/golden.json");
}

// The header names the version the index declares and, with a runtime linked, the runtime's.
void check_versions(AssetSet& set) {
  for (const ModelAssets& m : set.models) {
    NbHeader header;
    try {
      header = read_nb_header(m.nb_file);
    } catch (const Error& e) {
      throw Error(ExitCode::model, "model " + m.name + ": " + e.what(), e.fix());
    }
    if (set.runtime_version && header.opt_version != *set.runtime_version) {
      refuse(Refusal::version_mismatch,
             "model " + m.name + ": model.nb was converted by opt " + header.opt_version +
                 " but the app links Paddle-Lite " + *set.runtime_version,
             "rebuild the bundles with opt " + *set.runtime_version + ", or link a " + header.opt_version + " runtime");
    }
    if (header.opt_version != m.opt_version || header.opt_version != set.opt_version) {
      refuse(Refusal::version_mismatch,
             "model " + m.name + ": model.nb's header says opt " + header.opt_version + ", the index says " +
                 (header.opt_version != m.opt_version ? m.opt_version : set.opt_version),
             "the file was replaced after packaging; " + repackage_hint(set.kind));
    }
  }
}

ModelAssets model_entry(const Json& entry, const std::string& where, AssetKind kind) {
  if (!entry.is_object()) refuse(Refusal::schema, where + " is not an object", repackage_hint(kind));
  ModelAssets m;
  m.name = text_member(entry, "name", where, kind);
  if (!safe_name(m.name)) {
    refuse(Refusal::schema, where + " name \"" + m.name + "\" is not 1-64 letters, digits, '_', '-' or '.'",
           repackage_hint(kind));
  }
  m.target = text_member(entry, "target", where, kind);
  m.precision = text_member(entry, "precision", where, kind);
  m.opt_version = text_member(entry, "opt_version", where, kind);
  if (const Json* inputs = entry.find("inputs"); inputs && inputs->is_array()) m.inputs = *inputs;
  if (const Json* outputs = entry.find("outputs"); outputs && outputs->is_array()) m.outputs = *outputs;
  return m;
}

AssetSet open_asset_set(const std::string& root, const std::optional<std::string>& runtime,
                        const std::optional<PublicKey>& key) {
  const AssetKind kind = AssetKind::asset_set;
  AssetSet set;
  set.kind = kind;
  set.root = root;
  set.runtime_version = runtime;
  const std::string index_file = resolve_inside(root, kAssetsIndex, kAssetsIndex, kind).string();
  const std::string index_bytes = read_index_bytes(index_file, kind);
  if (key) {  // before anything of the set is parsed or trusted
    check_index_signature(resolve_inside(root, kSignatureFile, kAssetsIndex, kind).string(), index_bytes, *key);
    set.signed_by = key->id();
  }
  const Json doc = parse_index(index_file, index_bytes, kind);
  set.schema = doc.find("schema") && doc.at("schema").is_string() ? doc.at("schema").as_string() : "";
  if (set.schema != kAssetsSchema) {
    refuse(Refusal::schema, std::string(kAssetsIndex) + " has schema \"" + set.schema + "\", expected " + kAssetsSchema,
           "package the bundles with this edgekit version (`edgekit package`)");
  }
  set.platform = doc.find("platform") && doc.at("platform").is_string() ? doc.at("platform").as_string() : "";
  set.opt_version = text_member(member(doc, "runtime_required", kAssetsIndex, kind), "opt_version",
                                std::string(kAssetsIndex) + " runtime_required", kind);
  const FileTable table = file_table(root, doc, kAssetsIndex, kind);
  const Json& models = member(doc, "models", kAssetsIndex, kind);
  if (!models.is_array() || models.size() == 0) {
    refuse(Refusal::schema, std::string(kAssetsIndex) + " lists no models", repackage_hint(kind));
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string where = std::string(kAssetsIndex) + " models[" + std::to_string(i) + "]";
    ModelAssets m = model_entry(models.at(i), where, kind);
    const std::string dir = text_member(models.at(i), "dir", where, kind);
    if (!safe_relative(dir)) refuse(Refusal::schema, where + " dir \"" + dir + "\" leaves the folder", repackage_hint(kind));
    if (!names.insert(m.name).second) refuse(Refusal::schema, "two models are named " + m.name, repackage_hint(kind));
    const Json& task = member(models.at(i), "task", where, kind);
    if (!task.is_string() && !task.is_null()) refuse(Refusal::schema, where + " task is not a string or null", repackage_hint(kind));
    m.task = task.is_string() ? task.as_string() : "";
    m.dir = (fs::path(root) / dir).string();
    attach_files(m, root, dir, table, "model.nb", kind);
    set.models.push_back(std::move(m));
  }
  refuse_unlisted(root, table, kind);
  verify_files(table, kind, set);
  check_versions(set);
  return set;
}

AssetSet open_bundle(const std::string& root, const std::optional<std::string>& runtime) {
  const AssetKind kind = AssetKind::bundle;
  AssetSet set;
  set.kind = kind;
  set.root = root;
  set.runtime_version = runtime;
  const std::string manifest_file = resolve_inside(root, kBundleManifest, kBundleManifest, kind).string();
  const Json doc = parse_index(manifest_file, read_index_bytes(manifest_file, kind), kind);
  set.schema = doc.find("schema") && doc.at("schema").is_string() ? doc.at("schema").as_string() : "";
  if (set.schema != kBundleSchema) {
    refuse(Refusal::schema, std::string(kBundleManifest) + " has schema \"" + set.schema + "\", expected " + kBundleSchema,
           "rebuild the bundle with this edgekit version (`edgekit build`)");
  }
  for (const char* key : kBundleKeys) {
    if (!member(doc, key, kBundleManifest, kind).is_object()) {
      refuse(Refusal::schema, std::string(kBundleManifest) + " \"" + key + "\" is not an object", repackage_hint(kind));
    }
  }
  const Json& model = doc.at("model");
  ModelAssets m = model_entry(model, std::string(kBundleManifest) + " model", kind);
  const std::string nb_name = text_member(model, "file", std::string(kBundleManifest) + " model", kind);
  if (!safe_relative(nb_name)) refuse(Refusal::schema, "the model file \"" + nb_name + "\" leaves the folder", repackage_hint(kind));
  if (const Json* task = doc.find("task"); task && task->is_object() && task->find("kind") && task->at("kind").is_string()) {
    m.task = task->at("kind").as_string();
  }
  m.dir = root;
  set.opt_version = m.opt_version;
  const FileTable table = file_table(root, doc, kBundleManifest, kind);
  refuse_unlisted(root, table, kind);
  attach_files(m, root, "", table, nb_name, kind);
  set.models.push_back(std::move(m));
  verify_files(table, kind, set);
  check_versions(set);
  return set;
}

}  // namespace

const char* refusal_name(Refusal reason) {
  switch (reason) {
    case Refusal::missing_file: return "missing file";
    case Refusal::checksum_mismatch: return "checksum mismatch";
    case Refusal::version_mismatch: return "version mismatch";
    case Refusal::schema: return "schema";
    case Refusal::signature: return "signature";
  }
  return "schema";
}

AssetError::AssetError(Refusal reason, const std::string& what, std::string fix)
    : Error(reason == Refusal::version_mismatch ? ExitCode::version
            : reason == Refusal::signature      ? ExitCode::signature
                                                : ExitCode::model,
            std::string("refused (") + refusal_name(reason) + "): " + what, std::move(fix)),
      reason_(reason) {}

std::string verified_file(const ModelAssets& model, const std::string& rel) {
  if (!safe_relative(rel) || !std::binary_search(model.files.begin(), model.files.end(), rel)) {
    refuse(Refusal::schema, "model " + model.name + " names \"" + rel + "\", which is not one of its verified files",
           "golden files must be listed in the file table; " + repackage_hint(AssetKind::asset_set));
  }
  return (fs::path(model.dir) / rel).string();
}

const ModelAssets& AssetSet::model(const std::string& name) const {
  std::string names;
  for (const ModelAssets& m : models) {
    if (m.name == name) return m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  throw Error(ExitCode::usage, "no model named \"" + name + "\" in " + root, "use one of: " + names);
}

Json AssetSet::to_json() const {
  Json out = Json::object();
  out.set("kind", kind == AssetKind::asset_set ? "assets" : "bundle");
  out.set("root", root);
  out.set("schema", schema);
  out.set("platform", platform.empty() ? Json() : Json(platform));
  out.set("opt_version", opt_version);
  out.set("runtime_version", runtime_version ? Json(*runtime_version) : Json());
  out.set("signed_by", signed_by.empty() ? Json() : Json(signed_by));
  out.set("files", files);
  out.set("bytes", bytes);
  out.set("verify_ms", verify_ms);
  Json list = Json::array();
  for (const ModelAssets& m : models) {
    Json item = Json::object();
    item.set("name", m.name);
    item.set("task", m.task.empty() ? Json() : Json(m.task));
    item.set("target", m.target);
    item.set("precision", m.precision);
    item.set("opt_version", m.opt_version);
    item.set("dir", m.dir);
    item.set("inputs", m.inputs);
    item.set("outputs", m.outputs);
    item.set("labels", m.labels_file.empty() ? Json() : Json(m.labels_file));
    item.set("golden", m.golden_file.empty() ? Json() : Json(m.golden_file));
    list.push(item);
  }
  out.set("models", list);
  return out;
}

AssetSet open_assets(const std::string& path, const std::optional<std::string>& runtime_version,
                     const std::optional<PublicKey>& public_key) {
  const auto start = std::chrono::steady_clock::now();
  std::error_code ec;
  fs::path root = fs::absolute(path, ec);
  if (fs::is_regular_file(root, ec)) root = root.parent_path();
  if (!fs::is_directory(root, ec)) {
    refuse(Refusal::missing_file, path + " is not a folder", "pass the asset folder (assets.json) or a bundle folder");
  }
  // Canonical, so resolved file paths can be compared with it (the root itself may be a link).
  root = fs::canonical(root, ec);
  if (ec) refuse(Refusal::missing_file, path + " cannot be resolved: " + ec.message(), "pass an existing folder");
  std::string folder = root.string();
  while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
  AssetSet set;
  if (fs::is_regular_file(root / kAssetsIndex, ec)) {
    set = open_asset_set(folder, runtime_version, public_key);
  } else if (fs::is_regular_file(root / kBundleManifest, ec)) {
    if (public_key) {
      refuse(Refusal::signature, folder + " is a bundle (manifest.json), which carries no signature, but the app requires "
                                          "a set signed by key " + public_key->id(),
             "package it with `edgekit package BUNDLE ... --sign KEY` and open the asset set");
    }
    set = open_bundle(folder, runtime_version);
  } else {
    refuse(Refusal::missing_file, folder + " holds neither " + kAssetsIndex + " nor " + kBundleManifest,
           "pass a folder written by `edgekit package` or `edgekit build`");
  }
  set.verify_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return set;
}

}  // namespace edgekit
