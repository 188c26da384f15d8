#pragma once
// The tuning database's text (tuning_db.hpp) and its records, both ways. Reading never throws:
// any text, whatever its shape (not JSON, JSON of another shape, fields of the wrong type, numbers
// out of range), gives records or the problem that makes the whole file unusable. It reads the
// JSON as a stream of events (nlohmann's SAX parser) and keeps only well-formed records, so
// memory stays a small multiple of the text and no nesting depth costs stack.
// A database file is a JSON object:
//   "format": the string "attnforge-tuning" (else it is not ours);
//   "version": the integer tuning_db_version, compared exactly (1.0 or 2^32 + 1 is not 1);
//   "records": an array of objects; each has the strings "signature", "bucket", "target" and
//     "schedule", and may have the strings "expression", "sizes", "date", "attnforge_version",
//     "halide_version" and the finite numbers "median_ms", "default_ms".
// Other keys, at the top or in a record, are skipped (later versions may add some).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>
#include "tuning_db.hpp"

namespace attn::detail {

// Larger files are not read: a database of tens of thousands of records is a few MiB.
inline constexpr std::size_t tuning_db_max_bytes = std::size_t(16) << 20;

// The records, or (records empty) why the text is not a database this attnforge reads.
tuning_db_contents parse_tuning_db(std::string_view text);

// Why a record cannot be written so that it reads back the same (a time that is not finite);
// empty when it can.
std::string tuning_record_problem(const tuning_record& r);

// The file's text: the records in order, indented, ending in a newline. Strings that are not
// UTF-8 are written with U+FFFD in place of the bad bytes. Records must have no problem above.
std::string format_tuning_db(const std::vector<tuning_record>& records);

}  // namespace attn::detail
