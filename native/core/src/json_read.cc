#include <cmath>
#include <cstdlib>
#include <limits>
#include <locale>
#include <sstream>

#include "edgekit/error.h"
#include "edgekit/json.h"
#include "edgekit/limits.h"

namespace edgekit {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Json document() {
    Json value = parse_value(0);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ExitCode::input, "invalid JSON at byte " + std::to_string(i_) + ": " + why);
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }

  bool literal(const char* word) {
    std::size_t n = std::char_traits<char>::length(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }

  // `depth` counts the arrays and objects around the value; the recursion stays within
  // MAX_JSON_DEPTH frames, so a crafted document cannot exhaust the stack.
  Json parse_value(int depth) {
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if ((c == '{' || c == '[') && depth + 1 > limits::kMaxJsonDepth) {
      throw limits::beyond(ExitCode::input, "the nesting depth of a JSON document at byte " + std::to_string(i_),
                           static_cast<std::uint64_t>(depth + 1), "MAX_JSON_DEPTH", limits::kMaxJsonDepth);
    }
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (literal("true")) return Json(true);
    if (literal("false")) return Json(false);
    if (literal("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(std::string("unexpected character '") + c + "'");
  }

  Json parse_object(int depth) {
    Json out = Json::object();
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return out;
    }
    while (true) {
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a member name");
      std::string key = parse_string();
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ':') fail("expected ':'");
      ++i_;
      out.set(key, parse_value(depth + 1));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return out;
      }
      fail("expected ',' or '}'");
    }
  }

  Json parse_array(int depth) {
    Json out = Json::array();
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return out;
    }
    while (true) {
      out.push(parse_value(depth + 1));
      skip_space();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return out;
      }
      fail("expected ',' or ']'");
    }
  }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string parse_string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (!literal("\\u")) fail("lone high surrogate");
            const unsigned low = hex4();
            if (low < 0xdc00 || low >= 0xe000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            fail("lone low surrogate");
          }
          utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape \\") + e);
      }
    }
  }

  Json parse_number() {
    const std::size_t start = i_;
    bool integral = true;
    if (s_[i_] == '-') ++i_;
    const auto digits = [&] {
      const std::size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ - from;
    };
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (digits() == 0) {
      fail("bad number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      integral = false;
      ++i_;
      if (digits() == 0) fail("bad number: no digits after '.'");
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      integral = false;
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (digits() == 0) fail("bad number: no exponent digits");
    }
    const std::string text = s_.substr(start, i_ - start);
    if (integral && text.size() <= 18) return Json(static_cast<long long>(std::strtoll(text.c_str(), nullptr, 10)));
    std::istringstream in(text);
    in.imbue(std::locale::classic());
    double value = 0;
    in >> value;
    // A literal beyond a double's range (1e999) is refused, not read as infinity: edgekit's JSON holds finite
    // numbers only, and Python's reader refuses the same literals (docs/security.md).
    if (in.fail() || !std::isfinite(value)) fail("number " + text.substr(0, 40) + " is beyond a double's range (not finite)");
    return Json(value);
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

Error mismatch(const char* want) { return Error(ExitCode::input, std::string("JSON value is not ") + want); }

}  // namespace

Json Json::parse(const std::string& text) {
  limits::check(ExitCode::input, "a JSON document in bytes", text.size(), "MAX_JSON_BYTES", limits::kMaxJsonBytes);
  return Parser(text).document();
}

bool Json::as_bool() const {
  if (type_ != Type::boolean) throw mismatch("a boolean");
  return bool_;
}
double Json::as_number() const {
  if (type_ != Type::number) throw mismatch("a number");
  return is_int_ ? static_cast<double>(int_) : num_;
}
std::int64_t Json::as_int() const {
  if (type_ != Type::number) throw mismatch("a number");
  if (is_int_) return int_;
  if (num_ != static_cast<double>(static_cast<std::int64_t>(num_))) throw mismatch("an integer");
  return static_cast<std::int64_t>(num_);
}
const std::string& Json::as_string() const {
  if (type_ != Type::string) throw mismatch("a string");
  return str_;
}
const std::vector<Json>& Json::items() const {
  if (type_ != Type::array) throw mismatch("an array");
  return arr_;
}
const std::vector<std::pair<std::string, Json>>& Json::members() const {
  if (type_ != Type::object) throw mismatch("an object");
  return obj_;
}
std::size_t Json::size() const {
  if (type_ == Type::array) return arr_.size();
  if (type_ == Type::object) return obj_.size();
  throw mismatch("an array or object");
}
const Json& Json::at(std::size_t index) const {
  const auto& list = items();
  if (index >= list.size()) throw Error(ExitCode::input, "JSON index " + std::to_string(index) + " out of range");
  return list[index];
}
const Json* Json::find(const std::string& key) const {
  if (type_ != Type::object) return nullptr;
  if (!index_.empty()) {
    const auto found = index_.find(key);
    return found == index_.end() ? nullptr : &obj_[found->second].second;
  }
  for (const auto& member : obj_) {
    if (member.first == key) return &member.second;
  }
  return nullptr;
}
const Json& Json::at(const std::string& key) const {
  const Json* found = find(key);
  if (!found) throw Error(ExitCode::input, "JSON object has no member '" + key + "'");
  return *found;
}

}  // namespace edgekit
