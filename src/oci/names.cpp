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

bool glob_match(std::string_view pattern, std::string_view name) {
    if (pattern.empty()) return name.empty();
    if (pattern.starts_with("**")) {
        auto rest = pattern.substr(2);
        for (std::size_t i = 0; i <= name.size(); ++i)
            if (glob_match(rest, name.substr(i))) return true;
        return false;
    }
    if (pattern[0] == '*') {
        auto rest = pattern.substr(1);
        for (std::size_t i = 0; i <= name.size(); ++i) {
            if (glob_match(rest, name.substr(i))) return true;
            if (i < name.size() && name[i] == '/') break;
        }
        return false;
    }
    return !name.empty() && pattern[0] == name[0] && glob_match(pattern.substr(1), name.substr(1));
}

bool matches_any(const std::vector<std::string>& patterns, std::string_view name) {
    for (auto& pattern : patterns)
        if (glob_match(pattern, name)) return true;
    return false;
}

}  // namespace berth::oci
