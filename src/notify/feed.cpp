// The pollers' feed (feed.hpp). A cursor is base64url of
// {"c": progress (progress.hpp), "r": replica, "e": log epoch, "p": log sequence}: what the poller
// was given, and where in the log of the replica that wrote it every entry before was given too,
// so that the same replica resumes there instead of reading its whole log again.
#include "berth/notify/feed.hpp"

#include <algorithm>
#include <stdexcept>

#include "berth/oci/encoding.hpp"
#include "berth/oci/json.hpp"
#include "berth/oci/names.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "notice.hpp"
#include "progress.hpp"
#include "rebuild.hpp"
#include "settled.hpp"

namespace berth::notify {
namespace {

constexpr std::size_t window = 1000;
// A request reads at most this many log entries; a page that stops there says `more`.
constexpr std::size_t max_read = 20000;
constexpr std::size_t max_cursor = 64 * 1024;

struct Cursor {
    Progress given;
    std::string replica, epoch;
    std::uint64_t position = 0;  // every entry up to it, in that replica's log, is covered
};

std::string encode(const Cursor& c) {
    auto progress = oci::parse_json(encode_progress(c.given));
    nlohmann::json j = {{"c", progress}, {"r", c.replica}, {"e", c.epoch}, {"p", c.position}};
    return oci::base64url(j.dump());
}

Cursor decode(const std::string& text) {
    auto invalid = [] { return std::invalid_argument("after is not a cursor this feed gave"); };
    if (text.size() > max_cursor) throw invalid();
    auto bytes = oci::base64url_decode(text);
    if (!bytes) throw invalid();
    auto j = oci::parse_json(*bytes);
    if (!j.is_object() || !j.contains("c")) throw invalid();
    auto progress = parse_progress(j["c"].dump());
    if (!progress) throw invalid();
    Cursor c;
    c.given = std::move(*progress);
    try {
        c.replica = j.value("r", std::string());
        c.epoch = j.value("e", std::string());
        c.position = j.value("p", std::uint64_t{0});
    } catch (const nlohmann::json::exception&) {
        throw invalid();
    }
    return c;
}

struct Entry {
    std::uint64_t position;
    std::optional<storage::Event> event;  // only the events receivers hear of
};

}  // namespace

struct Feed::Impl {
    storage::MetaStore& meta;
    const replication::Cluster* cluster;
    std::function<std::string(const std::string&)> mirror_host;
    std::chrono::milliseconds settle;
    std::string replica;
    std::vector<std::string> base_images;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

    std::string epoch() const { return meta.setting(storage::layout::setting::log_epoch).value_or(""); }
    // Where this replica's log may hold what the cursor does not cover.
    std::uint64_t start_of(const Cursor& cursor) const {
        const auto first = meta.log_first() - 1;
        if (cursor.replica == replica && cursor.epoch == epoch() && cursor.position <= meta.log_head())
            return std::max(first, cursor.position);
        return first;
    }
    bool wanted(const Notice& n, const FeedQuery& query) const {
        if (!query.repository.empty() && !oci::glob_match(query.repository, n.repository)) return false;
        return !query.may_pull || query.may_pull(n.repository);
    }
};

Feed::Feed(storage::MetaStore& meta, const replication::Cluster* cluster,
           std::function<std::string(const std::string&)> mirror_host, std::chrono::milliseconds settle,
           std::string replica, std::vector<std::string> base_images)
    : impl_(std::make_unique<Impl>(
          Impl{meta, cluster, std::move(mirror_host), settle, std::move(replica), std::move(base_images)})) {}

Feed::~Feed() = default;

FeedPage Feed::read(const FeedQuery& query) const {
    auto& meta = impl_->meta;
    // Read before the log: compaction after this moment only takes what the next request judges.
    const auto compacted = meta.log_compacted();
    Cursor cursor;
    if (!query.after.empty()) cursor = decode(query.after);
    FeedPage page;
    const bool fresh = query.after.empty();
    for (auto& [origin, clock] : compacted) {
        if (cursor.given.covers({clock, origin})) continue;
        if (!fresh) page.behind = true;
        cursor.given.pass({clock, origin});
    }
    if (page.behind) {
        Cursor oldest;
        for (auto& [origin, clock] : compacted) oldest.given.pass({clock, origin});
        page.cursor = encode(oldest);
        return page;
    }

    // What the cursor does not cover, in log order, as far as one request reads.
    const auto settled = settled_before(impl_->cluster, impl_->settle, impl_->started);
    std::vector<Entry> read;
    std::vector<const Entry*> ready;
    const auto start = impl_->start_of(cursor);
    std::uint64_t after = start;
    while (read.size() < max_read) {
        auto entries = meta.read_log(after, std::min(window, max_read - read.size()));
        if (entries.empty()) break;
        for (auto& entry : entries) {
            auto event = storage::Event::parse(entry.event);
            if (event && (!noticed(*event) || cursor.given.covers(event->stamp))) event.reset();
            read.push_back({entry.sequence, std::move(event)});
        }
        after = entries.back().sequence;
    }
    const bool read_all = after >= meta.log_head() || read.size() < max_read;
    for (auto& entry : read) {
        if (!entry.event) continue;
        if (storage::HybridClock::physical_ms(entry.event->stamp.clock) <= settled) ready.push_back(&entry);
    }
    std::stable_sort(ready.begin(), ready.end(),
                     [](const Entry* a, const Entry* b) { return a->event->stamp < b->event->stamp; });
    // Whole stamps only: a cursor passes a stamp once all its events are given.
    std::size_t i = 0;
    for (; i < ready.size() && page.events.size() < query.limit;) {
        const auto& stamp = ready[i]->event->stamp;
        std::vector<Notice> group;
        for (; i < ready.size() && ready[i]->event->stamp == stamp; ++i)
            if (auto n = notice_of(*ready[i]->event, impl_->mirror_host(ready[i]->event->repo)))
                group.push_back(std::move(*n));
        std::sort(group.begin(), group.end(), [](auto& a, auto& b) { return a.sequence < b.sequence; });
        add_rebuilds(group, meta, impl_->base_images, query.may_pull);
        for (auto& n : group) {
            if (!impl_->wanted(n, query)) continue;
            describe(n, meta);
            page.events.push_back(cloudevent_json(n));
        }
        cursor.given.pass(stamp);
    }
    page.more = i < ready.size() || !read_all;

    // This replica's log is covered up to the first entry the cursor still lacks.
    cursor.replica = impl_->replica;
    cursor.epoch = impl_->epoch();
    cursor.position = start;
    for (auto& entry : read) {
        if (entry.event && !cursor.given.covers(entry.event->stamp)) break;
        cursor.position = entry.position;
    }
    page.cursor = encode(cursor);
    return page;
}

}  // namespace berth::notify
