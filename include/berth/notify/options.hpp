#pragma once
// The `notifications` section: where events about changes go (docs/events.md).
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace berth::notify {

// What an event reports; an endpoint subscribes to a set of them.
enum class Action : unsigned {
    push = 1,        // a manifest stored by a client (or by import, restore, replication of one)
    tag = 2,         // a tag set or moved
    del = 4,         // a tag or manifest deleted
    mirror = 8,      // a manifest stored by fetching it from an upstream registry (proxy.upstreams)
    retention = 16,  // a tag or manifest deleted by a retention policy
    rebuild = 32,    // a base image's tag moved: what was built on its previous version
    pull = 64        // manifests served, counted per repository and digest over pull_interval
};
inline constexpr unsigned default_actions = 1 | 2 | 4 | 8 | 16 | 32;

enum class Format { cloudevents, distribution };

struct Endpoint {
    std::string name;
    std::string url;      // http://, https://, or nats:// (tls:// for NATS over TLS)
    std::string subject;  // NATS: the subject, {action} and {repository} filled in (docs/events.md)
    std::string ca_file;
    bool insecure = false;
    std::vector<std::pair<std::string, std::string>> headers;  // static ones and those read from header_files
    std::string secret;                                        // the HMAC key (secret_file); empty: unsigned
    std::vector<std::string> repositories;                     // globs; empty: every repository
    unsigned actions = default_actions;
    Format format = Format::cloudevents;
    std::size_t max_batch = 1;  // above 1: CloudEvents' batched mode
    std::chrono::seconds timeout{10};
    std::chrono::seconds max_age{72 * 3600};  // max_age_hours, fractions allowed

    bool wants(Action action) const { return (actions & static_cast<unsigned>(action)) != 0; }
};

struct Options {
    std::vector<Endpoint> endpoints;
    // How long an event waits for events with an earlier stamp that may still be on their way from
    // a peer, beyond the last moment every reachable peer's log was read up to its head.
    std::chrono::milliseconds settle{250};
    // How long pulls are counted before each replica tells endpoints that ask for `pull`.
    std::chrono::seconds pull_interval{60};
    // Who may read the endpoints' state and replay or re-enable them (/_berth/v1/notifications), as
    // rules name principals ("user:NAME", "group:NAME"); nobody when empty, unless auth is off.
    std::vector<std::string> operators;
    // Every policy's base_images (REPOSITORY:TAG globs): a tag they name that moves is a `rebuild`.
    std::vector<std::string> base_images;
    bool enabled() const { return !endpoints.empty(); }
};

}  // namespace berth::notify
