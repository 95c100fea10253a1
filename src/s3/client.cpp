// The S3 client (client.hpp): requests signed and sent; answers read in answers.cpp and xml.cpp.
#include "berth/s3/client.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

#include "answers.hpp"
#include "berth/net/host_port.hpp"
#include "berth/net/reach.hpp"
#include "berth/oci/digest.hpp"
#include "dates.hpp"
#include "xml.hpp"

namespace berth::s3 {
namespace {

// A body goes out in pieces of this much, each within the HTTP client's idle timeout.
constexpr std::size_t write_piece = 1 << 20;
constexpr std::size_t read_piece = 256 << 10;
constexpr std::uint64_t min_part_size = 5ull << 20, max_part_size = 5ull << 30;

std::string sha256_hex(std::span<const char> data) {
    return oci::Digest::of(oci::DigestAlgorithm::sha256, {data.data(), data.size()}).hex();
}

// The query as sent: encoded as signed, a bare name for a sub-resource ("?uploads").
std::string wire_query(const Query& query) {
    std::string out;
    for (const auto& [name, value] : query) {
        out += out.empty() ? "?" : "&";
        out += uri_encode(name, false);
        if (!value.empty()) out += "=" + uri_encode(value, false);
    }
    return out;
}

// S3's bucket names (3..63 of a-z 0-9 . -, a letter or digit at each end): one label or more of
// a DNS name, which virtual-host style needs, and safe in a path.
bool valid_bucket(const std::string& bucket) {
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    return bucket.size() >= 3 && bucket.size() <= 63 && alnum(bucket.front()) && alnum(bucket.back()) &&
           std::all_of(bucket.begin(), bucket.end(), [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

// An IP address has no subdomain to put a bucket in.
bool is_address(const std::string& host) {
    return host.find(':') != std::string::npos ||
           std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

void check(const Config& config) {
    auto refuse = [](const std::string& why) { throw std::invalid_argument("s3: " + why); };
    if (!valid_bucket(config.bucket)) refuse("bucket \"" + config.bucket + "\" is not an S3 bucket name");
    if (config.region.empty()) refuse("no region");
    if (config.access_key.empty() || config.secret_key.empty()) refuse("no access key or secret key");
    if (config.part_size < min_part_size || config.part_size > max_part_size)
        refuse("part_size must be 5 MiB to 5 GiB, not " + std::to_string(config.part_size));
    if (config.answer_timeout <= std::chrono::milliseconds(0)) refuse("answer_timeout must be positive");
}

std::string_view trim_left(std::string_view text) {
    while (!text.empty() &&
           (text.front() == ' ' || text.front() == '\t' || text.front() == '\r' || text.front() == '\n'))
        text.remove_prefix(1);
    return text;
}

}  // namespace

Client::Client(Config config, net::Client& http) : config_(std::move(config)), http_(http) {
    check(config_);
    const auto url = net::parse_url(config_.endpoint);
    auto host = url.address.host;
    if (!config_.path_style) {
        if (is_address(host)) throw std::invalid_argument("s3: virtual-host style needs a host name, not " + host);
        host = config_.bucket + "." + host;
    }
    origin_.address = {host, url.address.port};
    origin_.tls.enabled = url.tls;
    origin_.tls.ca_file = config_.ca_file;
    scheme_ = url.tls ? "https" : "http";
    // Signed as clients name it: without the scheme's own port.
    host_ = origin_.address.str();
    if (url.address.port == (url.tls ? "443" : "80")) host_.erase(host_.rfind(':'));
    base_path_ = url.path_prefix + (config_.path_style ? "/" + config_.bucket : "");
}

std::string Client::object_path(const std::string& key) const {
    if (key.empty() || key.size() > 1024) throw std::invalid_argument("s3: an object key is 1 to 1024 bytes");
    return base_path_ + "/" + key;
}

std::string Client::bucket_path() const { return base_path_.empty() ? "/" : base_path_; }

RequestToSign Client::to_sign(const std::string& method, const std::string& path, const Query& query,
                              std::string payload_hash, net::Headers headers) const {
    return {method,
            path,
            query,
            std::move(headers),
            std::move(payload_hash),
            std::chrono::system_clock::now(),
            config_.region,
            "s3",
            {config_.access_key, config_.secret_key}};
}

net::RequestHead Client::signed_head(const std::string& method, const std::string& path, const Query& query,
                                     std::string payload_hash, const net::Headers& headers) const {
    auto request =
        to_sign(method, path, query, payload_hash, {{"Host", host_}, {"x-amz-content-sha256", payload_hash}});
    request.headers.emplace_back("x-amz-date", amz_date(request.time));
    for (const auto& header : headers) request.headers.push_back(header);
    net::RequestHead head;
    head.method = method;
    head.target = encode_path(path) + wire_query(query);
    head.headers = request.headers;
    head.headers.emplace_back("Authorization", authorization(request));
    head.header_timeout = config_.answer_timeout;
    return head;
}

net::Response Client::exchange(const std::string& method, const std::string& path, const Query& query,
                               const std::string& body, const net::Headers& headers) {
    net::reach(s3_party);
    auto head = signed_head(method, path, query, sha256_hex(body), headers);
    head.has_body = method == "PUT" || method == "POST";  // Content-Length: 0 when empty
    try {
        return http_.request(origin_, std::move(head), body, max_answer_bytes);
    } catch (const net::Error& error) {
        throw transport_failure(error, method + " " + path);
    }
}

Client::Opened Client::send(net::RequestHead head, std::span<const char> body, const std::string& what) {
    net::reach(s3_party);
    for (bool again = true;; again = false) {
        try {
            Opened opened{http_.open(origin_, head)};
            if (head.has_body) {
                for (std::size_t at = 0; at < body.size(); at += write_piece)
                    opened.exchange->write(body.subspan(at, std::min(write_piece, body.size() - at)));
                opened.exchange->end_request();
            }
            opened.head = &opened.exchange->read_head();
            return opened;
        } catch (const net::Error& error) {
            // A pooled connection S3 closed while it sat idle fails before any answer; every
            // request sent this way may go again, on another connection.
            if (again && error.kind() == net::Error::Kind::closed) continue;
            throw transport_failure(error, what);
        }
    }
}

std::optional<ObjectInfo> Client::head(const std::string& key) {
    const auto path = object_path(key);
    const auto answer = exchange("HEAD", path, {});
    if (answer.status == 404) return std::nullopt;
    if (answer.status != 200) throw failure(answer.status, answer.body, "HEAD " + path);
    const auto modified = parse_http_date(answer.header("last-modified"));
    // Without either the object's age or size the store would guess, and a guessed age may delete it.
    if (!answer.content_length || !modified)
        throw Error(answer.status, "", "HEAD " + path + ": no Content-Length or Last-Modified", false);
    return ObjectInfo{*answer.content_length, *modified};
}

void Client::put(const std::string& key, std::span<const char> data) {
    const auto path = object_path(key);
    auto head = signed_head("PUT", path, {}, sha256_hex(data));
    head.has_body = true;
    head.content_length = data.size();
    auto opened = send(std::move(head), data, "PUT " + path);
    const auto body = small_body(*opened.exchange);
    if (opened.head->status != 200) throw failure(opened.head->status, body, "PUT " + path);
}

std::uint64_t Client::get(const std::string& key, std::uint64_t offset, std::uint64_t length, const Sink& sink) {
    const auto path = object_path(key);
    if (length == 0) return 0;
    auto range = "bytes=" + std::to_string(offset) + "-";
    if (length <= std::numeric_limits<std::uint64_t>::max() - offset) range += std::to_string(offset + length - 1);
    auto opened =
        send(signed_head("GET", path, {}, std::string(empty_payload_sha256), {{"Range", range}}), {}, "GET " + path);
    return deliver(opened, path, offset, length, sink);
}

std::uint64_t Client::deliver(Opened& opened, const std::string& path, std::uint64_t offset, std::uint64_t length,
                              const Sink& sink) {
    const auto& head = *opened.head;
    const auto what = "GET " + path;
    if (head.status == 416) return 0;  // the object ends at or before offset
    if (head.status != 200 && head.status != 206) throw failure(head.status, small_body(*opened.exchange), what);
    const auto count = bytes_to_read(head, offset, length, what);
    std::vector<char> buffer(std::max<std::uint64_t>(1, std::min<std::uint64_t>(count, read_piece)));
    std::uint64_t delivered = 0;
    try {
        while (delivered < count) {
            const auto n =
                opened.exchange->read_body({buffer.data(), std::min<std::uint64_t>(buffer.size(), count - delivered)});
            if (n == 0)
                throw Error(head.status, "",
                            what + ": the answer ended after " + std::to_string(delivered) + " of " +
                                std::to_string(count) + " bytes",
                            true);
            sink(buffer.data(), n);
            delivered += n;
        }
        // The answer's end, so its connection goes back to the pool; a whole object read only
        // in part is left, and its connection closed.
        if ((head.status == 206 || count == head.content_length) && opened.exchange->read_body(buffer) != 0)
            throw Error(head.status, "", what + ": more than the " + std::to_string(count) + " bytes announced", false);
    } catch (const net::Error& error) {
        throw transport_failure(error, what);
    }
    return delivered;
}

void Client::remove(const std::string& key) {
    const auto path = object_path(key);
    const auto answer = exchange("DELETE", path, {});
    if (answer.status == 200 || answer.status == 204) return;
    auto error = failure(answer.status, answer.body, "DELETE " + path);
    if (error.code() != "NoSuchKey") throw error;
}

ObjectPage Client::list(const std::string& prefix, const std::string& continuation, int max_keys) {
    if (max_keys < 1 || max_keys > 1000) throw std::invalid_argument("s3: max_keys is 1 to 1000");
    Query query{{"list-type", "2"}, {"max-keys", std::to_string(max_keys)}};
    if (!prefix.empty()) query.emplace_back("prefix", prefix);
    if (!continuation.empty()) query.emplace_back("continuation-token", continuation);
    const auto what = "list " + prefix;
    const auto answer = exchange("GET", bucket_path(), query);
    if (answer.status != 200) throw failure(answer.status, answer.body, what);
    return parsed(answer.status, answer.body, what, [](auto body) { return xml::parse_object_page(body); });
}

std::string Client::create_multipart(const std::string& key) {
    const auto path = object_path(key);
    const auto what = "create multipart upload " + path;
    const auto answer = exchange("POST", path, {{"uploads", ""}});
    if (answer.status != 200) throw failure(answer.status, answer.body, what);
    return parsed(answer.status, answer.body, what, [](auto body) { return xml::parse_upload_id(body); });
}

std::string Client::upload_part(const std::string& key, const std::string& upload_id, int number,
                                std::span<const char> data) {
    const auto path = object_path(key);
    if (upload_id.empty() || number < 1 || number > 10000)
        throw std::invalid_argument("s3: a part needs an upload id and a number 1 to 10000");
    const auto what = "upload part " + std::to_string(number) + " of " + path;
    auto head =
        signed_head("PUT", path, {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}}, sha256_hex(data));
    head.has_body = true;
    head.content_length = data.size();
    auto opened = send(std::move(head), data, what);
    const auto body = small_body(*opened.exchange);
    if (opened.head->status != 200) throw failure(opened.head->status, body, what);
    auto etag = opened.head->header("etag");
    if (etag.empty()) throw Error(opened.head->status, "", what + ": no ETag", false);
    return etag;
}

void Client::complete_multipart(const std::string& key, const std::string& upload_id, const std::vector<Part>& parts) {
    const auto path = object_path(key);
    const auto what = "complete multipart upload " + path;
    require_done(exchange("POST", path, {{"uploadId", upload_id}}, xml::complete_multipart_body(parts)), what);
}

void Client::copy(const std::string& from, const std::string& to) {
    const auto path = object_path(to);
    const auto source = encode_path("/" + config_.bucket + "/" + from);
    require_done(
        exchange("PUT", path, {}, {}, {{"x-amz-copy-source", source}, {"x-amz-metadata-directive", "REPLACE"}}),
        "copy " + from + " to " + path);
}

// S3 may keep the connection alive with blanks while it works (assembling parts, copying), then
// tell of a failure in an <Error> after its 200.
void Client::require_done(const net::Response& answer, const std::string& what) {
    if (answer.status != 200) throw failure(answer.status, answer.body, what);
    const auto document = trim_left(answer.body);
    if (document.empty()) return;
    if (parsed(answer.status, document, what, [](auto body) { return xml::root_name(body); }) == "Error")
        throw failure(answer.status, document, what);
}

void Client::abort_multipart(const std::string& key, const std::string& upload_id) {
    const auto path = object_path(key);
    const auto answer = exchange("DELETE", path, {{"uploadId", upload_id}});
    if (answer.status == 200 || answer.status == 204) return;
    auto error = failure(answer.status, answer.body, "abort multipart upload " + path);
    if (error.code() != "NoSuchUpload") throw error;
}

UploadPage Client::list_multipart_uploads(const std::string& prefix, const UploadMarkers& after) {
    Query query{{"uploads", ""}, {"max-uploads", "1000"}};
    if (!prefix.empty()) query.emplace_back("prefix", prefix);
    if (!after.key_marker.empty()) query.emplace_back("key-marker", after.key_marker);
    if (!after.upload_id_marker.empty()) query.emplace_back("upload-id-marker", after.upload_id_marker);
    const auto what = "list multipart uploads " + prefix;
    const auto answer = exchange("GET", bucket_path(), query);
    if (answer.status != 200) throw failure(answer.status, answer.body, what);
    return parsed(answer.status, answer.body, what, [](auto body) { return xml::parse_upload_page(body); });
}

std::string Client::presign_get(const std::string& key, std::chrono::seconds expires) const {
    const auto path = object_path(key);
    const auto request = to_sign("GET", path, {}, std::string(unsigned_payload), {{"Host", host_}});
    return scheme_ + "://" + host_ + encode_path(path) + "?" + presigned_query(request, expires);
}

}  // namespace berth::s3
