// Reading TOML files with file:line:column errors: a table reader that checks types and ranges
// and refuses keys nobody asked for. Internal to core/src (toml++ never reaches a public header);
// shared by scenario files and model presets.
#pragma once

#include <toml++/toml.h>

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "first_repeat.h"
#include "kvtune/error.h"

namespace kvtune::detail {

// A node with no position was not read from the file: an override (recommend's command-line
// options become typed overrides of its template) put it there.
inline std::string where(const std::string& file, const toml::source_region& r) {
  if (r.begin.line == 0) return file + ", a command-line setting";
  return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

// A TOML integer, or nothing for any other node. toml++'s value<int64_t>() also converts a float
// node, and for one outside int64's range that conversion is undefined behaviour (found by
// fuzz_scenario: `layers = [1.5e26]`); a key that wants an integer takes only an integer.
inline std::optional<int64_t> integer_of(const toml::node& n) {
  if (const auto* i = n.as_integer()) return i->get();
  return std::nullopt;
}

// Reads one TOML table, checking types and ranges, and refuses keys it was not asked about.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string file, std::string path)
      : table_(table), file_(std::move(file)), path_(std::move(path)) {}

  // Asking about a key makes it a known one, so unknown-key errors list it even when it is absent.
  bool has(const std::string& key) {
    known_.insert(key);
    return table_.contains(key);
  }

  int64_t integer(const std::string& key, int64_t fallback, int64_t min, int64_t max) {
    const toml::node* n = node(key);
    if (n == nullptr) return fallback;
    const auto v = integer_of(*n);
    if (!v || *v < min || *v > max) {
      fail(*n, "'" + key + "' must be an integer in " + std::to_string(min) + ".." + std::to_string(max));
    }
    return *v;
  }

  double real(const std::string& key, double fallback, double min, double max) {
    const toml::node* n = node(key);
    if (n == nullptr) return fallback;
    const auto v = n->value<double>();
    if (!(n->is_floating_point() || n->is_integer()) || !v || !(*v >= min && *v <= max)) {
      std::ostringstream range;
      range << min << ".." << max;
      fail(*n, "'" + key + "' must be a number in " + range.str());
    }
    return *v;
  }

  bool boolean(const std::string& key, bool fallback) {
    const toml::node* n = node(key);
    if (n == nullptr) return fallback;
    if (!n->is_boolean()) fail(*n, "'" + key + "' must be true or false");
    return *n->value<bool>();
  }

  std::string string(const std::string& key, const std::string& fallback) {
    const toml::node* n = node(key);
    if (n == nullptr) return fallback;
    if (!n->is_string()) fail(*n, "'" + key + "' must be a string");
    return *n->value<std::string>();
  }

  std::string choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& valid) {
    const toml::node* n = node(key);
    if (n == nullptr) return fallback;
    const auto v = n->value<std::string>();
    if (!n->is_string() || std::find(valid.begin(), valid.end(), *v) == valid.end()) {
      fail(*n, "'" + key + "' must be one of: " + join(valid));
    }
    return *v;
  }

  std::vector<int64_t> integers(const std::string& key, int64_t min, int64_t max) {
    std::vector<int64_t> out;
    const toml::node* n = node(key);
    if (n == nullptr) return out;
    const toml::array* a = n->as_array();
    if (a == nullptr) fail(*n, "'" + key + "' must be an array of integers");
    for (const toml::node& e : *a) {
      const auto v = integer_of(e);
      if (!v || *v < min || *v > max) {
        fail(e, "'" + key + "' entries must be integers in " + std::to_string(min) + ".." + std::to_string(max));
      }
      out.push_back(*v);
    }
    return out;
  }

  // integers() whose entries must all differ: a seed, layer or head listed twice would count the
  // same cases twice. Fails at the array, naming the repeated value.
  std::vector<int64_t> distinct_integers(const std::string& key, int64_t min, int64_t max) {
    std::vector<int64_t> out = integers(key, min, max);
    if (const auto i = first_repeat(out)) fail(*node(key), "'" + key + "' lists " + std::to_string(out[*i]) + " twice");
    return out;
  }

  std::vector<double> reals(const std::string& key, double min, double max) {
    std::vector<double> out;
    const toml::node* n = node(key);
    if (n == nullptr) return out;
    const toml::array* a = n->as_array();
    if (a == nullptr) fail(*n, "'" + key + "' must be an array of numbers");
    for (const toml::node& e : *a) {
      const auto v = e.value<double>();
      if (!(e.is_floating_point() || e.is_integer()) || !(*v >= min && *v <= max)) {
        std::ostringstream range;
        range << min << ".." << max;
        fail(e, "'" + key + "' entries must be numbers in " + range.str());
      }
      out.push_back(*v);
    }
    return out;
  }

  // As reals, each value once (the entry given twice is named).
  std::vector<double> distinct_reals(const std::string& key, double min, double max) {
    std::vector<double> out = reals(key, min, max);
    if (const auto i = first_repeat(out)) {
      std::ostringstream value;
      value << out[*i];
      fail((*node(key)->as_array())[*i], "'" + key + "' lists " + value.str() + " twice");
    }
    return out;
  }

  // A sub-table; absent tables read as empty.
  TableReader table(const std::string& key) {
    static const toml::table empty;
    const toml::node* n = node(key);
    if (n == nullptr) return TableReader(empty, file_, path_ + "." + key);
    if (!n->is_table()) fail(*n, "'" + key + "' must be a table");
    return TableReader(*n->as_table(), file_, path_.empty() ? key : path_ + "." + key);
  }

  const toml::node* node(const std::string& key) {
    known_.insert(key);
    return table_.get(key);
  }

  // The node of a key that must be present; `expected` describes it in the error.
  const toml::node& required(const std::string& key, const std::string& expected) {
    const toml::node* n = node(key);
    if (n == nullptr) {
      throw InputError(file_ + ": missing key '" + key + "'" + (path_.empty() ? "" : " in [" + path_ + "]") + " (" +
                       expected + ")");
    }
    return *n;
  }

  int64_t required_integer(const std::string& key, int64_t min, int64_t max) {
    required(key, "an integer in " + std::to_string(min) + ".." + std::to_string(max));
    return integer(key, 0, min, max);
  }

  double required_real(const std::string& key, double min, double max) {
    std::ostringstream range;
    range << "a number in " << min << ".." << max;
    required(key, range.str());
    return real(key, 0.0, min, max);
  }

  std::string required_choice(const std::string& key, const std::vector<std::string>& valid) {
    required(key, "one of: " + join(valid));
    return choice(key, "", valid);
  }

  // Refuses keys nobody asked for.
  void finish() const {
    for (const auto& [k, v] : table_) {
      if (!known_.count(std::string(k.str()))) {
        const std::string in = path_.empty() ? "at the top level" : "in [" + path_ + "]";
        throw InputError(where(file_, k.source()) + ": unknown key '" + std::string(k.str()) + "' " + in +
                         "; valid keys are: " + join(known_));
      }
    }
  }

  [[noreturn]] void fail(const toml::node& n, const std::string& what) const {
    throw InputError(where(file_, n.source()) + ": " + what);
  }

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const toml::table& raw() const { return table_; }

 private:
  const toml::table& table_;
  std::string file_, path_;
  std::set<std::string> known_;
};

// Parses TOML text; a syntax error becomes an InputError at file:line:column.
inline toml::table parse_toml(std::string_view text, const std::string& source_name) {
  try {
    return toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    throw InputError(where(source_name, e.source()) + ": " + std::string(e.description()));
  }
}

}  // namespace kvtune::detail
