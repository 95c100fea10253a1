#include "berth/net/host_port.hpp"
#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "berth/oci/paths.hpp"
#include "berth/replication/protocol.hpp"
#include "router.hpp"

namespace berth::http {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string join(const std::vector<std::string>& parts, std::size_t count) {
    std::string out;
    for (std::size_t i = 0; i < count; ++i) {
        if (i) out += '/';
        out += parts[i];
    }
    return out;
}

Route route_v2(const std::vector<std::string>& s) {
    const std::size_t n = s.size();
    if (n == 0 || (n == 1 && s[0].empty())) return {RouteKind::base, {}, {}};
    if (n == 1 && s[0] == "_catalog") return {RouteKind::catalog, {}, {}};
    if (n >= 3 && s[n - 2] == "tags" && s[n - 1] == "list") return {RouteKind::tags, join(s, n - 2), {}};
    // A repository name has at least one component before blobs/uploads.
    if (n >= 4 && s[n - 3] == "blobs" && s[n - 2] == "uploads") {
        if (s[n - 1].empty()) return {RouteKind::upload_start, join(s, n - 3), {}};
        return {RouteKind::upload, join(s, n - 3), s[n - 1]};
    }
    if (n >= 3 && s[n - 2] == "blobs" && s[n - 1] == "uploads") return {RouteKind::upload_start, join(s, n - 2), {}};
    if (n >= 3 && s[n - 2] == "manifests") return {RouteKind::manifest, join(s, n - 2), s[n - 1]};
    if (n >= 3 && s[n - 2] == "blobs") return {RouteKind::blob, join(s, n - 2), s[n - 1]};
    if (n >= 3 && s[n - 2] == "referrers") return {RouteKind::referrers, join(s, n - 2), s[n - 1]};
    return {};
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
    auto path = target.substr(0, question);
    Target out;
    if (question != std::string_view::npos) {
        out.query = Query::parse(target.substr(question + 1));
        out.raw_query = std::string(target.substr(question));
    }

    if (path == "/healthz") out.route.kind = RouteKind::healthz;
    else if (path == "/readyz") out.route.kind = RouteKind::readyz;
    else if (path == "/metrics") out.route.kind = RouteKind::metrics;
    else if (path == "/auth/token") out.route.kind = RouteKind::token;
    else if (path == usage_path) out.route.kind = RouteKind::usage;
    else if (path == lineage_path) out.route.kind = RouteKind::lineage;
    else if (path == backup_path) out.route.kind = RouteKind::backup;
    else if (path == access_path) out.route = {RouteKind::access, out.query.get("repository").value_or(""), {}};
    else if (path == ui_path) out.route = {RouteKind::ui, {}, {}};
    else if (path.starts_with(std::string(ui_path) + "/"))
        out.route = {RouteKind::ui, {}, "/" + std::string(path.substr(ui_path.size() + 1))};
    else if (path.starts_with(replication::protocol::prefix))
        out.route = {RouteKind::peer, {}, std::string(path.substr(replication::protocol::prefix.size()))};
    else if (path == "/v2") out.route.kind = RouteKind::base;
    else if (path.starts_with("/v2/")) {
        std::vector<std::string> segments;
        auto rest = path.substr(4);
        while (true) {
            auto slash = rest.find('/');
            auto decoded = percent_decode(rest.substr(0, slash), false);
            if (!decoded) return std::nullopt;
            segments.push_back(std::move(*decoded));
            if (slash == std::string_view::npos) break;
            rest = rest.substr(slash + 1);
        }
        out.route = route_v2(segments);
    }
    return out;
}

void require_valid_parts(const Route& route, bool put) {
    using oci::Error;
    using oci::ErrorCode;
    if (!route_spec(route.kind).repository) return;
    if (!oci::valid_repository_name(route.name))
        throw Error(ErrorCode::name_invalid, "invalid repository name", route.name.substr(0, 300));
    const auto& reference = route.reference;
    switch (route.kind) {
        case RouteKind::manifest:
            if (reference.find(':') != std::string::npos) oci::Digest::parse_or_throw(reference);
            else if (!oci::valid_tag(reference) && put)
                throw Error(ErrorCode::tag_invalid, "invalid tag", reference.substr(0, 200));
            else if (!oci::valid_tag(reference))
                throw Error(ErrorCode::manifest_unknown, "manifest unknown", reference.substr(0, 200));
            break;
        case RouteKind::blob:
        case RouteKind::referrers: oci::Digest::parse_or_throw(reference); break;
        case RouteKind::upload:
            if (!oci::valid_upload_id(reference)) throw Error(ErrorCode::blob_upload_unknown, "upload unknown");
            break;
        default: break;
    }
}

std::string forwarded_upload_target(const Target& target) {
    auto path = oci::path::upload(target.route.name, target.route.reference);
    if (auto digest = target.query.get("digest")) path += "?digest=" + net::query_escape(*digest);
    return path;
}

namespace {

using enum Needs;
using K = RouteKind;
// clang-format off
constexpr RouteSpec routes[] = {
    // kind             label           repository authenticated quick_reads read  del   write
    {K::base,           "base",         false,     true,         true,       none, none, none},
    {K::catalog,        "catalog",      false,     true,         true,       pull, pull, pull},
    {K::tags,           "tags",         true,      true,         true,       pull, pull, pull},
    {K::manifest,       "manifest",     true,      true,         true,       pull, del,  push},
    {K::blob,           "blob",         true,      true,         true,       pull, del,  push},
    {K::upload_start,   "upload_start", true,      true,         true,       push, push, push},
    {K::upload,         "upload",       true,      true,         true,       push, push, push},
    {K::referrers,      "referrers",    true,      true,         true,       pull, pull, pull},
    {K::healthz,        "healthz",      false,     false,        true,       none, none, none},
    {K::readyz,         "readyz",       false,     false,        true,       none, none, none},
    {K::metrics,        "metrics",      false,     false,        true,       none, none, none},
    {K::token,          "token",        false,     false,        false,      none, none, none},
    {K::peer,           "peer",         false,     false,        false,      none, none, none},
    {K::usage,          "usage",        false,     true,         false,      pull, pull, pull},
    {K::lineage,        "lineage",      false,     true,         false,      pull, pull, pull},
    {K::backup,         "backup",       false,     false,        false,      none, none, none},
    {K::access,         "access",       true,      true,         true,       pull, pull, pull},
    // The UI signs its callers in itself (a session cookie, or /v2/'s credentials) and filters what it shows.
    {K::ui,             "ui",           false,     false,        false,      none, none, none},
    {K::unknown,        "unknown",      false,     false,        true,       none, none, none},
};
// clang-format on

constexpr bool in_enum_order() {
    for (std::size_t i = 0; i < std::size(routes); ++i)
        if (static_cast<std::size_t>(routes[i].kind) != i) return false;
    return std::size(routes) == static_cast<std::size_t>(RouteKind::unknown) + 1;
}
static_assert(in_enum_order(), "one row per RouteKind, in the enum's order");

}  // namespace

const RouteSpec& route_spec(RouteKind kind) { return routes[static_cast<std::size_t>(kind)]; }

}  // namespace berth::http
