#pragma once
// How MetaStore's records and keys are spelled in RocksDB (layout.hpp documents the shapes):
// for the files of MetaStore only.
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <map>
#include <string>
#include <string_view>

#include "berth/storage/layout.hpp"
#include "berth/storage/records.hpp"

namespace berth::storage::meta {

using nlohmann::json;

inline std::string key(const std::string& a, const std::string& b) {
    std::string out;
    out.reserve(a.size() + b.size() + 1);
    out += a;
    out += '\0';
    out += b;
    return out;
}

inline std::string sequence_key(std::uint64_t sequence) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i, sequence >>= 8) out[i] = static_cast<char>(sequence & 0xff);
    return out;
}

inline std::uint64_t sequence_of(const rocksdb::Slice& key) {
    std::uint64_t out = 0;
    for (std::size_t i = 0; i < 8 && i < key.size(); ++i) out = (out << 8) | static_cast<unsigned char>(key[i]);
    return out;
}

inline void check(const rocksdb::Status& status, const char* what) {
    if (!status.ok()) throw std::runtime_error(std::string(what) + ": " + status.ToString());
}

inline json stamp_json(const Stamp& stamp) { return {{"c", stamp.clock}, {"r", stamp.replica}}; }
inline Stamp stamp_of(const json& j) { return {j.at("c").get<std::uint64_t>(), j.at("r").get<std::string>()}; }

inline std::string encode(const TagRecord& r) { return json{{"d", r.digest}, {"s", stamp_json(r.stamp)}}.dump(); }
// Listing tags only needs to tell tombstones apart, without parsing each
// record: the encoding above always starts with the digest, empty for a tombstone.
inline bool tombstone(std::string_view encoded_tag) { return encoded_tag.starts_with(R"({"d":"")"); }
inline TagRecord decode_tag(std::string_view v) {
    auto j = json::parse(v);
    return {j.at("d").get<std::string>(), stamp_of(j.at("s"))};
}

// Header JSON, a NUL, then the manifest bytes untouched.
inline std::string encode(const ManifestRecord& r) {
    json header = {{"t", r.media_type},
                   {"sub", r.subject},
                   {"ref", r.referrer_json},
                   {"s", stamp_json(r.stamp)},
                   {"del", r.deleted}};
    if (r.pushed) header["p"] = r.pushed;
    std::string out = header.dump();
    out += '\0';
    out += r.bytes;
    return out;
}
inline ManifestRecord decode_manifest(const std::string& v) {
    auto nul = v.find('\0');
    auto j = json::parse(v.substr(0, nul));
    ManifestRecord r{
        j.at("t").get<std::string>(), j.at("sub").get<std::string>(), j.at("ref").get<std::string>(), v.substr(nul + 1),
        stamp_of(j.at("s")),          j.at("del").get<bool>()};
    r.pushed = j.value("p", std::uint64_t{0});
    return r;
}

// Whether an encoded manifest record is live, and its stamp's clock, reading its header only (usage
// counts millions).
struct ManifestHeader {
    bool live;
    std::uint64_t clock;
};
inline ManifestHeader manifest_header(std::string_view v) {
    auto j = json::parse(v.substr(0, v.find('\0')));
    return {!j.at("del").get<bool>(), j.at("s").at("c").get<std::uint64_t>()};
}

inline std::string encode(const LinkRecord& r) { return json{{"s", stamp_json(r.stamp)}, {"del", r.deleted}}.dump(); }
inline LinkRecord decode_link(const std::string& v) {
    auto j = json::parse(v);
    return {stamp_of(j.at("s")), j.at("del").get<bool>()};
}

inline std::string encode(const UploadRecord& r) { return json{{"repo", r.repository}, {"alg", r.algorithm}}.dump(); }
inline UploadRecord decode_upload(std::string_view v) {
    auto j = json::parse(v);
    return {j.at("repo").get<std::string>(), j.at("alg").get<std::string>()};
}

// The settings value log_compacted: {"<origin>": clock}. What does not parse reads as nothing.
inline std::string encode_clocks(const std::map<std::string, std::uint64_t>& clocks) { return json(clocks).dump(); }
inline std::map<std::string, std::uint64_t> decode_clocks(const std::string& v) {
    std::map<std::string, std::uint64_t> out;
    auto j = json::parse(v, nullptr, false);
    if (!j.is_object()) return out;
    for (auto& [origin, clock] : j.items())
        if (clock.is_number_unsigned()) out[origin] = clock.get<std::uint64_t>();
    return out;
}

inline std::uint64_t wall_ms() {
    using namespace std::chrono;
    return static_cast<std::uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

}  // namespace berth::storage::meta
