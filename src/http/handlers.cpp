#include "handlers.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "berth/auth/authorizer.hpp"
#include "berth/oci/media_types.hpp"
#include "berth/oci/encoding.hpp"
#include "berth/observe/log.hpp"
#include "berth/observe/metrics.hpp"
#include "berth/registry/reach.hpp"
#include "berth/registry/upload_id.hpp"
#include "berth/registry/registry.hpp"
#include "berth/storage/upload_appender.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/replication/peer_service.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;
namespace protocol = replication::protocol;

// Who a request counts against for per-client limits: the user, else the address.
std::string client_of(const Request& request) {
    return request.principal.empty() ? "ip:" + request.peer_address : "user:" + request.principal;
}

// Pushes and deletes, with who did them, for the audit trail.
void audit(const Request& request, const char* action, const std::string& reference) {
    observe::log("info", "audit",
                 {{"action", action},
                  {"principal", request.principal},
                  {"repository", request.target.route.name},
                  {"reference", reference}});
}

Response status_only(int status) { return Response{status, {}, {}, {}, {}}; }

[[noreturn]] void not_allowed() { throw Error(ErrorCode::unsupported, "method not allowed on this route"); }

std::string upload_location(const std::string& name, const std::string& id) {
    return "/v2/" + name + "/blobs/uploads/" + id;
}

// Distribution reports "0-0" for an empty session too; clients expect that form.
std::string upload_range(std::uint64_t offset) { return "0-" + std::to_string(offset ? offset - 1 : 0); }

Response upload_accepted(int status, const std::string& name, const std::string& id, std::uint64_t offset) {
    auto response = status_only(status);
    response.set("Location", upload_location(name, id));
    response.set("Range", upload_range(offset));
    response.set("Docker-Upload-UUID", id);
    return response;
}

Response blob_created(const std::string& name, const oci::Digest& digest) {
    auto response = status_only(201);
    response.set("Location", "/v2/" + name + "/blobs/" + digest.str());
    response.set("Docker-Content-Digest", digest.str());
    return response;
}

std::optional<std::size_t> page_size(const Query& query) {
    auto n = query.get("n");
    if (!n) return std::nullopt;
    if (n->empty() || n->find_first_not_of("0123456789") != std::string::npos)
        throw Error(ErrorCode::bad_request, "n must be a non-negative integer");
    std::size_t value = 0;
    auto [end, ec] = std::from_chars(n->data(), n->data() + n->size(), value);
    if (ec == std::errc::result_out_of_range) return SIZE_MAX;  // clamped by the registry
    return value;
}

std::string next_link(const std::string& path, std::size_t n, const std::string& last) {
    return "<" + path + "?n=" + std::to_string(n) + "&last=" + net::query_escape(last) + ">; rel=\"next\"";
}

class UploadSink : public BodySink {
public:
    explicit UploadSink(std::unique_ptr<storage::UploadAppender> appender) : appender_(std::move(appender)) {}
    std::span<char> buffer(std::function<void()> resume) override { return appender_->buffer(std::move(resume)); }
    void commit(std::size_t size) override { appender_->commit(size); }
    void finish() override { appender_->finish(); }
    bool when_stored(std::function<void()>& ready) override {
        appender_->when_stored(std::move(ready));
        return true;
    }
    std::uint64_t offset() const override { return appender_->offset(); }

private:
    std::unique_ptr<storage::UploadAppender> appender_;
};

// Beginning an append checks the chunk's place in the session before any byte is read.
Plan append_plan(Registry& registry, const Request& request, const std::string& name, const std::string& id) {
    Plan plan;
    plan.body = Plan::Body::stream;
    std::optional<std::uint64_t> start;
    if (!request.content_range.empty()) {
        auto range = parse_content_range(request.content_range);
        if (!range) throw Error(ErrorCode::blob_upload_invalid, "malformed Content-Range");
        const auto length = range->last - range->first + 1;
        if (request.content_length && *request.content_length != length)
            throw Error(ErrorCode::blob_upload_invalid, "Content-Range does not match Content-Length");
        start = range->first;
        plan.expected_bytes = length;
    }
    plan.sink = std::make_unique<UploadSink>(registry.append(name, id, start));
    return plan;
}

