#include "berth/oci/names.hpp"

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

// Matched as a table of "pattern from i matches name from j", filled from the ends: time and
// memory are the product of the lengths, whatever the stars (a caller's glob, GET
// /_berth/v1/events?repository=, must not cost exponential time).
bool glob_match(std::string_view pattern, std::string_view name) {
    if (pattern.find('*') == std::string_view::npos) return pattern == name;
    const std::size_t P = pattern.size(), N = name.size(), width = N + 1;
    std::vector<char> table((P + 1) * width, 0);
    auto at = [&](std::size_t i, std::size_t j) -> char& { return table[i * width + j]; };
    at(P, N) = 1;
    for (std::size_t i = P; i-- > 0;) {
        const bool any_depth = pattern[i] == '*' && i + 1 < P && pattern[i + 1] == '*';
        for (std::size_t j = N + 1; j-- > 0;) {
            if (any_depth) at(i, j) = at(i + 2, j) || (j < N && at(i, j + 1));
            else if (pattern[i] == '*') at(i, j) = at(i + 1, j) || (j < N && name[j] != '/' && at(i, j + 1));
            else at(i, j) = j < N && pattern[i] == name[j] && at(i + 1, j + 1);
        }
    }
    return at(0, 0);
}

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
    for (auto& pattern : patterns)
        if (glob_match(pattern, name)) return true;
    return false;
}

}  // namespace berth::oci
