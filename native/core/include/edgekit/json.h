// A small JSON value with a writer and a reader: enough for run records, bundle
// manifests and preprocessing descriptions, with no third-party dependency.
// Objects keep insertion order so written records read top to bottom.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace edgekit {

class Json {
 public:
  enum class Type { null, boolean, number, string, array, object };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool value) : type_(Type::boolean), bool_(value) {}
  Json(int value) : Json(static_cast<long long>(value)) {}
  Json(long value) : Json(static_cast<long long>(value)) {}
  Json(long long value) : type_(Type::number), int_(static_cast<std::int64_t>(value)), num_(static_cast<double>(value)), is_int_(true) {}
  Json(unsigned value) : Json(static_cast<long long>(value)) {}
  Json(unsigned long value) : Json(static_cast<long long>(value)) {}
  Json(unsigned long long value) : Json(static_cast<long long>(value)) {}
  Json(double value) : type_(Type::number), num_(value) {}
  Json(const char* value) : type_(Type::string), str_(value) {}
  Json(std::string value) : type_(Type::string), str_(std::move(value)) {}

  static Json array();
  static Json object();
  template <typename T>
  static Json array_of(const std::vector<T>& values) {
    Json out = array();
    for (const auto& v : values) out.push(Json(v));
    return out;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::null; }
  bool is_number() const { return type_ == Type::number; }
  bool is_integer() const { return type_ == Type::number && is_int_; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // Accessors throw Error(ExitCode::input) on a type mismatch.
  bool as_bool() const;
  double as_number() const;
  std::int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const;
  const std::vector<std::pair<std::string, Json>>& members() const;
  std::size_t size() const;
  const Json& at(std::size_t index) const;
  const Json* find(const std::string& key) const;
  const Json& at(const std::string& key) const;

  Json& push(Json value);
  Json& set(const std::string& key, Json value);  // replaces an existing key in place

  // indent < 0: one line; otherwise pretty-printed with that many spaces.
  std::string dump(int indent = -1) const;
  // Throws Error(ExitCode::input) with the byte offset of the problem; documents beyond
  // limits.h's MAX_JSON_BYTES or nested beyond MAX_JSON_DEPTH are refused naming the limit.
  // Duplicate member names keep the first position and the last value (as Python's json).
  static Json parse(const std::string& text);

 private:
  void write(std::string& out, int indent, int depth) const;

  Type type_ = Type::null;
  bool bool_ = false;
  std::int64_t int_ = 0;
  double num_ = 0;
  bool is_int_ = false;
  std::string str_;
  std::vector<Json> arr_;
  std::vector<std::pair<std::string, Json>> obj_;
  // Member name -> position in obj_, kept once an object grows past a few members, so
  // set() and find() stay O(log n) on large (possibly crafted) objects.
  std::map<std::string, std::size_t> index_;
};

// A double as the shortest decimal that reads back to the same value,
// independent of the C locale; NaN and infinities have no JSON form ("null").
std::string json_number(double value);
std::string json_quote(const std::string& text);

}  // namespace edgekit
