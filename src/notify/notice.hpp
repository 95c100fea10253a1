#pragma once
// What an event tells a receiver, read from one change-log event and the manifest it names, and
// its two wire formats. Everything here is the same on every replica that holds the change: the
// id and the sequence come from the change's stamp, never from a replica's own log position.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "berth/notify/options.hpp"
#include "berth/storage/events.hpp"

namespace berth::storage {
class MetaStore;
}

namespace berth::notify {

// rebuild: one image built on the version a base tag moved from (a tag of it, or none).
struct Rebuilt {
    std::string repository, tag, digest;
};

struct Notice {
    std::string id;        // hex of SHA-256 over the change's stamp, kind, repository and key
    std::string sequence;  // sortable as a string, in the order the changes were decided
    Action action = Action::push;
    std::string repository, tag, digest;
    std::string upstream;  // mirrors: the upstream registry (containerd's ?ns=)
    std::string media_type, artifact_type, subject;
    std::uint64_t size = 0;     // of the manifest; 0 when it is gone
    std::string replica;        // that accepted the change
    std::string principal;      // who asked for it ("" for anonymous callers and the server's own)
    std::uint64_t time_ms = 0;  // when it was decided (the stamp's physical time)
    storage::Stamp stamp;
    // pull only: how many times this replica served the manifest, from first_pull_ms to time_ms.
    std::uint64_t pulls = 0, first_pull_ms = 0;
    // rebuild only: the base's previous version, and one page of what was built on it.
    std::string previous;
    std::vector<Rebuilt> images;
    std::size_t page = 0;
    bool last_page = true;
};

// Whether receivers hear of an event, and where it goes in the order they hear them, without
// reading anything more.
bool noticed(const storage::Event& event);
std::string sequence_of(const storage::Event& event);
// The sequence text of the rank-th kind of event of a stamp, about key (a tag or a digest).
std::string sequence_text(const storage::Stamp& stamp, int rank, const std::string& key);
// An id for what identity names: the same wherever and whenever it is computed.
std::string id_of(const std::string& identity);

// The events a receiver hears of: manifests stored, tags set, tags and manifests deleted. Links
// are not (a blob alone is not an image). mirror_host: the upstream a repository mirrors, or "".
// Reads nothing: what the manifest is comes from describe().
std::optional<Notice> notice_of(const storage::Event& event, const std::string& mirror_host);
inline constexpr std::size_t max_field = 256;

// Adds what a notice's manifest is (media type, size, artifact type, subject) while this replica
// holds it. A pusher chooses those strings: one longer than max_field is left out, so no event
// grows with what a manifest carries. Each manifest is read and parsed once per Describer (one
// manifest tagged a thousand times, up to max_manifest_bytes, costs one parse, not a thousand),
// which lives for one pass or one request, so what it says is what the index says then.
class Describer {
public:
    explicit Describer(const storage::MetaStore& meta) : meta_(meta) {}
    void describe(Notice& notice);

private:
    struct Description {
        std::string media_type, subject, artifact_type;
        std::uint64_t size = 0;
    };
    static constexpr std::size_t max_remembered = 256;
    const storage::MetaStore& meta_;
    std::map<std::string, Description> remembered_;  // by repository '@' digest
};

const char* action_name(Action action);
// CloudEvents 1.0, structured mode (one object) or batched mode (an array).
std::string cloudevent_json(const Notice& notice);
std::string cloudevents_batch_json(const std::vector<Notice>& notices);
// Distribution's envelope, {"events":[...]}, as its notifications document it.
std::string distribution_json(const std::vector<Notice>& notices);
}  // namespace berth::notify
