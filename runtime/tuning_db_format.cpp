#include "tuning_db_format.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>

namespace attn::detail {

namespace {

using nlohmann::json;
constexpr std::string_view format_name = "attnforge-tuning";

// A record's fields, read and written through one table.
struct text_field {
  const char* name;
  std::string tuning_record::*member;
  bool required;
};
constexpr text_field text_fields[] = {
    {"signature", &tuning_record::signature, true},   {"bucket", &tuning_record::bucket, true},
    {"target", &tuning_record::target, true},         {"schedule", &tuning_record::schedule, true},
    {"expression", &tuning_record::expression, false}, {"sizes", &tuning_record::sizes, false},
    {"date", &tuning_record::date, false},            {"attnforge_version", &tuning_record::attnforge_version, false},
    {"halide_version", &tuning_record::halide_version, false},
};
struct number_field {
  const char* name;
  double tuning_record::*member;
};
constexpr number_field number_fields[] = {{"median_ms", &tuning_record::median_ms}, {"default_ms", &tuning_record::default_ms}};

// One value as the reader meets it: a scalar, or the start of an array or object.
struct item {
  explicit item(const char* type_name) : type(type_name) {}
  const char* type;                // for messages: "null", "a string", "an array", ...
  bool array = false, object = false;
  std::string* text = nullptr;     // a string's contents
  std::optional<double> number;    // a number's value
  bool is_version = false;         // an integer exactly equal to tuning_db_version
  std::string spelled;             // a number as written, for messages
  bool container() const { return array || object; }
};

item number(double value, bool is_version, std::string spelled) {
  item v("a number");
  v.number = value;
  v.is_version = is_version;
  v.spelled = std::move(spelled);
  return v;
}

std::string cut(std::string s) { return s.size() <= 24 ? s : s.substr(0, 24) + "..."; }

// nlohmann's SAX interface. Values in places the format does not use are skipped without being
// stored; after the first bad record nothing more is stored, but the parse goes on, so that text
// which is not JSON at all is told apart from a database with a bad record.
class database_reader {
 public:
  bool null() { return value(item("null")); }
  bool boolean(bool) { return value(item("a boolean")); }
  bool number_integer(std::int64_t v) { return value(number(double(v), v == tuning_db_version, std::to_string(v))); }
  bool number_unsigned(std::uint64_t v) { return value(number(double(v), v == std::uint64_t(tuning_db_version), std::to_string(v))); }
  bool number_float(double v, const std::string& spelled) { return value(number(v, false, cut(spelled))); }
  bool string(std::string& s) {
    item v("a string");
    v.text = &s;
    return value(v);
  }
  bool binary(json::binary_t&) { return value(item("binary data")); }  // never in JSON text
  bool start_object(std::size_t) {
    item v("an object");
    v.object = true;
    return value(v);
  }
  bool start_array(std::size_t) {
    item v("an array");
    v.array = true;
    return value(v);
  }
  bool key(std::string& k) {
    if (skipping_ == 0) key_ = std::move(k);
    return true;
  }
  bool end_object() {
    if (skipping_ > 0) --skipping_;
    else if (at_ == place::record) end_record();
    else if (at_ == place::top) at_ = place::done;
    return true;
  }
  bool end_array() {
    if (skipping_ > 0) --skipping_;
    else if (at_ == place::records) at_ = place::top;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const json::exception&) {
    error_at_ = position;
    return false;
  }

  tuning_db_contents result(bool parsed) && {
    tuning_db_contents c;
    if (!parsed) c.problem = "not valid JSON (corrupt or truncated; at byte " + std::to_string(error_at_) + ")";
    else if (format_ != format_name)
      c.problem = "not an attnforge tuning database (no \"format\": \"" + std::string(format_name) + "\")";
    else if (!version_is_ours_)
      c.problem = (version_.empty() ? std::string("no \"version\"") : "\"version\" is " + version_) + "; this attnforge reads version " +
                  std::to_string(tuning_db_version);
    else if (!bad_record_.empty()) c.problem = bad_record_;
    else if (!records_seen_) c.problem = "no \"records\" array";
    else c.records = std::move(records_);
    return c;
  }

 private:
  enum class place { start, top, records, record, done };