registry::Asker asker_of(bool from_peer) { return from_peer ? registry::Asker::replica : registry::Asker::client; }

Plan manifest_route(Registry& registry, Request& request, bool from_peer) {
    const auto& route = request.target.route;
    switch (request.method) {
        case Method::get:
        case Method::head: {
            auto manifest = registry.get_manifest(route.name, route.reference, asker_of(from_peer));
            request.cache = registry::cache_name(manifest.cache);
            auto response = status_only(200);
            response.set("Content-Type", manifest.media_type);
            response.set("Docker-Content-Digest", manifest.digest.str());
            response.set("ETag", "\"" + manifest.digest.str() + "\"");
            if (request.method == Method::head) response.head_length = manifest.bytes.size();
            else response.body = std::move(manifest.bytes);
            return immediate(std::move(response));
        }
        case Method::put: {
            const auto limit = registry.options().max_manifest_bytes;
            if (request.content_length && *request.content_length > limit)
                throw Error(ErrorCode::payload_too_large, "manifest is larger than the registry accepts");
            Plan plan;
            plan.body = Plan::Body::buffer;
            plan.buffer_limit = limit;
            auto extra_tags = request.target.query.all("tag");
            plan.finish = [&registry, route, request, content_type = request.content_type, extra_tags](
                              std::string& body, std::uint64_t) {
                auto result =
                    registry.put_manifest(route.name, route.reference, content_type, std::move(body), extra_tags);
                audit(request, "push", route.reference + "@" + result.digest.str());
                auto response = status_only(201);
                response.set("Location", "/v2/" + route.name + "/manifests/" + result.digest.str());
                response.set("Docker-Content-Digest", result.digest.str());
                if (!result.subject.empty()) response.set("OCI-Subject", result.subject);
                if (!extra_tags.empty())
                    for (auto& tag : result.tags) response.set("OCI-Tag", tag);
                return response;
            };
            return plan;
        }
        case Method::del:
            registry.delete_manifest(route.name, route.reference);
            audit(request, "delete manifest", route.reference);
            return immediate(status_only(202));
        default: not_allowed();
    }
}

Plan blob_route(Registry& registry, Request& request, bool from_peer) {
    const auto& route = request.target.route;
    switch (request.method) {
        case Method::get:
        case Method::head: {
            auto response = status_only(200);
            response.set("Content-Type", "application/octet-stream");
            response.set("Accept-Ranges", "bytes");
            if (request.method == Method::head) {
                auto blob = registry.stat_blob(route.name, route.reference, asker_of(from_peer));
                request.cache = registry::cache_name(blob.cache);
                response.set("Docker-Content-Digest", blob.digest.str());
                response.set("ETag", "\"" + blob.digest.str() + "\"");
                response.head_length = blob.size;
                return immediate(std::move(response));
            }
            auto [blob, cache] = registry.open_blob(route.name, route.reference, asker_of(from_peer));
            request.cache = registry::cache_name(cache);
            const auto digest = oci::Digest::parse_or_throw(route.reference);
            response.set("Docker-Content-Digest", digest.str());
            response.set("ETag", "\"" + digest.str() + "\"");
            FileBody file{-1, 0, blob.size(), blob.filling()};
            if (!request.range.empty()) {
                std::optional<ByteRange> range;
                try {
                    range = parse_range(request.range, blob.size());
                } catch (const Error& error) {
                    auto refused = error_response(error);
                    refused.set("Content-Range", "bytes */" + std::to_string(blob.size()));
                    return immediate(std::move(refused));
                }
                if (range) {
                    response.status = 206;
                    response.set("Content-Range", "bytes " + std::to_string(range->first) + "-" +
                                                      std::to_string(range->first + range->length - 1) + "/" +
                                                      std::to_string(blob.size()));
                    file.offset = range->first;
                    file.length = range->length;
                }
            }
            file.fd = blob.release();
            response.file = file;
            return immediate(std::move(response));
        }
        case Method::del:
            registry.delete_blob(route.name, route.reference);
            audit(request, "delete blob", route.reference);
            return immediate(status_only(202));
        default: not_allowed();
    }
}

