#pragma once
// The composition root: builds the process's objects from the configuration
// and runs them. Nothing else creates a store, a registry, a replicator, a
// proxy, the HTTP server or a periodic job.
#include "berth/config/config.hpp"

namespace berth::node {

// Serves until SIGTERM or SIGINT, then drains; returns the exit status. Throws
// config::ConfigError for what the configuration asks and cannot be had
// (an address, a descriptor budget, an auth file).
int serve(config::Config config);

}  // namespace berth::node
