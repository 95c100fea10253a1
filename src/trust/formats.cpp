#include "formats.hpp"

#include <nlohmann/json.hpp>

#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"

namespace berth::trust {
namespace {

using nlohmann::json;

constexpr std::string_view signature_annotation = "dev.cosignproject.cosign/signature";
constexpr std::string_view in_toto_type = "application/vnd.in-toto+json";
constexpr std::string_view cosign_sign_predicate = "https://sigstore.dev/cosign/sign/v1";
constexpr std::size_t max_signatures = 16;

const json* member(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
}

std::string text_of(const json* value) { return value && value->is_string() ? value->get<std::string>() : ""; }

bool signed_by_any(const Keys& keys, std::string_view data, std::string_view signature) {
    for (auto& key : keys)
        if (key->verify(data, signature)) return true;
    return false;
}

// host[:port]: a first path component with a dot or a port, or localhost (as docker reads names).
bool is_host(std::string_view component) {
    return component.find('.') != std::string_view::npos || component.find(':') != std::string_view::npos ||
           component == "localhost";
}

}  // namespace

std::string pae(std::string_view type, std::string_view payload) {
    return "DSSEv1 " + std::to_string(type.size()) + " " + std::string(type) + " " + std::to_string(payload.size()) +
           " " + std::string(payload);
}

bool names_repository(std::string_view reference, const std::string& repository) {
    if (auto at = reference.find('@'); at != std::string_view::npos) reference = reference.substr(0, at);
    // A tag is after the last ':' that follows the last '/' (before it, a ':' is a host's port).
    const auto last_slash = reference.rfind('/');
    if (auto colon = reference.rfind(':');
        colon != std::string_view::npos && (last_slash == std::string_view::npos || colon > last_slash))
        reference = reference.substr(0, colon);
    if (reference == repository) return true;
    auto slash = reference.find('/');
    if (slash == std::string_view::npos || !is_host(reference.substr(0, slash))) return false;
    auto host = reference.substr(0, slash);
    auto path = reference.substr(slash + 1);
    if (path == repository) return true;
    // Docker Hub's names: index.docker.io/library/x is docker.io/library/x here.
    if (host == "index.docker.io" || host == "registry-1.docker.io")
        return "docker.io/" + std::string(path) == repository;
    return false;
}

std::string judge_simple_signing(std::string_view payload, std::string_view annotations_json, const Keys& keys,
                                 const Expectation& expected) {
    if (payload.size() > max_payload_bytes) return "signature payload too large";
    auto annotations = oci::parse_json(annotations_json);
    auto encoded = text_of(member(annotations, signature_annotation));
    if (encoded.empty()) return "signature layer without " + std::string(signature_annotation);
    auto signature = oci::base64_decode(encoded);
    if (!signature) return "signature annotation is not base64";
    if (!signed_by_any(keys, payload, *signature)) return "signature does not verify with the policy's keys";
    auto doc = oci::parse_json(payload);
    const auto* critical = member(doc, "critical");
    if (!critical) return "signature payload is not simple signing";
    if (text_of(member(*critical, "type")) != "cosign container image signature")
        return "signature payload has another type";
    const auto* image = member(*critical, "image");
    const auto digest = image ? text_of(member(*image, "docker-manifest-digest")) : std::string();
    if (digest != expected.digest.str()) return "signature is for another manifest (" + digest.substr(0, 80) + ")";
    if (expected.match_repository) {
        const auto* identity = member(*critical, "identity");
        const auto reference = identity ? text_of(member(*identity, "docker-reference")) : std::string();
        if (!names_repository(reference, expected.repository))
            return "signature names another repository (" + reference.substr(0, 200) + ")";
    }
    return "";
}

std::string judge_bundle(std::string_view bundle, const Keys& keys, const Expectation& expected) {
    if (bundle.size() > max_bundle_bytes) return "signature bundle too large";
    auto doc = oci::parse_json(bundle);
    if (!text_of(member(doc, "mediaType")).starts_with("application/vnd.dev.sigstore.bundle"))
        return "not a Sigstore bundle";
    const auto* envelope = member(doc, "dsseEnvelope");
    if (!envelope) return "bundle without a DSSE envelope";
    const auto type = text_of(member(*envelope, "payloadType"));
    if (type != in_toto_type) return "bundle payload is not an in-toto statement";
    auto payload = oci::base64_decode(text_of(member(*envelope, "payload")));
    if (!payload) return "bundle payload is not base64";
    const auto* signatures = member(*envelope, "signatures");
    if (!signatures || !signatures->is_array()) return "bundle without signatures";
    const auto signed_bytes = pae(type, *payload);
    bool verified = false;
    for (std::size_t i = 0; i < signatures->size() && i < max_signatures && !verified; ++i) {
        auto signature = oci::base64_decode(text_of(member((*signatures)[i], "sig")));
        verified = signature && signed_by_any(keys, signed_bytes, *signature);
    }
    if (!verified) return "signature does not verify with the policy's keys";
    auto statement = oci::parse_json(*payload);
    if (text_of(member(statement, "predicateType")) != cosign_sign_predicate)
        return "bundle holds an attestation, not a signature";
    const auto* subjects = member(statement, "subject");
    if (!subjects || !subjects->is_array()) return "statement without subject";
    bool named_elsewhere = false;
    for (auto& subject : *subjects) {
        const auto* digests = member(subject, "digest");
        if (!digests || expected.digest.algorithm() != oci::DigestAlgorithm::sha256 ||
            text_of(member(*digests, "sha256")) != expected.digest.hex())
            continue;
        // cosign's bundles bind a digest only: under match_repository, the statement must name
        // the repository itself (its subject's name), or a signature made for one repository
        // would promote the same image into another.
        if (!expected.match_repository || names_repository(text_of(member(subject, "name")), expected.repository))
            return "";
        named_elsewhere = true;
    }
    if (named_elsewhere)
        return "the bundle's statement does not name this repository (match_repository needs a subject name, "
               "or cosign's simple signing)";
    return "signature is for another manifest";
}

}  // namespace berth::trust