Plan upload_start_route(Registry& registry, Request& request) {
    const auto& route = request.target.route;
    const auto& query = request.target.query;
    if (request.method != Method::post) not_allowed();
    if (auto mount = query.get("mount")) {
        auto result = registry.mount_blob(route.name, *mount, query.get("from").value_or(""), client_of(request));
        if (result.mounted) return immediate(blob_created(route.name, *result.mounted));
        return immediate(upload_accepted(202, route.name, result.upload_id, 0));
    }
    if (auto digest_text = query.get("digest")) {
        // Monolithic upload in one POST: stream the body into a fresh session and close it.
        auto digest = oci::Digest::parse_or_throw(*digest_text);
        auto session =
            registry.start_upload(route.name, std::string(oci::algorithm_name(digest.algorithm())), client_of(request));
        Plan plan;
        try {
            plan = append_plan(registry, request, route.name, session.id);
        } catch (...) {
            registry.cancel_upload(route.name, session.id);
            throw;
        }
        plan.finish = [&registry, name = route.name, id = session.id, digest](std::string&, std::uint64_t) {
            try {
                return blob_created(name, registry.finish_upload(name, id, digest.str()));
            } catch (const Error& error) {
                // A digest mismatch already ended the session; anything else must not leave it behind.
                if (error.code() != ErrorCode::digest_invalid) {
                    try {
                        registry.cancel_upload(name, id);
                    } catch (const Error&) {}
                }
                throw;
            }
        };
        // The client never learns this session's id, so nobody else could finish it.
        plan.abort = [&registry, name = route.name, id = session.id] { registry.cancel_upload(name, id); };
        return plan;
    }
    auto session = registry.start_upload(route.name, query.get("digest-algorithm").value_or(""), client_of(request));
    return immediate(upload_accepted(202, route.name, session.id, 0));
}

Plan upload_route(Registry& registry, Request& request) {
    const auto& route = request.target.route;
    switch (request.method) {
        case Method::get: {
            auto status = registry.upload_status(route.name, route.reference);
            return immediate(upload_accepted(204, route.name, status.id, status.offset));
        }
        case Method::patch: {
            auto plan = append_plan(registry, request, route.name, route.reference);
            plan.blocking = false;
            plan.finish = [&registry, name = route.name, id = route.reference](std::string&, std::uint64_t offset) {
                if (!registry.has_upload(name, id))
                    throw Error(ErrorCode::blob_upload_unknown, "upload cancelled while this request appended");
                return upload_accepted(202, name, id, offset);
            };
            return plan;
        }
        case Method::put: {
            auto digest_text = request.target.query.get("digest");
            if (!digest_text) throw Error(ErrorCode::digest_invalid, "digest query parameter is required");
            auto digest = oci::Digest::parse_or_throw(*digest_text);
            Plan plan;
            if (request.has_body) plan = append_plan(registry, request, route.name, route.reference);
            plan.finish = [&registry, name = route.name, id = route.reference, digest](std::string&, std::uint64_t) {
                return blob_created(name, registry.finish_upload(name, id, digest.str()));
            };
            return plan;
        }
        case Method::del: registry.cancel_upload(route.name, route.reference); return immediate(status_only(204));
        default: not_allowed();
    }
}

