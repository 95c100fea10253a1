// /v2/<name>/blobs/uploads/[<id>]: starting (POST, mounts, single-POST uploads),
// appending (PATCH), finishing (PUT), asking (GET) and cancelling (DELETE) uploads.
#include "berth/net/reach.hpp"
#include "berth/oci/paths.hpp"
#include "berth/registry/registry.hpp"
#include "berth/registry/upload_id.hpp"
#include "berth/replication/peer_service.hpp"
#include "ranges.hpp"
#include "berth/storage/upload_appender.hpp"
#include "responses.hpp"

namespace berth::http {
// Sends an upload request on to the replica that owns its session (forward.cpp).
Plan plan_forward(const replication::PeerService& peers, const std::string& owner, Request& request,
                  const std::string& method, const std::string& target);
}  // namespace berth::http

namespace berth::http {

using oci::Error;
using oci::ErrorCode;
using registry::Registry;

namespace {

// Distribution reports "0-0" for an empty session too; clients expect that form.
std::string upload_range(std::uint64_t offset) { return "0-" + std::to_string(offset ? offset - 1 : 0); }

Response upload_accepted(int status, const std::string& name, const std::string& id, std::uint64_t offset) {
    auto response = status_only(status);
    response.set("Location", oci::path::upload(name, id));
    response.set("Range", upload_range(offset));
    response.set("Docker-Upload-UUID", id);
    return response;
}

Response blob_created(const std::string& name, const oci::Digest& digest) {
    auto response = status_only(201);
    response.set("Location", oci::path::blob(name, digest.str()));
    response.set("Docker-Content-Digest", digest.str());
    return response;
}

class UploadSink : public BodySink {
public:
    explicit UploadSink(std::unique_ptr<storage::UploadAppender> appender) : appender_(std::move(appender)) {}
    std::span<char> buffer(std::function<void()> resume) override { return appender_->buffer(std::move(resume)); }
    void commit(std::size_t size) override { appender_->commit(size); }
    void finish() override { appender_->finish(); }
    bool when_stored(std::function<void()>& ready) override { return appender_->when_stored(ready); }
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
    plan.sink = std::make_unique<UploadSink>(registry.append(name, id, start, !net::on_io_thread()));
    return plan;
}

// Runs work; planned on an I/O thread, a session that must first have its digest state rebuilt
// from its file (registry::WouldBlock, after a restart or a failed write) is planned again on a
// worker. A new session's file is made where its first bytes are stored.
template <typename Work>
auto off_io_thread_if_blocking(Work&& work) {
    try {
        return work();
    } catch (const registry::WouldBlock&) {
        net::leave_io_thread();
        throw;  // unreachable: WouldBlock comes only from an I/O thread
    }
}

}  // namespace

Plan plan_upload_start(Context& context, Request& request) {
    auto& registry = context.services.registry;
    const auto& route = request.target;
    const auto& query = request.target.query;
    if (request.method != Method::post) not_allowed();
    // Both below may store a blob: first, before a session or a link exists to plan twice.
    if (query.get("mount") || query.get("digest")) {
        net::leave_io_thread();  // a mount touches the blob and commits its link
        reach_blob_store(registry);
    }
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

// Sessions live on the replica that opened them; others pass requests on, with the client's
// credentials, to a path built from the checked name and id and the one query parameter an upload
// takes (forward.cpp).
Plan plan_upload(Context& context, Request& request) {
    auto& registry = context.services.registry;
    const auto& route = request.target;
    auto* peers = context.services.peers;
    const std::string owner(registry::upload_owner(route.reference));
    if (peers && !request.forwarded && owner != peers->self_id())
        if (auto address = peers->address_of(owner)) {
            net::reach(net::peers_party);
            return plan_forward(*peers, *address, request, std::string(method_name(request.method)),
                                forwarded_upload_target(request.target));
        }
    switch (request.method) {
        case Method::get: {
            auto status = off_io_thread_if_blocking(
                [&] { return registry.upload_status(route.name, route.reference, !net::on_io_thread()); });
            return immediate(upload_accepted(204, route.name, status.id, status.offset));
        }
        case Method::patch: {
            auto plan =
                off_io_thread_if_blocking([&] { return append_plan(registry, request, route.name, route.reference); });
            plan.blocking = false;
            plan.finish = [&registry, name = route.name, id = route.reference](std::string&, std::uint64_t offset) {
                if (!registry.keep_upload(name, id))
                    throw Error(ErrorCode::blob_upload_unknown, "upload cancelled while this request appended");
                return upload_accepted(202, name, id, offset);
            };
            return plan;
        }
        case Method::put: {
            auto digest_text = request.target.query.get("digest");
            if (!digest_text) throw Error(ErrorCode::digest_invalid, "digest query parameter is required");
            auto digest = oci::Digest::parse_or_throw(*digest_text);
            reach_blob_store(registry);
            Plan plan;
            if (request.has_body)
                plan = off_io_thread_if_blocking(
                    [&] { return append_plan(registry, request, route.name, route.reference); });
            plan.finish = [&registry, name = route.name, id = route.reference, digest](std::string&, std::uint64_t) {
                return blob_created(name, registry.finish_upload(name, id, digest.str()));
            };
            return plan;
        }
        case Method::del:
            net::leave_io_thread();  // a file removed, a record written
            registry.cancel_upload(route.name, route.reference);
            return immediate(status_only(204));
        default: not_allowed();
    }
}

}  // namespace berth::http
