// S3's times (dates.hpp), parsed by hand: strptime follows the locale, and neither form needs it.
#include "dates.hpp"

#include <array>
#include <charconv>

namespace berth::s3 {
namespace {

using namespace std::chrono;

// Exactly `width` decimal digits at `at`, advancing past them.
bool digits(std::string_view text, std::size_t& at, std::size_t width, int& value) {
    if (at + width > text.size()) return false;
    auto [end, error] = std::from_chars(text.data() + at, text.data() + at + width, value);
    if (error != std::errc() || end != text.data() + at + width) return false;
    at += width;
    return true;
}

bool literal(std::string_view text, std::size_t& at, std::string_view expected) {
    if (text.substr(at, expected.size()) != expected) return false;
    at += expected.size();
    return true;
}

// HH:MM:SS at `at`.
bool clock_time(std::string_view text, std::size_t& at, seconds& since_midnight) {
    int hour = 0, minute = 0, second = 0;
    if (!digits(text, at, 2, hour) || !literal(text, at, ":") || !digits(text, at, 2, minute) ||
        !literal(text, at, ":") || !digits(text, at, 2, second))
        return false;
    if (hour > 23 || minute > 59 || second > 60) return false;  // 60: a leap second, as RFC 3339 allows
    since_midnight = hours(hour) + minutes(minute) + seconds(second);
    return true;
}

std::optional<Time> at(int year, int month, int day, seconds since_midnight) {
    const year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                              std::chrono::day(static_cast<unsigned>(day))};
    if (!date.ok()) return std::nullopt;
    return Time(sys_days(date) + since_midnight);
}

}  // namespace

std::optional<Time> parse_iso8601(std::string_view text) {
    std::size_t i = 0;
    int year = 0, month = 0, day = 0;
    seconds since_midnight{};
    if (!digits(text, i, 4, year) || !literal(text, i, "-") || !digits(text, i, 2, month) || !literal(text, i, "-") ||
        !digits(text, i, 2, day) || !literal(text, i, "T") || !clock_time(text, i, since_midnight))
        return std::nullopt;
    if (literal(text, i, ".")) {
        const auto start = i;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
        if (i == start) return std::nullopt;
    }
    if (!literal(text, i, "Z") || i != text.size()) return std::nullopt;
    return at(year, month, day, since_midnight);
}

std::optional<Time> parse_http_date(std::string_view text) {
    static constexpr std::array<std::string_view, 12> months{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    // "Wed, " is not checked against the date: the day of the week adds nothing.
    std::size_t i = 5;
    int day = 0, year = 0;
    seconds since_midnight{};
    if (text.size() != 29 || text.substr(3, 2) != ", " || !digits(text, i, 2, day) || !literal(text, i, " "))
        return std::nullopt;
    int month = 0;
    while (month < 12 && text.substr(i, 3) != months[month]) ++month;
    if (month == 12) return std::nullopt;
    i += 3;
    if (!literal(text, i, " ") || !digits(text, i, 4, year) || !literal(text, i, " ") ||
        !clock_time(text, i, since_midnight) || !literal(text, i, " GMT"))
        return std::nullopt;
    return at(year, month + 1, day, since_midnight);
}

}  // namespace berth::s3
