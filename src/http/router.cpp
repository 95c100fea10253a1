#include "berth/net/host_port.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/oci/paths.hpp"
#include "router.hpp"

#include <algorithm>

namespace berth::http {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::vector<std::string_view> split(std::string_view path) {
    std::vector<std::string_view> out;
    while (true) {
        auto slash = path.find('/');
        out.push_back(path.substr(0, slash));
        if (slash == std::string_view::npos) return out;
        path = path.substr(slash + 1);
    }
}

// Whether decoded path segments fit a pattern's segments, filling name and reference.
bool fits(std::vector<std::string_view> pattern, const std::vector<std::string>& path, Target& out) {
    if (pattern.back() == "{rest}") {
        pattern.pop_back();
        if (path.size() < pattern.size()) return false;
        std::string rest;
        for (std::size_t i = pattern.size(); i < path.size(); ++i) rest += (i > pattern.size() ? "/" : "") + path[i];
        out.reference = rest;
        return fits(pattern, {path.begin(), path.begin() + static_cast<std::ptrdiff_t>(pattern.size())}, out);
    }
    const auto name_at = std::find(pattern.begin(), pattern.end(), "{name}");
    const std::size_t before = static_cast<std::size_t>(name_at - pattern.begin());
    const std::size_t after = name_at == pattern.end() ? 0 : pattern.size() - before - 1;
    if (name_at == pattern.end() ? path.size() != pattern.size() : path.size() < before + after + 1) return false;
    auto segment_fits = [&](std::string_view wanted, const std::string& got) {
        if (wanted == "{reference}") {
            out.reference = got;
            return !got.empty();
        }
        return wanted == got;
    };
    for (std::size_t i = 0; i < before; ++i)
        if (!segment_fits(pattern[i], path[i])) return false;
    for (std::size_t i = 0; i < after; ++i)
        if (!segment_fits(pattern[before + 1 + i], path[path.size() - after + i])) return false;
    if (name_at != pattern.end()) {
        out.name.clear();
        for (std::size_t i = before; i < path.size() - after; ++i) out.name += (i > before ? "/" : "") + path[i];
    }
    return true;
}

bool matches(const Route& route, const std::vector<std::string>& path, Target& out) {
    if (route.pattern.empty()) return false;
    auto pattern = split(route.pattern.substr(1));
    if (fits(pattern, path, out)) return true;
    // A pattern ending with '/' also matches the path without it.
    if (pattern.size() > 1 && pattern.back().empty()) {
        pattern.pop_back();
        return fits(pattern, path, out);
    }
    return false;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

Query Query::parse(std::string_view text) {
    Query query;
    while (!text.empty()) {
        auto amp = text.find('&');
        auto pair = text.substr(0, amp);
        text = amp == std::string_view::npos ? std::string_view{} : text.substr(amp + 1);
        if (pair.empty()) continue;
        auto eq = pair.find('=');
        auto key = percent_decode(pair.substr(0, eq), true);
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), true);
        if (key && value) query.params_.emplace_back(std::move(*key), std::move(*value));
    }
    return query;
}

std::optional<std::string> Query::get(std::string_view key) const {
    for (auto& [k, v] : params_)
        if (k == key) return v;
    return std::nullopt;
}

std::vector<std::string> Query::all(std::string_view key) const {
    std::vector<std::string> out;
    for (auto& [k, v] : params_)
        if (k == key) out.push_back(v);
    return out;
}

std::optional<Target> parse_target(std::string_view target) {
    if (target.empty() || target[0] != '/') return std::nullopt;
    auto question = target.find('?');
    Target out;
    if (question != std::string_view::npos) {
        out.query = Query::parse(target.substr(question + 1));
        out.raw_query = std::string(target.substr(question));
    }
    std::vector<std::string> path;
    for (auto segment : split(target.substr(1, question == std::string_view::npos ? question : question - 1))) {
        auto decoded = percent_decode(segment, false);
        if (!decoded) return std::nullopt;
        path.push_back(std::move(*decoded));
    }
    for (auto& route : routes()) {
        out.name.clear();
        out.reference.clear();
        if (!matches(route, path, out)) continue;
        out.route = &route;
        if (!route.name_param.empty()) out.name = out.query.get(route.name_param).value_or("");
        return out;
    }
    out.route = &unknown_route();
    out.name.clear();
    out.reference.clear();
    return out;
}

void require_valid_parts(const Target& target, bool put) {
    using oci::Error;
    using oci::ErrorCode;
    if (!target.route->names_repository()) return;
    if (!oci::valid_repository_name(target.name))
        throw Error(ErrorCode::name_invalid, "invalid repository name", target.name.substr(0, 300));
    const auto& reference = target.reference;
    switch (target.route->part) {
        case Part::reference:
            if (reference.find(':') != std::string::npos) oci::Digest::parse_or_throw(reference);
            else if (!oci::valid_tag(reference) && put)
                throw Error(ErrorCode::tag_invalid, "invalid tag", reference.substr(0, 200));
            else if (!oci::valid_tag(reference))
                throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference.substr(0, 200));
            break;
        case Part::digest: oci::Digest::parse_or_throw(reference); break;
        case Part::upload_id:
            if (!oci::valid_upload_id(reference)) throw Error(ErrorCode::blob_upload_unknown, "upload unknown");
            break;
        case Part::none: break;
    }
}

std::string forwarded_upload_target(const Target& target) {
    auto path = oci::path::upload(target.name, target.reference);
    if (auto digest = target.query.get("digest")) path += "?digest=" + net::query_escape(*digest);
    return path;
}

}  // namespace berth::http
