#pragma once
// The pollers' feed, GET /_berth/v1/events (docs/events.md): the events endpoints are told, with
// the same ids, read from this replica's change log a page at a time. A cursor says what the
// poller has been given, per origin replica, as an endpoint's progress does; so any replica
// continues any replica's cursor, and a failover neither skips an event the log holds nor repeats
// one. Only settled changes are given (every peer heard past them), in the order they were decided.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "berth/notify/options.hpp"

namespace berth::storage {
class MetaStore;
}
namespace berth::replication {
class Cluster;
}

namespace berth::notify {

struct FeedQuery {
    std::string after;       // the last page's cursor; "" starts at the oldest change the log holds
    std::string repository;  // a glob (`*` within a component, `**` across); "" for every repository
    std::size_t limit = 100;
    std::function<bool(const std::string& repo)> may_pull;  // null: the caller may pull everything
    bool show_principal = true;                             // whether events name who asked for each change
};

struct FeedPage {
    std::vector<std::string> events;  // CloudEvents (JSON), oldest first
    std::string cursor;               // the next page's `after`
    bool more = false;                // settled events wait beyond this page: ask again at once
    // The cursor is behind a change compaction took from the log: the poller missed events, and
    // `cursor` is where this replica can continue, past what was missed (no events are given).
    bool behind = false;
};

class Feed {
public:
    // replica: this replica's id; mirror_host as for Notifications; options: its settle time, base
    // images and operators.
    Feed(storage::MetaStore& meta, const replication::Cluster* cluster,
         std::function<std::string(const std::string&)> mirror_host, const Options& options, std::string replica);
    ~Feed();
    // Throws std::invalid_argument for a cursor no replica of this cluster wrote.
    FeedPage read(const FeedQuery& query) const;
    // notifications.operators: who may see events' principals.
    const std::vector<std::string>& operators() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace berth::notify
