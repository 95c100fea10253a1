#pragma once
// One JSON object per line on stderr, so log collectors need no parsing rules.
#include <nlohmann/json_fwd.hpp>
#include <string_view>

namespace berth::observe {

void log(std::string_view level, std::string_view message, const nlohmann::json& fields);
void log(std::string_view level, std::string_view message);

}  // namespace berth::observe
