// The /_berth/v1/ API that replicas use among themselves.
#include <fcntl.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "berth/replication/replicator.hpp"
#include "handlers.hpp"

namespace berth::http {
namespace {

using oci::Error;
using oci::ErrorCode;

Plan answer(Response response) {
    Plan plan;
    plan.blocking = false;
    plan.finish = [response = std::move(response)](std::string&, std::uint64_t) mutable { return std::move(response); };
    return plan;
}

Response json_body(std::string body) {
    Response response{200, {}, std::move(body), {}, {}};
    response.set("Content-Type", "application/json");
    return response;
}

std::uint64_t number(const Query& query, const char* key, std::uint64_t fallback) {
    auto text = query.get(key);
    std::uint64_t value = fallback;
    if (text) std::from_chars(text->data(), text->data() + text->size(), value);
    return value;
}

[[noreturn]] void not_found() { throw Error(ErrorCode::blob_unknown, "not held by this replica"); }

}  // namespace

Plan plan_peer_request(replication::Replicator& replicator, Request& request) {
    const auto& path = request.target.route.reference;
    const auto& query = request.target.query;
    const bool get = request.method == Method::get || request.method == Method::head;
    if (get && path == "log")
        return answer(json_body(replicator.log_json(number(query, "after", 0), number(query, "limit", 500))));
    if (get && path == "snapshot") return answer(json_body(replicator.snapshot_json()));
    if (get && path == "status") return answer(json_body(replicator.status_json()));
    if (get && path.starts_with("blobs/")) {
        auto blob = replicator.blob_file(path.substr(6));
        if (!blob) not_found();
        Response response{200, {}, {}, {}, {}};
        response.set("Content-Type", "application/octet-stream");
        int fd = ::open(blob->path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) not_found();
        response.file = FileBody{fd, 0, blob->size};
        return answer(std::move(response));
    }
    if (get && path.starts_with("manifests/")) {
        auto content = replicator.manifest_content(query.get("repo").value_or(""), path.substr(10));
        if (!content) not_found();
        Response response{200, {}, std::move(content->second), {}, {}};
        response.set("Content-Type", content->first);
        return answer(std::move(response));
    }
    if (get && path == "record") {
        for (auto kind : {"link", "manifest", "tag"})
            if (auto key = query.get(kind)) {
                auto record = replicator.record_json(query.get("repo").value_or(""), kind, *key);
                if (!record) not_found();
                return answer(json_body(*record));
            }
        throw Error(ErrorCode::bad_request, "record needs link, manifest or tag");
    }
    if (request.method == Method::post && path == "apply") {
        Plan plan;
        plan.body = Plan::Body::buffer;
        plan.buffer_limit = 16 << 20;
        plan.finish = [&replicator, origin = request.peer_origin](std::string& body, std::uint64_t) {
            auto doc = nlohmann::json::parse(body, nullptr, false);
            if (!doc.is_object() || !doc.contains("events") || !doc["events"].is_array())
                throw Error(ErrorCode::bad_request, "apply needs {\"events\":[...]}");
            std::vector<storage::Event> events;
            for (auto& item : doc["events"]) {
                auto event = storage::Event::parse(item.dump());
                if (!event) throw Error(ErrorCode::bad_request, "malformed event");
                events.push_back(std::move(*event));
            }
            replicator.apply_pushed(origin, events);
            return json_body("{}");
        };
        return plan;
    }
    throw Error(ErrorCode::unsupported, "no such peer operation");
}

}  // namespace berth::http
