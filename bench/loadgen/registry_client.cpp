// The registry requests: what each sends, and what its answer must be.
#include "registry_client.hpp"

#include "manifests.hpp"

namespace berth::bench {

namespace {

// Throws OpError unless the answer has one of the `ok` statuses.
void expect(const Response& r, std::initializer_list<int> ok, const std::string& what) {
    for (int s : ok)
        if (r.status == s) return;
    std::string body = r.body.substr(0, 200);
    for (auto& ch : body)
        if (ch == '\n' || ch == '\r') ch = ' ';
    throw OpError(Failure::status, what + ": HTTP " + std::to_string(r.status) + " " + body);
}

// Location header → request target (strip scheme and authority of an absolute URL).
std::string location_target(const Response& r, const std::string& what) {
    std::string loc = r.header("location");
    if (loc.empty()) throw OpError(Failure::status, what + ": no Location header");
    auto scheme = loc.find("://");
    if (scheme != std::string::npos) {
        auto slash = loc.find('/', scheme + 3);
        loc = slash == std::string::npos ? "/" : loc.substr(slash);
    }
    return loc;
}

std::string with_query(const std::string& target, const std::string& kv) {
    return target + (target.find('?') == std::string::npos ? "?" : "&") + kv;
}

}  // namespace

void Client::api_version_check() {
    Request get;
    get.target = "/v2/";
    expect(conn_.request(get), {200}, "GET /v2/");
}

void Client::upload_monolithic(const std::string& repo, const std::string& digest, std::vector<iovec> body,
                               std::uint64_t len) {
    Request post;
    post.method = "POST";
    post.target = "/v2/" + repo + "/blobs/uploads/";
    Response r = conn_.request(post);
    expect(r, {202}, "POST upload");
    Request put;
    put.method = "PUT";
    put.target = with_query(location_target(r, "POST upload"), "digest=" + digest);
    put.headers = "Content-Type: application/octet-stream\r\n";
    put.body = std::move(body);
    put.body_len = len;
    r = conn_.request(put);
    expect(r, {201}, "PUT blob");
}

void Client::upload_post(const std::string& repo, const std::string& digest, std::vector<iovec> body,
                         std::uint64_t len) {
    Request post;
    post.method = "POST";
    post.target = "/v2/" + repo + "/blobs/uploads/?digest=" + digest;
    post.headers = "Content-Type: application/octet-stream\r\n";
    post.body = body;
    post.body_len = len;
    Response r = conn_.request(post);
    if (r.status == 201) return;
    expect(r, {202}, "POST upload ?digest=");
    ++counters_.post_fallbacks;  // single POST not supported: continue with PUT, as the spec says
    Request put;
    put.method = "PUT";
    put.target = with_query(location_target(r, "POST upload ?digest="), "digest=" + digest);
    put.headers = "Content-Type: application/octet-stream\r\n";
    put.body = std::move(body);
    put.body_len = len;
    r = conn_.request(put);
    expect(r, {201}, "PUT blob after POST ?digest=");
}

void Client::upload_chunked(const std::string& repo, const BlobSet& set, const Blob& blob) {
    Request post;
    post.method = "POST";
    post.target = "/v2/" + repo + "/blobs/uploads/";
    Response r = conn_.request(post);
    expect(r, {202}, "POST upload");
    std::string loc = location_target(r, "POST upload");
    for (std::uint64_t off = 0; off < set.size(); off += o_.chunk) {
        std::uint64_t n = std::min(o_.chunk, set.size() - off);
        Request patch;
        patch.method = "PATCH";
        patch.target = loc;
        patch.headers = "Content-Type: application/octet-stream\r\nContent-Range: " + std::to_string(off) + "-" +
                        std::to_string(off + n - 1) + "\r\n";
        patch.body = set.range(blob, off, n);
        patch.body_len = n;
        r = conn_.request(patch);
        expect(r, {202}, "PATCH chunk");
        loc = location_target(r, "PATCH chunk");
    }
    Request put;
    put.method = "PUT";
    put.target = with_query(loc, "digest=" + blob.digest);
    r = conn_.request(put);
    expect(r, {201}, "PUT ?digest= (chunked)");
}

void Client::put_manifest(const std::string& repo, const std::string& tag, const std::string& manifest) {
    Request put;
    put.method = "PUT";
    put.target = "/v2/" + repo + "/manifests/" + tag;
    put.headers = std::string("Content-Type: ") + kManifestType + "\r\n";
    put.body = {iovec{const_cast<char*>(manifest.data()), manifest.size()}};
    put.body_len = manifest.size();
    Response r = conn_.request(put);
    expect(r, {201}, "PUT manifest");
}

std::string Client::get_manifest(const std::string& repo, const std::string& tag) {
    Request get;
    get.target = "/v2/" + repo + "/manifests/" + tag;
    get.headers = std::string("Accept: ") + kManifestType + "\r\n";
    Response r = conn_.request(get);
    expect(r, {200}, "GET manifest");
    return std::move(r.body);
}

void Client::head_manifest(const std::string& repo, const std::string& tag) {
    Request head;
    head.method = "HEAD";
    head.target = "/v2/" + repo + "/manifests/" + tag;
    head.headers = std::string("Accept: ") + kManifestType + "\r\n";
    Response r = conn_.request(head, true);
    expect(r, {200}, "HEAD manifest");
    if (r.header("docker-content-digest").empty())
        throw OpError(Failure::verify, "HEAD manifest: no Docker-Content-Digest");
}

std::uint64_t Client::get_blob(const std::string& repo, const std::string& digest, std::uint64_t expected) {
    Request get;
    get.target = "/v2/" + repo + "/blobs/" + digest;
    get.keep_body = false;
    Response r = conn_.request(get);
    expect(r, {200}, "GET blob");
    if (r.body_bytes != expected)
        throw OpError(Failure::verify,
                      "GET blob: " + std::to_string(r.body_bytes) + " bytes, expected " + std::to_string(expected));
    return r.body_bytes;
}

bool Client::mount_blob(const std::string& repo, const std::string& from, const std::string& digest,
                        const std::string& content) {
    Request post;
    post.method = "POST";
    post.target = "/v2/" + repo + "/blobs/uploads/?mount=" + digest + "&from=" + from;
    Response r = conn_.request(post);
    if (r.status == 201) return true;
    expect(r, {202}, "POST mount");
    Request put;
    put.method = "PUT";
    put.target = with_query(location_target(r, "POST mount"), "digest=" + digest);
    put.headers = "Content-Type: application/octet-stream\r\n";
    put.body = {iovec{const_cast<char*>(content.data()), content.size()}};
    put.body_len = content.size();
    r = conn_.request(put);
    expect(r, {201}, "PUT blob after POST mount");
    return false;
}

std::string Client::tags_list(const std::string& repo) {
    Request get;
    get.target = "/v2/" + repo + "/tags/list";
    Response r = conn_.request(get);
    expect(r, {200}, "GET tags/list");
    return std::move(r.body);
}

}  // namespace berth::bench