// Names and tags are plain ASCII by the spec's grammar, but escape anyway: a
// listing is rendered on every request and nlohmann's DOM costs more than the rest.
void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += "\\u00" + oci::hex(std::string_view(&c, 1));
        } else {
            out += c;
        }
    }
    out += '"';
}

std::string tags_json(const std::string& name, const std::vector<std::string>& tags) {
    std::string out;
    out.reserve(32 + name.size() + tags.size() * 16);
    out += R"({"name":)";
    append_json_string(out, name);
    out += R"(,"tags":[)";
    for (std::size_t i = 0; i < tags.size(); ++i) {
        if (i) out += ',';
        append_json_string(out, tags[i]);
    }
    out += "]}";
    return out;
}

Plan tags_route(Registry& registry, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& name = request.target.route.name;
    auto n = page_size(request.target.query);
    auto last = request.target.query.get("last").value_or("");
    auto page = registry.list_tags(name, n, last);
    auto response = json_response(200, tags_json(name, page.items));
    // A page that may be empty (an upstream's) never links on from nothing.
    if (page.more && !page.items.empty())
        response.set("Link", next_link("/v2/" + name + "/tags/list", page.items.size(), page.items.back()));
    return immediate(std::move(response));
}

Plan catalog_route(Registry& registry, const auth::Authorizer* authorizer, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto n = page_size(request.target.query);
    auto page = registry.catalog(n, request.target.query.get("last").value_or(""));
    // The next page starts after the last name read, whether or not the caller may see it.
    const auto read = page.items.size();
    const auto last_read = page.items.empty() ? std::string() : page.items.back();
    if (authorizer)  // only what the caller may pull; a page may come out shorter than n, even empty
        std::erase_if(page.items, [&](auto& repo) { return !authorizer->may_pull({request.principal}, repo); });
    auto response = json_response(200, nlohmann::json{{"repositories", page.items}}.dump());
    if (page.more) response.set("Link", next_link("/v2/_catalog", read, last_read));
    return immediate(std::move(response));
}

Plan referrers_route(Registry& registry, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    const auto& route = request.target.route;
    auto artifact_type = request.target.query.get("artifactType").value_or("");
    auto response = json_response(200, registry.referrers(route.name, route.reference, artifact_type),
                                  std::string(oci::media_type::oci_index));
    if (!artifact_type.empty()) response.set("OCI-Filters-Applied", "artifactType");
    return immediate(std::move(response));
}

// Namespace usage, a page at a time like the catalog. With authentication,
// a caller sees the namespaces holding a repository it may pull from.
Plan usage_route(Registry& registry, const auth::Authorizer* authorizer, Request& request) {
    if (request.method != Method::get && request.method != Method::head) not_allowed();
    auto page = registry.usage(page_size(request.target.query), request.target.query.get("last").value_or(""));
    // The next page starts after the last namespace read, whether or not the caller may see it.
    const auto read = page.items.size();
    const auto last_read = page.items.empty() ? std::string() : page.items.back().ns;
    if (authorizer && authorizer->enabled())
        std::erase_if(page.items, [&](auto& item) {
            return !registry.any_repository(
                item.ns, [&](const std::string& repo) { return authorizer->may_pull({request.principal}, repo); });
        });
    auto list = nlohmann::json::array();
    for (auto& item : page.items) {
        auto limit = [](std::uint64_t value) { return value ? nlohmann::json(value) : nlohmann::json(nullptr); };
        list.push_back({{"namespace", item.ns},
                        {"used_bytes", item.usage.bytes},
                        {"repositories", item.usage.repositories},
                        {"max_bytes", limit(item.rule ? item.rule->max_bytes : 0)},
                        {"max_repositories", limit(item.rule ? item.rule->max_repositories : 0)}});
    }
    auto response = json_response(200, nlohmann::json{{"namespaces", list}}.dump());
    if (page.more) response.set("Link", next_link(std::string(usage_path), read, last_read));
    return immediate(std::move(response));
}

