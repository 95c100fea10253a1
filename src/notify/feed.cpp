// The pollers' feed (feed.hpp). A cursor is base64url of
// {"c": progress (progress.hpp), "h": {"<replica>": ["<log epoch>", log sequence]}}: what the poller
// was given, and per replica that answered it lately, where in that replica's log every entry
// before was given too, so that a poller going round the replicas resumes in each of them instead
// of reading its whole log again. The HTTP layer seals it (http/cursors.hpp): callers never see
// what it says of repositories they may not pull.
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
// Room for the origins of a cluster whose replicas were renamed a few dozen times; a request line
// holds at most 16 KiB (server.max_header_bytes) with the cursor sealed: the HTTP layer's mark
// (a few bytes) and this fit in 11 KiB, sealed in 1 KiB blocks to 11 KiB + 28 bytes, as base64
// under 16 KiB.
constexpr std::size_t max_cursor = 11 * 1024 - 16;
// Moved base tags whose rebuild lists one page reads (each reads the lineage index): a page
// stops before the next and says `more`.
constexpr std::size_t moves_per_page = 8;
constexpr std::size_t max_hints = 8;  // replicas whose log positions a cursor keeps
// Work a request's `repository` glob may cost (pattern × name steps over the distinct repositories
// it reads): a caller-chosen glob over long names would otherwise cost seconds. Ordinary globs
// over 20,000 repositories stay far below it; a page that spends it stops and says `more`.
constexpr std::size_t glob_budget = 32 << 20;

struct Hint {
    std::string epoch;
    std::uint64_t position = 0;  // every entry up to it, in that replica's log, is covered
};

struct Cursor {
    Progress given;
    std::map<std::string, Hint> hints;  // by replica
};

std::string encode(const Cursor& c) {
    nlohmann::json hints = nlohmann::json::object();
    for (auto& [replica, hint] : c.hints) hints[replica] = {hint.epoch, hint.position};
    return oci::base64url(nlohmann::json{{"c", oci::parse_json(encode_progress(c.given))}, {"h", hints}}.dump());
}

Cursor decode(const std::string& text) {
    auto invalid = [] { return std::invalid_argument("after is not a cursor this feed gave"); };
    auto bytes = text.size() <= max_cursor ? oci::base64url_decode(text) : std::nullopt;
    if (!bytes) throw invalid();
    auto j = oci::parse_json(*bytes);
    if (!j.is_object() || !j.contains("c") || !j.contains("h") || !j["h"].is_object()) throw invalid();
    auto progress = parse_progress(j["c"].dump());
    if (!progress) throw invalid();
    Cursor c{std::move(*progress), {}};
    for (auto& [replica, hint] : j["h"].items()) {
        if (!hint.is_array() || hint.size() != 2 || !hint[0].is_string() || !hint[1].is_number_unsigned())
            throw invalid();
        if (c.hints.size() < max_hints) c.hints[replica] = {hint[0].get<std::string>(), hint[1].get<std::uint64_t>()};
    }
    return c;
}

struct Entry {
    std::uint64_t position;
    std::optional<storage::Event> event;  // only those receivers hear of and the cursor lacks
};

// What one caller may see: each repository judged once per request, however many of its events
// and rebuild list entries the request reads.
class Viewer {
public:
    explicit Viewer(const FeedQuery& query) : query_(query) {}
    bool may_pull(const std::string& repo) {
        if (!query_.may_pull) return true;
        auto it = pullable_.find(repo);
        if (it == pullable_.end()) it = pullable_.emplace(repo, query_.may_pull(repo)).first;
        return it->second;
    }
    bool shows(const std::string& repo) {
        if (query_.repository.empty()) return may_pull(repo);
        auto it = matching_.find(repo);
        if (it == matching_.end()) {
            glob_spent_ += (query_.repository.size() + 1) * (repo.size() + 1);
            it = matching_.emplace(repo, oci::glob_match(query_.repository, repo)).first;
        }
        return it->second && may_pull(repo);
    }
    bool spent() const { return glob_spent_ > glob_budget; }
    std::function<bool(const std::string&)> puller() {
        return [this](const std::string& repo) { return may_pull(repo); };
    }
    bool show_principal() const { return query_.show_principal; }

private:
    const FeedQuery& query_;
    std::map<std::string, bool> pullable_, matching_;
    std::size_t glob_spent_ = 0;
};

// Passes every change compaction took that the cursor lacks; true when there was one.
bool pass_compacted(Cursor& cursor, const std::map<std::string, std::uint64_t>& compacted) {
    bool behind = false;
    for (auto& [origin, clock] : compacted) {
        if (cursor.given.covers({clock, origin})) continue;
        behind = true;
        cursor.given.pass({clock, origin});
    }
    return behind;
}

}  // namespace

struct Feed::Impl {
    storage::MetaStore& meta;
    const replication::Cluster* cluster;
    std::function<std::string(const std::string&)> mirror_host;
    const Options options;
    std::string replica;
    RebuildLists rebuilds{meta};
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

