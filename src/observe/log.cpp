#include "berth/observe/log.hpp"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace berth::observe {
namespace {

std::string timestamp() {
    using namespace std::chrono;
    auto now = system_clock::now();
    auto seconds = system_clock::to_time_t(now);
    auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char buffer[64];  // room for any int the fields may hold, so the format cannot truncate
    std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
    return buffer;
}

}  // namespace

void log(std::string_view level, std::string_view message, const nlohmann::json& fields) {
    nlohmann::json line = {{"time", timestamp()}, {"level", level}, {"msg", message}};
    if (fields.is_object()) line.update(fields);
    auto text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), stderr);  // one call: lines from threads do not interleave
}

void log(std::string_view level, std::string_view message) { log(level, message, nlohmann::json::object()); }

}  // namespace berth::observe
