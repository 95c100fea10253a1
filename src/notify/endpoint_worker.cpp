// One endpoint's delivery (endpoint_worker.hpp).
//
// Order: a change is sent only once every reachable peer's log has been read past its stamp (plus
// the settle time), so changes decided elsewhere earlier are here to be sorted before it; then
// changes go in stamp order. Progress is per origin replica (each replica's changes reach every
// log in the order it made them), and moves past a stamp only once all of that stamp's events are
// out (a push's manifest and its tags share one).
#include "endpoint_worker.hpp"

#include <algorithm>
#include <random>

#include "berth/notify/notifications.hpp"
#include <nlohmann/json.hpp>

#include "berth/net/background.hpp"
#include "berth/observe/log.hpp"
#include "berth/oci/names.hpp"
#include "berth/replication/cluster.hpp"
#include "berth/storage/hybrid_clock.hpp"
#include "berth/storage/layout.hpp"
#include "berth/storage/meta_store.hpp"
#include "rebuild.hpp"
#include "settled.hpp"

namespace berth::notify {
namespace {

using namespace std::chrono_literals;
namespace setting = storage::layout::setting;

constexpr std::size_t window = 1000;  // log entries read per pass

std::chrono::milliseconds backoff(unsigned attempts) {
    static thread_local std::mt19937 random{std::random_device{}()};
    const auto base = std::min<std::uint64_t>(60000, 500ull << std::min(attempts, 7u));
    std::uniform_int_distribution<std::uint64_t> jitter(base / 2, base + base / 2);
    return std::chrono::milliseconds(jitter(random));
}

}  // namespace

EndpointWorker::EndpointWorker(const Endpoint& endpoint, Shared& shared, const std::filesystem::path& dir)
    : endpoint_(endpoint), shared_(shared), sink_(make_sink(endpoint_)), dead_(dir / (endpoint.name + ".dead")) {
    if (auto text = shared_.meta.setting(setting::notify_progress(endpoint_.name)))
        if (auto saved = parse_progress(*text)) progress_ = std::move(*saved);
    if (auto text = shared_.meta.setting(setting::notify_scan(endpoint_.name))) scan_ = std::stoull("0" + *text);
}

void EndpointWorker::start() {
    started_ = std::chrono::steady_clock::now();
    thread_ = std::thread([this] { run(); });
}

void EndpointWorker::join() {
    wake();
    if (thread_.joinable()) thread_.join();
}

void EndpointWorker::wake() {
    std::lock_guard lock(mutex_);
    woken_ = true;
    wake_.notify_all();
}

void EndpointWorker::run() {
    net::run_in_background();
    while (!shared_.stopping) {
        // Changes and pull counts are paced apart: pull counts going out never cut short the
        // changes' backoff or a receiver's Retry-After, nor does one's failure stop the other.
        auto changes_wait = until(changes_after());
        if (changes_wait == 0ms) {
            const auto kicks = this->kicks();
            try {
                changes_wait = step();
            } catch (const std::exception& error) {
                changes_wait = 1000ms;
                observe::log("error", "notifications: endpoint pass failed",
                             {{"endpoint", endpoint_.name}, {"error", error.what()}});
            }
            std::lock_guard lock(mutex_);
            // A replay or an enable while the pass ran (a delivery hanging, say) is not waited out.
            if (kicks_ != kicks) changes_wait = 0ms;
            changes_after_ = std::chrono::steady_clock::now() + changes_wait;
        }
        if (shared_.stopping) break;
        auto pulls_wait = 1000ms;
        try {
            pulls_wait = deliver_pulls();
        } catch (const std::exception& error) {
            observe::log("error", "notifications: sending pull counts failed",
                         {{"endpoint", endpoint_.name}, {"error", error.what()}});
        }
        std::unique_lock lock(mutex_);
        wake_.wait_for(lock, std::min(changes_wait, pulls_wait), [this] { return woken_ || shared_.stopping; });
        woken_ = false;
    }
}

std::chrono::steady_clock::time_point EndpointWorker::changes_after() const {
    std::lock_guard lock(mutex_);
    return changes_after_;
}

std::uint64_t EndpointWorker::kicks() const {
    std::lock_guard lock(mutex_);
    return kicks_;
}

std::chrono::milliseconds EndpointWorker::until(std::chrono::steady_clock::time_point when) {
    const auto now = std::chrono::steady_clock::now();
    return when <= now ? 0ms : std::chrono::ceil<std::chrono::milliseconds>(when - now);
}

Progress EndpointWorker::progress() const {
    std::lock_guard lock(mutex_);
    return progress_;
}

// Not fsynced: a machine's crash may take back the last passes, which are then sent again with the
// same ids (at least once); a write per stamp sent costs no fsync, and a niced thread never leads
// a group commit that pushes wait on.
void EndpointWorker::save_locked() {
    shared_.meta.put_setting(setting::notify_progress(endpoint_.name), encode_progress(progress_),
                             storage::MetaStore::Durability::none);
}

void EndpointWorker::merge(const Progress& other) {
    // A peer whose clock is far ahead (or that says what no clock could) would mark everything
    // sent or the endpoint disabled for good: its word is not taken.
    const auto limit = (wall_ms() + 3600 * 1000) << 16;
    bool believable =
        other.generation <= limit && other.floor <= limit && other.disabled <= limit && other.enabled <= limit;
    for (auto& [origin, clock] : other.origins) believable = believable && clock <= limit;
    if (!believable) {
        observe::log("warning", "notifications: a peer's progress is stamped an hour or more ahead; ignored",
                     {{"endpoint", endpoint_.name}});
        return;
    }
    std::lock_guard lock(mutex_);
    auto merged = progress_;
    merged.merge(other);
    if (merged == progress_) return;
    // A replay: read the log again from what it still holds (what compaction took was never lost
    // to this replay).
    if (merged.generation != progress_.generation) scan_ = shared_.meta.log_first() - 1;
    progress_ = std::move(merged);
    save_locked();
}

void EndpointWorker::replay(std::uint64_t since_ms) {
    {
        std::lock_guard lock(mutex_);
        progress_.generation = shared_.clock.now();
        progress_.floor = since_ms ? (since_ms << 16) - 1 : 0;
        progress_.origins.clear();
        sent_in_group_.clear();
        scan_ = shared_.meta.log_first() - 1;
        changes_after_ = {};
        ++kicks_;
        save_locked();
    }
    wake();
}

void EndpointWorker::add_pulls(const std::vector<Notice>& pulls) {
    constexpr std::size_t max_pending_pulls = 20000;
    std::vector<const Notice*> wanted;  // matched outside the lock that status() and /metrics take
    for (auto& n : pulls)
        if (matches(n)) wanted.push_back(&n);
    if (wanted.empty()) return;
    std::size_t dropped = 0;
    {
        std::lock_guard lock(mutex_);
        for (auto* n : wanted) {
            if (pulls_.size() >= max_pending_pulls) ++dropped;
            else pulls_.push_back(*n);
        }
    }
    if (dropped) drop_pulls(dropped, "too many wait for the receiver");
    wake();
}

// Pull counts are tallies, not changes: what cannot go is counted and logged (a line a minute at
// most), not written to the dead letters, which keep the changes an operator may replay.
void EndpointWorker::drop_pulls(std::size_t count, const char* why) {
    std::size_t unlogged = 0;
    {
        std::lock_guard lock(mutex_);
        pulls_dropped_ += count;
        pulls_dropped_unlogged_ += count;
        const auto now = std::chrono::steady_clock::now();
        if (now < pulls_drop_logged_ + std::chrono::minutes(1)) return;
        pulls_drop_logged_ = now;
        std::swap(unlogged, pulls_dropped_unlogged_);
    }
    observe::log("error", std::string("notifications: pull counts dropped: ") + why,
                 {{"endpoint", endpoint_.name}, {"counts", unlogged}});
}

std::chrono::milliseconds EndpointWorker::deliver_pulls() {
    std::vector<Notice> batch;
    {
        std::lock_guard lock(mutex_);
        // Nothing to send: the changes' own wait holds (add_pulls wakes the thread).
        if (pulls_.empty() || progress_.is_disabled()) return std::chrono::hours(1);
        if (std::chrono::steady_clock::now() < pulls_after_)
            return std::chrono::duration_cast<std::chrono::milliseconds>(pulls_after_ -
                                                                         std::chrono::steady_clock::now());
        const auto count = std::min(endpoint_.max_batch, pulls_.size());
        batch.assign(pulls_.begin(), pulls_.begin() + count);
    }
    const auto outcome = sink_->deliver(batch);
    const auto age_ms = wall_ms() - std::min(wall_ms(), batch.front().time_ms);
    const bool too_old = age_ms > static_cast<std::uint64_t>(std::chrono::milliseconds(endpoint_.max_age).count());
    if (outcome.kind == Outcome::Kind::gone) {
        disable(outcome.detail);
        return std::chrono::hours(1);
    }
    if (outcome.kind != Outcome::Kind::delivered && outcome.kind != Outcome::Kind::refused && !too_old) {
        std::lock_guard lock(mutex_);
        ++failed_;
        last_error_ = outcome.detail;
        const auto wait = outcome.retry_after ? std::max<std::chrono::milliseconds>(*outcome.retry_after, 1000ms)
                                              : backoff(pull_attempts_);
        ++pull_attempts_;
        pulls_after_ = std::chrono::steady_clock::now() + wait;
        return wait;
    }
    if (outcome.kind != Outcome::Kind::delivered) {
        {
            std::lock_guard lock(mutex_);
            ++failed_;
            last_error_ = outcome.detail;
        }
        drop_pulls(batch.size(), too_old ? "max_age passed" : "the receiver refused them");
    } else {
        std::lock_guard lock(mutex_);
        delivered_ += batch.size();
    }
    std::lock_guard lock(mutex_);
    pull_attempts_ = 0;
    pulls_.erase(pulls_.begin(), pulls_.begin() + std::min(batch.size(), pulls_.size()));
    return 0ms;
}

void EndpointWorker::enable() {
    {
        std::lock_guard lock(mutex_);
        progress_.enabled = shared_.clock.now();
        attempts_ = 0;
        changes_after_ = {};
        pulls_after_ = {};
        ++kicks_;
        save_locked();
    }
    wake();
}

std::uint64_t EndpointWorker::scan() const {
    std::lock_guard lock(mutex_);
    return scan_;
}

EndpointStatus EndpointWorker::status() const {
    std::lock_guard lock(mutex_);
    EndpointStatus s;
    s.name = endpoint_.name;
    s.delivering = delivering_;
    s.disabled = progress_.is_disabled();
    s.disabled_reason = s.disabled ? progress_.disabled_reason : "";
    s.lag_events = lag_events_;
    s.lag_seconds = oldest_lag_ms_ ? std::max<double>(0, double(wall_ms()) - double(oldest_lag_ms_)) / 1000 : 0;
    s.last_error = last_error_;
    s.delivered = delivered_;
    s.failed = failed_;
    s.retried = retried_;
    s.dead_lettered = dead_lettered_;
    s.pulls_waiting = pulls_.size();
    s.pulls_dropped = pulls_dropped_;
    return s;
}

bool EndpointWorker::in_scope(const std::string& repo) const {
    return endpoint_.repositories.empty() || oci::matches_any(endpoint_.repositories, repo);
}

bool EndpointWorker::matches(const Notice& notice) const {
    return endpoint_.wants(notice.action) && in_scope(notice.repository);
}

bool EndpointWorker::pass(const storage::Stamp& stamp, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    // A replay (here or merged from a peer) began while this pass was sending: its progress starts
    // over, and a stamp this pass sent must not mark the replay's earlier changes as sent.
    if (progress_.generation != generation) return false;
    progress_.pass(stamp);
    sent_in_group_.clear();
    save_locked();
    return true;
}

// The notices after scan_ that progress does not cover yet, in log order; scan_to: how far the log
// is behind us (up to the first of them).
std::vector<EndpointWorker::Pending> EndpointWorker::uncovered(const Progress& progress, std::uint64_t& scan_to) {
    auto& meta = shared_.meta;
    if (const auto first = meta.log_first(); scan_to + 1 < first) {
        // Compacted away before this endpoint heard of it: counted, never silently gone.
        const auto lost = first - 1 - scan_to;
        observe::log("error", "notifications: the change log dropped events an endpoint had not heard of",
                     {{"endpoint", endpoint_.name}, {"events", lost}});
        std::lock_guard lock(mutex_);
        dead_lettered_ += lost;
        scan_to = first - 1;
    }
    std::vector<Pending> out;
    for (auto& entry : meta.read_log(scan_to, window)) {
        auto event = storage::Event::parse(entry.event);
        if (!event || !noticed(*event) || progress.covers(event->stamp)) {
            if (out.empty()) scan_to = entry.sequence;
            continue;
        }
        out.push_back({sequence_of(*event), std::move(*event)});
    }
    return out;
}

void EndpointWorker::note_lag(const std::vector<Pending>& pending) {
    std::lock_guard lock(mutex_);
    lag_events_ = 0;
    oldest_lag_ms_ = 0;
    for (auto& p : pending) {
        if (progress_.covers(p.event.stamp)) continue;
        ++lag_events_;
        const auto ms = storage::HybridClock::physical_ms(p.event.stamp.clock);
        oldest_lag_ms_ = oldest_lag_ms_ ? std::min(oldest_lag_ms_, ms) : ms;
    }
}

std::chrono::milliseconds EndpointWorker::step() {
    const auto progress = this->progress();
    std::uint64_t scan_to = scan();
    auto pending = uncovered(progress, scan_to);
    const bool mine = shared_.heard_peers && !progress.is_disabled() &&
                      (!shared_.cluster || shared_.cluster->leads("notify/" + endpoint_.name));
    {
        std::lock_guard lock(mutex_);
        if (scan_to != scan_ && progress.generation == progress_.generation) {
            scan_ = scan_to;
            shared_.meta.put_setting(setting::notify_scan(endpoint_.name), std::to_string(scan_),
                                     storage::MetaStore::Durability::none);  // lost: the log is read again
        }
        delivering_ = mine;
    }
    note_lag(pending);
    if (!mine) return 250ms;
    const auto settled = notify::settled_before(shared_.cluster, shared_.settle, started_);
    std::vector<Pending*> settled_ones;
    for (auto& p : pending)
        if (storage::HybridClock::physical_ms(p.event.stamp.clock) <= settled) settled_ones.push_back(&p);
    // By stamp, then the order within one (sequence_of's rank and key): the stamp compared as a
    // stamp, so that replica ids that prefix each other never split one stamp's events.
    std::sort(settled_ones.begin(), settled_ones.end(), [](const Pending* a, const Pending* b) {
        return std::tie(a->event.stamp, a->sequence) < std::tie(b->event.stamp, b->sequence);
    });
    std::vector<Notice> ready;
    for (auto* p : settled_ones)
        if (auto notice = notice_of(p->event, shared_.mirror_host(p->event.repo))) ready.push_back(std::move(*notice));
    std::chrono::milliseconds wait = pending.size() > settled_ones.size() ? 50ms : 100ms;
    Describer describer(shared_.meta);
    for (std::size_t i = 0; i < ready.size() && !shared_.stopping;) {
        std::size_t end = i;
        while (end < ready.size() && ready[end].stamp == ready[i].stamp) ++end;
        std::vector<Notice> group(std::make_move_iterator(ready.begin() + i),
                                  std::make_move_iterator(ready.begin() + end));
        if (!deliver_group(group, describer, wait) || !pass(group.front().stamp, progress.generation)) break;
        i = end;
    }
    note_lag(pending);
    return pending.size() >= window && wait <= 100ms ? 0ms : wait;
}

// Only what this endpoint wants of a stamp is described (reads its manifest) and sent.
bool EndpointWorker::deliver_group(std::vector<Notice>& group, Describer& describer, std::chrono::milliseconds& wait) {
    // A moved base's rebuild list is read only here, when its stamp is about to go, and lists only
    // the repositories this endpoint hears of.
    std::vector<Notice> candidates;
    const bool rebuilds = endpoint_.wants(Action::rebuild) && !shared_.base_images.empty();
    for (auto& n : group) {
        if (matches(n)) candidates.push_back(n);
        if (rebuilds && n.action == Action::tag && in_scope(n.repository) &&
            names_base(shared_.base_images, n.repository, n.tag))
            for (auto& rebuild : shared_.rebuilds.of(n, [this](const std::string& repo) { return in_scope(repo); }))
                candidates.push_back(std::move(rebuild));
    }
    std::vector<Notice> wanted;
    {
        std::lock_guard lock(mutex_);
        for (auto& n : candidates)
            if (!sent_in_group_.count(n.id)) wanted.push_back(std::move(n));
    }
    for (auto& n : wanted) describer.describe(n);
    for (std::size_t i = 0; i < wanted.size();) {
        const auto count = std::min(endpoint_.max_batch, wanted.size() - i);
        std::vector<Notice> batch(wanted.begin() + i, wanted.begin() + i + count);
        const auto outcome = sink_->deliver(batch);
        if (outcome.kind == Outcome::Kind::delivered) {
            std::lock_guard lock(mutex_);
            if (attempts_) ++retried_;
            delivered_ += count;
            attempts_ = 0;
            for (auto& n : batch) sent_in_group_.insert(n.id);
            i += count;
            continue;
        }
        if (outcome.kind == Outcome::Kind::gone) {
            disable(outcome.detail);
            wait = 1000ms;
            return false;
        }
        const auto age_ms = wall_ms() - std::min(wall_ms(), batch.front().time_ms);
        const bool too_old = age_ms > static_cast<std::uint64_t>(std::chrono::milliseconds(endpoint_.max_age).count());
        if (outcome.kind == Outcome::Kind::refused || too_old) {
            dead_letter(batch, outcome, too_old ? "max_age passed" : "the receiver refused them");
            i += count;
            continue;
        }
        std::lock_guard lock(mutex_);
        if (attempts_) ++retried_;
        ++failed_;
        last_error_ = outcome.detail;
        // A receiver's Retry-After of 0 is no reason to spin: a second at least.
        wait = outcome.retry_after ? std::max<std::chrono::milliseconds>(*outcome.retry_after, 1000ms)
                                   : backoff(attempts_);
        ++attempts_;
        observe::log("warning", "notifications: delivery failed; retrying",
                     {{"endpoint", endpoint_.name}, {"error", outcome.detail}, {"retry_ms", wait.count()}});
        return false;
    }
    return true;
}

void EndpointWorker::disable(const std::string& why) {
    std::lock_guard lock(mutex_);
    ++failed_;
    last_error_ = why;
    progress_.disabled = shared_.clock.now();
    progress_.disabled_reason = "the receiver answered 410 Gone";
    delivering_ = false;
    save_locked();
    observe::log("error", "notifications: endpoint disabled by a 410 answer; re-enable it to resume",
                 {{"endpoint", endpoint_.name}});
}

void EndpointWorker::dead_letter(const std::vector<Notice>& batch, const Outcome& outcome, const char* why) {
    std::vector<std::string> lines;
    for (auto& n : batch) lines.push_back(cloudevent_json(n));
    dead_.add(lines);  // the disk write outside the lock that status() and /metrics take
    std::lock_guard lock(mutex_);
    if (attempts_) ++retried_;
    ++failed_;
    attempts_ = 0;
    last_error_ = outcome.detail;
    dead_lettered_ += batch.size();
    for (auto& n : batch) sent_in_group_.insert(n.id);
    observe::log("error", std::string("notifications: events dead-lettered: ") + why,
                 {{"endpoint", endpoint_.name}, {"events", batch.size()}, {"error", outcome.detail}});
}

}  // namespace berth::notify
