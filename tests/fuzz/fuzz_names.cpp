// Repository names, tags and digests: the grammar checks against the spec's
// regular expressions (std::regex, as an independent reference), and the
// invariants the rest of berth leans on (names are safe path components,
// digests round-trip through str()).
#include <cstddef>
#include <cstdint>
#include <regex>
#include <string>
#include <string_view>

#include "berth/oci/digest.hpp"
#include "berth/oci/error.hpp"
#include "berth/oci/names.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace berth::oci;

const std::regex& name_regex() {
    static const std::regex re(R"([a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*)",
                               std::regex::ECMAScript | std::regex::optimize);
    return re;
}

const std::regex& tag_regex() {
    static const std::regex re(R"([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127})", std::regex::ECMAScript | std::regex::optimize);
    return re;
}

void check_name(std::string_view text) {
    const bool valid = valid_repository_name(text);
    if (valid) {
        FUZZ_CHECK(!text.empty() && text.size() <= max_name_length);
        FUZZ_CHECK(text.find("..") == std::string_view::npos);
        FUZZ_CHECK(text.find("//") == std::string_view::npos);
        FUZZ_CHECK(text.front() != '/' && text.back() != '/');
        for (char c : text) {
            FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
            FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
                       c == '/');
        }
        // No component is "." or "..", or starts with a separator.
        std::size_t start = 0;
        while (start <= text.size()) {
            auto slash = text.find('/', start);
            auto part = text.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
            FUZZ_CHECK(!part.empty() && part != "." && part != "..");
            FUZZ_CHECK(part.front() != '.' && part.front() != '_' && part.front() != '-');
            if (slash == std::string_view::npos) break;
            start = slash + 1;
        }
    }
    // libstdc++'s std::regex recurses per character; keep the reference to
    // inputs a little past the length limit.
    if (text.size() <= max_name_length + 8) {
        const bool reference =
            text.size() <= max_name_length && std::regex_match(text.begin(), text.end(), name_regex());
        FUZZ_CHECK(valid == reference);
    }
}

void check_tag(std::string_view text) {
    const bool valid = valid_tag(text);
    if (valid) {
        FUZZ_CHECK(!text.empty() && text.size() <= max_tag_length);
        FUZZ_CHECK(text.find('/') == std::string_view::npos && text.find(':') == std::string_view::npos);
        FUZZ_CHECK(text.front() != '.' && text.front() != '-');
    }
    if (text.size() <= max_tag_length + 8) FUZZ_CHECK(valid == std::regex_match(text.begin(), text.end(), tag_regex()));
}

void check_digest(std::string_view text) {
    auto digest = Digest::parse(text);
    bool threw = false;
    try {
        auto strict = Digest::parse_or_throw(text);
        FUZZ_CHECK(digest && strict == *digest);
    } catch (const Error& error) {
        threw = true;
        FUZZ_CHECK(error.code() == ErrorCode::digest_invalid);
    }
    FUZZ_CHECK(threw == !digest.has_value());
    if (!digest) return;
    // Parsing is exact: the digest prints back as the very text it came from.
    const auto str = digest->str();
    FUZZ_CHECK(str == text);
    auto again = Digest::parse(str);
    FUZZ_CHECK(again && *again == *digest);
    FUZZ_CHECK(digest->hex().size() == hex_length(digest->algorithm()));
    for (char c : digest->hex()) FUZZ_CHECK((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    FUZZ_CHECK(parse_algorithm(algorithm_name(digest->algorithm())) == digest->algorithm());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check_name(text);
    check_tag(text);
    check_digest(text);
    // A reference as a manifest route sees it: "name:tag" or "name@digest".
    if (auto at = text.rfind('@'); at != std::string_view::npos) {
        check_name(text.substr(0, at));
        check_digest(text.substr(at + 1));
    } else if (auto colon = text.rfind(':'); colon != std::string_view::npos) {
        check_name(text.substr(0, colon));
        check_tag(text.substr(colon + 1));
    }
    // What berth computes is always something it can parse back.
    for (auto algorithm : {DigestAlgorithm::sha256, DigestAlgorithm::sha512}) {
        auto digest = Digest::of(algorithm, text);
        auto parsed = Digest::parse(digest.str());
        FUZZ_CHECK(parsed && *parsed == digest);
    }
    return 0;
}
