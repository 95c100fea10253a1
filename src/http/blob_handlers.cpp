// /v2/<name>/blobs/<digest>: GET (ranges too), HEAD, DELETE.
#include "berth/registry/registry.hpp"
#include "ranges.hpp"
#include "responses.hpp"

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

Plan plan_blob(Context& context, Request& request) {
    auto& registry = context.services.registry;
    const auto& route = request.target;
    const bool from_peer = request.from_peer;
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
            // A store that hands out its own URLs sends a client there: the bytes skip this replica.
            if (!from_peer)
                if (auto url = registry.blob_redirect(route.name, route.reference)) {
                    auto redirect = status_only(307);
                    redirect.set("Location", *url);
                    // The URL expires: no cache in between may keep it.
                    redirect.set("Cache-Control", "no-store");
                    redirect.set("Docker-Content-Digest", route.reference);
                    request.cache = "redirect";
                    return immediate(std::move(redirect));
                }
            auto [blob, cache] = registry.open_blob(route.name, route.reference, asker_of(from_peer));
            request.cache = registry::cache_name(cache);
            const auto digest = oci::Digest::parse_or_throw(route.reference);
            response.set("Docker-Content-Digest", digest.str());
            response.set("ETag", "\"" + digest.str() + "\"");
            const auto size = blob.size();
            FileBody file{std::make_shared<const storage::OpenBlob>(std::move(blob)), 0, size};
            if (!request.range.empty()) {
                std::optional<ByteRange> range;
                try {
                    range = parse_range(request.range, size);
                } catch (const Error& error) {
                    auto refused = error_response(error);
                    refused.set("Content-Range", "bytes */" + std::to_string(size));
                    return immediate(std::move(refused));
                }
                if (range) {
                    response.status = 206;
                    response.set("Content-Range", "bytes " + std::to_string(range->first) + "-" +
                                                      std::to_string(range->first + range->length - 1) + "/" +
                                                      std::to_string(size));
                    file.offset = range->first;
                    file.length = range->length;
                }
            }
            response.file = std::move(file);
            return immediate(std::move(response));
        }
        case Method::del:
            registry.delete_blob(route.name, route.reference);
            audit(request, "delete blob", route.reference);
            return immediate(status_only(202));
        default: not_allowed();
    }
}

}  // namespace berth::http