// What a /v2/ request needs to be allowed, by route and method.
std::vector<auth::Need> needs_of(const Request& request) {
    using auth::Action;
    const auto& route = request.target.route;
    auto need = [&](Action action) { return auth::Need{route.name, action, false}; };
    const bool write = request.method != Method::get && request.method != Method::head;
    switch (route.kind) {
        case RouteKind::catalog:
        case RouteKind::usage: return {auth::Need{{}, Action::pull, true}};
        case RouteKind::tags:
        case RouteKind::referrers: return {need(Action::pull)};
        case RouteKind::manifest:
        case RouteKind::blob:
            if (request.method == Method::del) return {need(Action::del)};
            if (write) return {need(Action::push)};
            return {need(Action::pull)};
        case RouteKind::upload_start: {
            std::vector<auth::Need> needs{need(Action::push)};
            // A mount reads the source repository: that needs pull there too.
            if (auto from = request.target.query.get("from"); from && request.target.query.get("mount"))
                needs.push_back({*from, Action::pull, false});
            return needs;
        }
        case RouteKind::upload: return {need(Action::push)};
        default: return {};
    }
}

bool has_repository(RouteKind kind) {
    return kind == RouteKind::tags || kind == RouteKind::manifest || kind == RouteKind::blob ||
           kind == RouteKind::upload_start || kind == RouteKind::upload || kind == RouteKind::referrers;
}

// A replica that speaks no protocol version this one does is refused, not misunderstood.
void require_compatible_peer(const Request& request) {
    auto versions = protocol::parse_versions(request.peer_versions);
    if (!versions) throw Error(ErrorCode::bad_request, "malformed peer protocol versions");
    if (!protocol::compatible(*versions))
        throw Error(ErrorCode::bad_request, "incompatible peer protocol", protocol::incompatibility(*versions));
}

}  // namespace

Plan plan_v2(Services& services, Request& request);

Plan immediate(Response response) {
    Plan plan;
    plan.blocking = false;
    plan.finish = [response = std::move(response)](std::string&, std::uint64_t) mutable { return std::move(response); };
    return plan;
}

Response json_response(int status, std::string body, std::string content_type) {
    Response response{status, {}, std::move(body), {}, {}};
    response.set("Content-Type", std::move(content_type));
    return response;
}

Response error_response(oci::ErrorCode code, const std::string& message, const std::string& detail) {
    auto response = json_response(oci::http_status(code), oci::error_json(code, message, detail));
    // A rate limit refills, sessions end and replicas come back: worth trying again soon (spec main).
    if (response.status == 429 || response.status == 503) response.set("Retry-After", "1");
    return response;
}

Response error_response(const oci::Error& error) { return error_response(error.code(), error.what(), error.detail()); }

Plan plan_request(Services& services, Request& request) {
    auto& registry = services.registry;
    const auto kind = request.target.route.kind;
    // Registry proxying (spec main): ?ns=HOST names the repository HOST/NAME.
    std::optional<std::string> ns;
    if (has_repository(kind)) {
        ns = request.target.query.get("ns");
        const bool read = request.method == Method::get || request.method == Method::head;
        request.target.route.name = registry.repository_of(request.target.route.name, ns, read);
    }
    if (ns) {
        auto plan = plan_v2(services, request);
        plan.finish = [finish = std::move(plan.finish), ns = *ns](std::string& body, std::uint64_t offset) {
            auto response = finish(body, offset);
            response.set("OCI-Namespace", ns);
            return response;
        };
        return plan;
    }
    return plan_v2(services, request);
}

