#pragma once
// nlohmann/json as berth-bench writes it: objects keep their keys in insertion order, and
// text is one line, with any invalid UTF-8 (say, in a server's error body) replaced
// rather than failing the dump.
#include <nlohmann/json.hpp>
#include <string>

namespace berth::bench {

using Json = nlohmann::ordered_json;

inline std::string to_text(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace berth::bench
