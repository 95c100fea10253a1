#pragma once
// What a route is: one row of the route table (routes.cpp), which is the only place routes are
// registered. A row carries its path pattern, its metrics label, how its callers are authenticated
// and what the rules must let them do, its handler, and the few facts the server needs to plan it.
// A new route is its row and its handler; authentication is decided from the row in one place
// (authenticate.cpp).
#include <cstddef>
#include <span>
#include <string_view>

namespace berth::http {

struct Context;
struct Request;
struct Plan;

// How a route's callers are authenticated.
enum class Auth {
    none,      // anyone: probes, metrics, the token endpoint (which checks what it is given), UI files
    registry,  // /v2/'s credentials and rules (or, on the node agent, the replicas' word)
    peer,      // another replica: the cluster's secret and a protocol version both speak
    backup,    // the backup secret as a Bearer token (backup.secret_file)
    ui,        // a web UI session, else /v2/'s credentials, else anonymous (the views filter)
    agent,     // a node agent: a client certificate tls.client_ca signed
};

// What the authorization rules must allow (auth::Action), or none: authentication at most.
// Without a repository, pull means pull on the catalog: the answer is filtered to what the caller
// may pull.
enum class Needs { none, pull, push, del };

// The grammar the pattern's {reference} must meet before anything sees it (router.hpp).
enum class Part { none, reference /* a tag or a digest */, digest, upload_id };

// What else the server needs to know of a route.
enum Flags : unsigned {
    quick = 1,       // a GET or HEAD is planned on the I/O thread: no peer, token or scan behind it
    agent = 2,       // the node agent serves it (it serves /v2/ pulls, probes and metrics only)
    peer_reads = 4,  // another replica may GET or HEAD it on the cluster's word (a fetch's owner)
    mounts = 8,      // ?mount=&from= also needs pull on the repository it mounts from
    ui = 16,         // part of the web UI: off with ui.enabled false, and every answer carries its headers
    // Its writes are planned on the I/O thread too (an upload opens in memory, an append begins
    // with a file opened); the handler leaves it (net::leave_io_thread) for anything that may block.
    quick_writes = 32,
};

using Handler = Plan (*)(Context&, Request&);

struct Route {
    // "/v2/{name}/manifests/{reference}": {name} is one or more path segments, {reference} one,
    // {rest} whatever is left. A trailing '/' also matches without it. "" matches nothing.
    std::string_view pattern;
    std::string_view label;  // the route label of berth_http_* metrics
    Auth auth;
    Needs read, del, write;  // for a GET or HEAD, a DELETE, and any other method
    Part part;
    unsigned flags;
    Handler handler;
    // The query parameter that names the repository, for a route whose path names none.
    std::string_view name_param = {};

    bool names_repository() const { return pattern.find("{name}") != std::string_view::npos || !name_param.empty(); }
    bool has(Flags flag) const { return (flags & flag) != 0; }
};

// The table in order (the first matching row wins), the last row answering what no other does.
std::span<const Route> routes();
inline constexpr std::size_t max_routes = 64;  // what per-route metrics have room for
inline const Route& unknown_route() { return routes().back(); }
inline std::size_t route_index(const Route& route) { return static_cast<std::size_t>(&route - routes().data()); }

}  // namespace berth::http