Plan plan_v2(Services& services, Request& request) {
    auto& registry = services.registry;
    const auto kind = request.target.route.kind;
    // Authenticated like /v2/: the usage endpoint too, though it lives under /_berth/v1/.
    const bool v2 =
        kind == RouteKind::base || kind == RouteKind::catalog || kind == RouteKind::usage || has_repository(kind);
    // A request forwarded by a peer was authorized where it arrived.
    const bool from_peer = request.forwarded && services.peers && services.peers->authorized(request.peer_secret);
    if (from_peer) require_compatible_peer(request);
    if (v2 && services.authorizer && services.authorizer->enabled() && !from_peer) {
        auto decision =
            services.authorizer->check(request.authorization, needs_of(request), request.host, request.secure);
        if (!decision.allowed) {
            auto response =
                error_response(decision.status == 403 ? ErrorCode::denied : ErrorCode::unauthorized, decision.message);
            if (!decision.challenge.empty()) response.set("WWW-Authenticate", decision.challenge);
            return immediate(std::move(response));
        }
        request.principal = decision.principal.name;
    }
    switch (kind) {
        case RouteKind::token: {
            if (!services.authorizer) return immediate(error_response(ErrorCode::name_unknown, "no such route"));
            auto [status, body] = services.authorizer->issue_token(request.authorization,
                                                                   request.target.query.get("service").value_or(""),
                                                                   request.target.query.all("scope"));
            auto response = json_response(status, std::move(body));
            if (status == 401) response.set("WWW-Authenticate", "Basic realm=\"berth\"");
            return immediate(std::move(response));
        }
        case RouteKind::base:
            if (request.method != Method::get && request.method != Method::head) not_allowed();
            return immediate(json_response(200, "{}"));
        case RouteKind::healthz: return immediate(json_response(200, R"({"status":"ok"})"));
        case RouteKind::readyz:
            if (services.peers && !services.peers->ready()) {
                auto problem = services.peers->incompatible_peers();
                return immediate(json_response(
                    503,
                    nlohmann::json{{"status", problem.empty() ? "catching up with peers"
                                                              : "peers speak an incompatible protocol: " + problem}}
                        .dump()));
            }
            return immediate(json_response(200, R"({"status":"ready"})"));
        case RouteKind::metrics:
            return immediate(
                json_response(200, services.metrics ? services.metrics->text() : "", "text/plain; version=0.0.4"));
        case RouteKind::peer:
            if (!services.peers || !services.peers->authorized(request.peer_secret))
                return immediate(error_response(ErrorCode::unauthorized, "peer authentication required"));
            require_compatible_peer(request);
            {
                auto plan = plan_peer_request(*services.peers, request);
                plan.finish = [finish = std::move(plan.finish)](std::string& body, std::uint64_t offset) {
                    auto response = finish(body, offset);
                    response.set(protocol::header::versions, protocol::versions_text());
                    return response;
                };
                return plan;
            }
        case RouteKind::catalog: return catalog_route(registry, services.authorizer, request);
        case RouteKind::usage: return usage_route(registry, services.authorizer, request);
        case RouteKind::tags: return tags_route(registry, request);
        case RouteKind::manifest: return manifest_route(registry, request, from_peer);
        case RouteKind::blob: return blob_route(registry, request, from_peer);
        case RouteKind::upload_start: return upload_start_route(registry, request);
        case RouteKind::upload: {
            // Sessions live on the replica that opened them; others pass requests on.
            const auto& id = request.target.route.reference;
            const std::string owner(registry::upload_owner(id));
            if (services.cluster && !request.forwarded && owner != services.cluster->self_id())
                if (auto address = services.cluster->address_of(owner)) {
                    registry::reach(registry::peers_party);
                    return plan_forward(
                        *services.client, services.cluster->peer_origin(*address), services.cluster->secret(), request,
                        std::string(method_name(request.method)),
                        "/v2/" + request.target.route.name + "/blobs/uploads/" + id + request.target.raw_query);
                }
            return upload_route(registry, request);
        }
        case RouteKind::referrers: return referrers_route(registry, request);
        case RouteKind::unknown: break;
    }
    return immediate(error_response(ErrorCode::name_unknown, "no such route"));
}

}  // namespace berth::http
