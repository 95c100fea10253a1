#pragma once
// What the server works with, given by the node when it is built (node/node.cpp).
namespace berth::registry {
class Registry;
class Retention;
}  // namespace berth::registry
namespace berth::storage {
class BackupJob;
}
namespace berth::replication {
class PeerService;
}
namespace berth::auth {
class Authorizer;
class DelegatedAccess;
}  // namespace berth::auth
namespace berth::observe {
class MetricsRegistry;
}
namespace berth::notify {
class Notifications;
class Feed;
}  // namespace berth::notify

namespace berth::http {

class AgentRoster;

// Who decides what a request may do.
struct Access {
    const auth::Authorizer* authorizer = nullptr;  // null: everyone may do everything
    auth::DelegatedAccess* delegated = nullptr;    // the node agent's door: the replicas decide who reads
};

// The jobs operators watch and start.
struct Operations {
    storage::BackupJob* backups = nullptr;           // null: the server takes no backups (config `backup`)
    registry::Retention* retention = nullptr;        // the web UI's retention page; null: no policies here
    notify::Notifications* notifications = nullptr;  // null: no endpoints (config `notifications`)
    const notify::Feed* feed = nullptr;              // GET /_berth/v1/events
    AgentRoster* agents = nullptr;                   // the replicas' list of node agents; null on an agent
};

struct Services {
    registry::Registry& registry;
    Access access;
    replication::PeerService* peers = nullptr;          // null without peers
    const observe::MetricsRegistry* metrics = nullptr;  // what GET /metrics writes
    Operations operations;
};

}  // namespace berth::http
