#include <cmath>
#include <locale>
#include <sstream>

#include "edgekit/error.h"
#include "edgekit/json.h"

namespace edgekit {

Json Json::array() {
  Json j;
  j.type_ = Type::array;
  return j;
}

Json Json::object() {
  Json j;
  j.type_ = Type::object;
  return j;
}

Json& Json::push(Json value) {
  if (type_ == Type::null) type_ = Type::array;
  if (type_ != Type::array) throw Error(ExitCode::internal, "JSON push on a non-array");
  arr_.push_back(std::move(value));
  return arr_.back();
}

namespace {
// Below this many members a linear scan beats the map (and allocates nothing).
constexpr std::size_t kIndexFrom = 16;
}  // namespace

Json& Json::set(const std::string& key, Json value) {
  if (type_ == Type::null) type_ = Type::object;
  if (type_ != Type::object) throw Error(ExitCode::internal, "JSON set on a non-object");
  if (index_.empty()) {
    for (auto& member : obj_) {
      if (member.first == key) {
        member.second = std::move(value);
        return member.second;
      }
    }
  } else if (auto found = index_.find(key); found != index_.end()) {
    obj_[found->second].second = std::move(value);
    return obj_[found->second].second;
  }
  obj_.emplace_back(key, std::move(value));
  if (!index_.empty()) {
    index_.emplace(key, obj_.size() - 1);
  } else if (obj_.size() >= kIndexFrom) {
    for (std::size_t i = 0; i < obj_.size(); ++i) index_.emplace(obj_[i].first, i);
  }
  return obj_.back().second;
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  // "-0" would read back as the integer 0 (here and in Python's json): keep the sign.
  if (value == 0 && std::signbit(value)) return "-0.0";
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream out;
    out.imbue(std::locale::classic());
    out.precision(precision);
    out << value;
    text = out.str();
    std::istringstream back(text);
    back.imbue(std::locale::classic());
    double parsed = 0;
    back >> parsed;
    // A failed read counts as no match: streams store the largest double on overflow,
    // which made 1.7976931348623157e308 come out as "2e+308" (infinity to any reader).
    if (!back.fail() && parsed == value) break;
  }
  return text;
}

std::string json_quote(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through unchanged
        }
    }
  }
  return out + "\"";
}

void Json::write(std::string& out, int indent, int depth) const {
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * level), ' ');
  };
  switch (type_) {
    case Type::null: out += "null"; break;
    case Type::boolean: out += bool_ ? "true" : "false"; break;
    case Type::number: out += is_int_ ? std::to_string(int_) : json_number(num_); break;
    case Type::string: out += json_quote(str_); break;
    case Type::array: {
      if (arr_.empty()) {
        out += "[]";
        break;
      }
      // Arrays of scalars stay on one line: shapes and timing lists read better so.
      bool flat = true;
      for (const auto& v : arr_) flat = flat && v.type_ != Type::array && v.type_ != Type::object;
      out += '[';
      for (std::size_t i = 0; i < arr_.size(); ++i) {
        if (i) out += indent >= 0 && flat ? ", " : ",";
        if (!flat) newline(depth + 1);
        arr_[i].write(out, indent, depth + 1);
      }
      if (!flat) newline(depth);
      out += ']';
      break;
    }
    case Type::object: {
      if (obj_.empty()) {
        out += "{}";
        break;
      }
      out += '{';
      for (std::size_t i = 0; i < obj_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        out += json_quote(obj_[i].first);
        out += indent >= 0 ? ": " : ":";
        obj_[i].second.write(out, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

}  // namespace edgekit