    std::string epoch() const { return meta.setting(storage::layout::setting::log_epoch).value_or(""); }
    // Where this replica's log may hold what the cursor does not cover.
    std::uint64_t start_of(const Cursor& cursor) const {
        const auto first = meta.log_first() - 1;
        auto hint = cursor.hints.find(replica);
        if (hint != cursor.hints.end() && hint->second.epoch == epoch() && hint->second.position <= meta.log_head())
            return std::max(first, hint->second.position);
        return first;
    }
    std::vector<Entry> read(const Cursor& cursor, std::uint64_t start, bool& read_all) const {
        std::vector<Entry> out;
        std::uint64_t after = start;
        while (out.size() < max_read) {
            auto entries = meta.read_log(after, std::min(window, max_read - out.size()));
            if (entries.empty()) break;
            for (auto& entry : entries) {
                auto event = storage::Event::parse(entry.event);
                if (event && (!noticed(*event) || cursor.given.covers(event->stamp))) event.reset();
                out.push_back({entry.sequence, std::move(event)});
            }
            after = entries.back().sequence;
        }
        read_all = out.size() < max_read || after >= meta.log_head();
        return out;
    }
    bool moves_base(const Notice& n) const {
        return n.action == Action::tag && names_base(options.base_images, n.repository, n.tag);
    }
    // One stamp's events as the caller sees them: rebuilds listed only for what it may see.
    void tell(std::vector<Notice>& group, Viewer& viewer, Describer& describer, std::vector<std::string>& events) {
        for (auto& n : group) {
            if (!viewer.shows(n.repository)) continue;
            if (!viewer.show_principal()) n.principal.clear();
            describer.describe(n);
            events.push_back(cloudevent_json(n));
            if (!moves_base(n)) continue;
            for (auto& rebuild : rebuilds.of(n, viewer.puller())) events.push_back(cloudevent_json(rebuild));
        }
    }
};

Feed::Feed(storage::MetaStore& meta, const replication::Cluster* cluster,
           std::function<std::string(const std::string&)> mirror_host, const Options& options, std::string replica)
    : impl_(new Impl{meta, cluster, std::move(mirror_host), options, std::move(replica)}) {}

Feed::~Feed() = default;

const std::vector<std::string>& Feed::operators() const { return impl_->options.operators; }

FeedPage Feed::read(const FeedQuery& query) const {
    auto& meta = impl_->meta;
    Cursor cursor;
    if (!query.after.empty()) cursor = decode(query.after);
    FeedPage page;
    // A fresh poller starts at the oldest change the log holds; one whose cursor lacks a change
    // compaction took is told so, with its cursor moved past what it missed.
    page.behind = pass_compacted(cursor, meta.log_compacted()) && !query.after.empty();
    const auto start = impl_->start_of(cursor);
    bool read_all = false;
    std::vector<Entry> entries;
    if (!page.behind) entries = impl_->read(cursor, start, read_all);
    // Compaction while the log was read: what it took before it was read is missed too.
    if (pass_compacted(cursor, meta.log_compacted()) && !query.after.empty()) page.behind = true;
    if (page.behind) {
        page.cursor = encode(cursor);
        return page;
    }

    const auto settled = settled_before(impl_->cluster, impl_->options.settle, impl_->started);
    std::vector<const Entry*> ready;
    for (auto& entry : entries)
        if (entry.event && storage::HybridClock::physical_ms(entry.event->stamp.clock) <= settled)
            ready.push_back(&entry);
    std::stable_sort(ready.begin(), ready.end(),
                     [](const Entry* a, const Entry* b) { return a->event->stamp < b->event->stamp; });
    // Whole stamps only: a cursor passes a stamp once all its events are given.
    const auto limit = std::max<std::size_t>(1, query.limit);
    Viewer viewer(query);
    Describer describer(meta);
    std::size_t i = 0, moves_left = moves_per_page;
    // Each stamp costs at most a bounded number of glob steps (a push's tags): past the budget the
    // page stops, even with no event the caller can see in it yet, so its cursor moves on.
    while (i < ready.size() && page.events.size() < limit && (i == 0 || !viewer.spent())) {
        const auto& stamp = ready[i]->event->stamp;
        std::vector<Notice> group;
        auto end = i;
        for (; end < ready.size() && ready[end]->event->stamp == stamp; ++end)
            if (auto n = notice_of(*ready[end]->event, impl_->mirror_host(ready[end]->event->repo)))
                group.push_back(std::move(*n));
        std::sort(group.begin(), group.end(), [](auto& a, auto& b) { return a.sequence < b.sequence; });
        const auto moves = std::count_if(group.begin(), group.end(), [&](const Notice& n) {
            return impl_->moves_base(n) && viewer.shows(n.repository);
        });
        if (std::size_t(moves) > moves_left && !page.events.empty()) break;
        moves_left -= std::min<std::size_t>(moves_left, moves);
        impl_->tell(group, viewer, describer, page.events);
        cursor.given.pass(stamp);
        i = end;
    }

    // This replica's log is covered up to the first entry the cursor still lacks.
    auto position = start;
    for (auto& entry : entries) {
        if (entry.event && !cursor.given.covers(entry.event->stamp)) break;
        position = entry.position;
    }
    page.more = i < ready.size() || (!read_all && position > start);
    cursor.hints[impl_->replica] = {impl_->epoch(), position};
    for (auto it = cursor.hints.begin(); cursor.hints.size() > max_hints;)
        it = it->first == impl_->replica ? std::next(it) : cursor.hints.erase(it);
    page.cursor = encode(cursor);
    if (page.cursor.size() > max_cursor)
        throw std::runtime_error("the feed's cursor outgrew what a request can carry: too many replica ids");
    return page;
}

}  // namespace berth::notify
