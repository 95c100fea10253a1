// /v2/<name>/manifests/<reference>: GET, HEAD, PUT, DELETE.
#include "berth/net/reach.hpp"
#include "berth/notify/notifications.hpp"
#include "berth/oci/paths.hpp"
#include "berth/registry/registry.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

Plan plan_manifest(Context& context, Request& request) {
    auto& registry = context.services.registry;
    const auto& route = request.target;
    const bool from_peer = request.from_peer;
    switch (request.method) {
        case Method::get:
        case Method::head: {
            // Judging the signatures a pusher attached costs what the pusher chose: on a worker.
            if (!from_peer && registry.signatures_required(route.name)) net::leave_io_thread();
            auto manifest = registry.get_manifest(route.name, route.reference, asker_of(from_peer));
            request.cache = registry::cache_name(manifest.cache);
            if (auto* notifications = context.services.operations.notifications;
                notifications && request.method == Method::get && !from_peer)
                notifications->pulled(route.name, manifest.digest.str());
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
            reach_blob_store(registry);  // its blobs are looked up in the store
            Plan plan;
            plan.body = Plan::Body::buffer;
            plan.buffer_limit = limit;
            auto extra_tags = request.target.query.all("tag");
            plan.finish = [&registry, route, request, content_type = request.content_type, extra_tags](
                              std::string& body, std::uint64_t) {
                auto result = registry.put_manifest(route.name, route.reference, content_type, std::move(body),
                                                    extra_tags, caller_of(request).principal.name);
                audit(request, "push", route.reference + "@" + result.digest.str());
                auto response = status_only(201);
                response.set("Location", oci::path::manifest(route.name, result.digest.str()));
                response.set("Docker-Content-Digest", result.digest.str());
                if (!result.subject.empty()) response.set("OCI-Subject", result.subject);
                if (!extra_tags.empty())
                    for (auto& tag : result.tags) response.set("OCI-Tag", tag);
                return response;
            };
            return plan;
        }
        case Method::del:
            registry.delete_manifest(route.name, route.reference, caller_of(request).principal.name);
            audit(request, "delete manifest", route.reference);
            return immediate(status_only(202));
        default: not_allowed();
    }
}

}  // namespace berth::http