  bool value(const item& v) {
    if (skipping_ > 0) skipping_ += v.container();
    else if (at_ == place::start) enter_top(v);
    else if (at_ == place::top) top_field(v);
    else if (at_ == place::records) start_record(v);
    else if (at_ == place::record) record_field(v);
    return true;
  }

  void skip(const item& v) { skipping_ = v.container(); }

  void enter_top(const item& v) {
    if (v.object) at_ = place::top;
    else skip(v), at_ = place::done;  // not an object: no "format", so not ours
  }

  void top_field(const item& v) {
    if (key_ == "format") {
      format_ = v.text ? std::optional(*v.text) : std::nullopt;
    } else if (key_ == "version") {
      version_is_ours_ = v.is_version;
      version_ = v.number ? v.spelled : v.type;
    } else if (key_ == "records" && v.array) {
      records_seen_ = true;
      at_ = place::records;
      return;
    } else if (key_ == "records") {
      fail(std::string("\"records\" is ") + v.type + ", not an array");
    }
    skip(v);
  }

  void start_record(const item& v) {
    ++record_number_;
    if (v.object) {
      record_ = {};
      required_seen_ = 0;
      at_ = place::record;
    } else {
      fail(record_name() + " is " + v.type + ", not an object");
      skip(v);
    }
  }

  void record_field(const item& v) {
    for (std::size_t i = 0; i < std::size(text_fields); ++i)
      if (key_ == text_fields[i].name) {
        if (v.text) record_.*text_fields[i].member = std::move(*v.text), required_seen_ |= 1u << i;
        else fail(record_name() + ": \"" + key_ + "\" is " + v.type + ", expected a string");
      }
    for (const number_field& f : number_fields)
      if (key_ == f.name) {
        if (v.number && std::isfinite(*v.number)) record_.*f.member = *v.number;
        else fail(record_name() + ": \"" + key_ + "\" is " + (v.number ? v.spelled : v.type) + ", expected a finite number");
      }
    skip(v);
  }

  void end_record() {
    at_ = place::records;
    for (std::size_t i = 0; i < std::size(text_fields); ++i)
      if (text_fields[i].required && !(required_seen_ & (1u << i))) fail(record_name() + " has no \"" + text_fields[i].name + "\"");
    if (bad_record_.empty()) records_.push_back(std::move(record_));
  }

  std::string record_name() const { return "record " + std::to_string(record_number_); }

  // The first problem of a record (or of the records array) is kept; no more records are stored.
  void fail(const std::string& what) {
    if (!bad_record_.empty()) return;
    bad_record_ = what;
    records_.clear();
    records_.shrink_to_fit();
  }

  place at_ = place::start;
  std::size_t skipping_ = 0;  // > 0: inside a skipped array or object, this many deep
  std::string key_;
  std::optional<std::string> format_;
  bool version_is_ours_ = false;
  std::string version_;  // as written, or its type; empty: none
  bool records_seen_ = false;
  std::vector<tuning_record> records_;
  tuning_record record_;
  unsigned required_seen_ = 0;
  std::size_t record_number_ = 0;
  std::string bad_record_;
  std::size_t error_at_ = 0;
};

}  // namespace

tuning_db_contents parse_tuning_db(std::string_view text) {
  database_reader reader;
  try {
    const bool parsed = json::sax_parse(text.begin(), text.end(), &reader);
    return std::move(reader).result(parsed);
  } catch (const std::exception& e) {  // out of memory: unusable like any other bad file
    return {{}, std::string("cannot be parsed: ") + e.what()};
  }
}

std::string tuning_record_problem(const tuning_record& r) {
  for (const number_field& f : number_fields)
    if (!std::isfinite(r.*f.member)) return std::string(f.name) + " is " + std::to_string(r.*f.member) + ", not a finite number";
  return {};
}

std::string format_tuning_db(const std::vector<tuning_record>& records) {
  json list = json::array();
  for (const tuning_record& r : records) {
    json j = json::object();
    for (const text_field& f : text_fields) j[f.name] = r.*f.member;
    for (const number_field& f : number_fields) j[f.name] = r.*f.member;
    list.push_back(std::move(j));
  }
  const json db{{"format", std::string(format_name)}, {"version", tuning_db_version}, {"records", std::move(list)}};
  return db.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace attn::detail
