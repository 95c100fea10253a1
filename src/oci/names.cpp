#include "berth/oci/names.hpp"

#include <algorithm>
#include <array>

namespace berth::oci {
namespace {

bool alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
bool valid_component(std::string_view part) {
    std::size_t i = 0;
    const std::size_t n = part.size();
    auto alnum_run = [&] {
        std::size_t start = i;
        while (i < n && alnum_lower(part[i])) ++i;
        return i > start;
    };
    if (!alnum_run()) return false;
    while (i < n) {
        if (part[i] == '.') {
            ++i;
        } else if (part[i] == '_') {
            ++i;
            if (i < n && part[i] == '_') ++i;
        } else if (part[i] == '-') {
            while (i < n && part[i] == '-') ++i;
        } else {
            return false;
        }
        if (!alnum_run()) return false;
    }
    return true;
}

}  // namespace

bool valid_repository_name(std::string_view name) {
    if (name.empty() || name.size() > max_name_length) return false;
    std::size_t start = 0;
    while (true) {
        auto slash = name.find('/', start);
        auto part = name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
        if (!valid_component(part)) return false;
        if (slash == std::string_view::npos) return true;
        start = slash + 1;
    }
}

bool valid_tag(std::string_view tag) {
    if (tag.empty() || tag.size() > max_tag_length) return false;
    auto word = [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    if (!word(tag[0])) return false;
    for (char c : tag.substr(1))
        if (!word(c) && c != '.' && c != '-') return false;
    return true;
}

bool valid_upload_id(std::string_view id) {
    if (id.empty() || id.size() > 128) return false;
    for (char c : id)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
    return true;
}

bool valid_registry_host(std::string_view host) {
    if (host.empty() || host.size() > max_name_length) return false;
    if (auto colon = host.find(':'); colon != std::string_view::npos) {
        auto port = host.substr(colon + 1);
        if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
            return false;
        host = host.substr(0, colon);
    }
    std::size_t start = 0;
    while (true) {
        auto dot = host.find('.', start);
        auto label = host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
        for (char c : label)
            if (!alnum_lower(c) && c != '-') return false;
        if (dot == std::string_view::npos) return true;
        start = dot + 1;
    }
}

std::string_view namespace_of(std::string_view repository) { return repository.substr(0, repository.find('/')); }

// Matched as a table of "pattern from i matches name from j", filled from the ends a row at a time
// (three rows: `**` looks two ahead): time is the product of the lengths and memory the name's,
// whatever the stars (a caller's glob, GET /_berth/v1/events?repository=, must not cost exponential
// time). Rules' usual shapes, a name and `prefix/**`, are compared directly.
bool glob_match(std::string_view pattern, std::string_view name) {
    const auto star = pattern.find('*');
    if (star == std::string_view::npos) return pattern == name;
    if (star + 2 == pattern.size() && pattern.ends_with("**")) return name.starts_with(pattern.substr(0, star));
    const std::size_t P = pattern.size(), N = name.size(), width = N + 1;
    constexpr std::size_t small = 256;
    std::array<char, 3 * small> stack_rows{};
    std::vector<char> heap_rows(width > small ? 3 * width : 0, 0);
    char* rows = width > small ? heap_rows.data() : stack_rows.data();
    auto row = [&](std::size_t i) { return rows + (i % 3) * width; };
    std::fill(row(P), row(P) + width, 0);
    row(P)[N] = 1;
    for (std::size_t i = P; i-- > 0;) {
        char* at = row(i);
        const char* next = row(i + 1);
        const char* after_two = i + 2 <= P ? row(i + 2) : nullptr;
        const bool any_depth = pattern[i] == '*' && i + 1 < P && pattern[i + 1] == '*';
        for (std::size_t j = N + 1; j-- > 0;) {
            if (any_depth) at[j] = after_two[j] || (j < N && at[j + 1]);
            else if (pattern[i] == '*') at[j] = next[j] || (j < N && name[j] != '/' && at[j + 1]);
            else at[j] = j < N && pattern[i] == name[j] && next[j + 1];
        }
    }
    return row(0)[0];
}

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
    for (auto& pattern : patterns)
        if (glob_match(pattern, name)) return true;
    return false;
}

}  // namespace berth::oci
