// The `notifications` section: endpoints that hear of changes (docs/events.md).
#include "section.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>

#include "berth/net/host_port.hpp"

namespace berth::config {
namespace {

const std::pair<const char*, notify::Action> action_names[] = {
    {"push", notify::Action::push},           {"tag", notify::Action::tag},
    {"delete", notify::Action::del},          {"mirror", notify::Action::mirror},
    {"retention", notify::Action::retention}, {"rebuild", notify::Action::rebuild},
    {"pull", notify::Action::pull},
};

bool valid_name(const std::string& name) {
    return !name.empty() && name.size() <= 63 && std::isalnum(static_cast<unsigned char>(name[0])) &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
                      c == '-' || c == '_' || c == '.';
           });
}

bool valid_header(const std::string& name, const std::string& value) {
    const bool token = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    return token && value.find_first_of("\r\n") == std::string::npos;
}

// A header's value read from a file (a Secret's key): its content, trailing white space removed.
std::string header_value_from(const std::string& key, const std::string& path) {
    std::ifstream in(readable_file(key, path));
    std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
    if (value.empty() || value.size() > 8192) throw ConfigError(key + ": " + path + " must hold 1 to 8192 characters");
    return value;
}

// nats://HOST:PORT or tls://HOST:PORT (user info allowed: the NATS client reads it).
void check_nats(const std::string& where, const std::string& url) {
    auto rest = url.substr(url.find("://") + 3);
    if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
    try {
        net::parse_host_port(rest, "4222");
    } catch (const std::invalid_argument& error) {
        throw ConfigError(where + ".url: " + error.what());
    }
}

void read_headers(Section& s, const std::string& where, Reading& r, notify::Endpoint& e) {
    for (const char* key : {"headers", "header_files"}) {
        auto* object = s.object(key);
        if (!object) continue;
        for (auto& [name, value] : object->items()) {
            const auto at = where + "." + key + "." + name;
            if (!value.is_string()) throw ConfigError(at + " must be a string");
            std::string text = value.get<std::string>();
            if (std::string(key) == "header_files") text = header_value_from(at, r.path_of(text));
            if (!valid_header(name, text)) throw ConfigError(at + " is not a header name and value");
            e.headers.emplace_back(name, text);
        }
    }
}

void read_endpoint(Section& s, const std::string& where, Reading& r, notify::Endpoint& e) {
    s.string("name", e.name);
    if (!valid_name(e.name))
        throw ConfigError(where + ".name must be 1 to 63 of a-z 0-9 . _ - (it names metrics and files)");
    s.string("url", e.url);
    const bool nats = e.url.starts_with("nats://") || e.url.starts_with("tls://");
    if (nats) check_nats(where, e.url);
    else if (e.url.starts_with("http://") || e.url.starts_with("https://")) check_url(where + ".url", e.url);
    else throw ConfigError(where + ".url must be an http://, https://, nats:// or tls:// (NATS over TLS) URL");
    s.string("subject", e.subject);
    if (!nats && !e.subject.empty()) throw ConfigError(where + ".subject is for nats:// endpoints");
    if (nats && e.subject.empty()) e.subject = "berth.{action}.{repository}";
    if (nats && (e.subject.find_first_of(" \t\r\n*>") != std::string::npos || e.subject.starts_with(".") ||
                 e.subject.ends_with(".") || e.subject.find("..") != std::string::npos))
        throw ConfigError(where + ".subject is not a NATS subject without wildcards");
    std::string ca_file, secret_file, format = "cloudevents";
    s.string("ca_file", ca_file);
    if (!ca_file.empty()) e.ca_file = readable_file(where + ".ca_file", r.path_of(ca_file));
    s.boolean("insecure", e.insecure);
    read_headers(s, where, r, e);
    s.string("secret_file", secret_file);
    if (!secret_file.empty()) {
        e.secret = secret_from(where + ".secret_file", r.path_of(secret_file));
        if (e.secret.size() < 16) throw ConfigError(where + ".secret_file must hold at least 16 characters");
    }
    s.strings("repositories", e.repositories);
    check_repository_globs(where + ".repositories", e.repositories);
    std::vector<std::string> actions;
    s.strings("actions", actions);
    if (s.has("actions")) {
        e.actions = 0;
        for (auto& name : actions) {
            auto it = std::find_if(std::begin(action_names), std::end(action_names),
                                   [&](auto& known) { return name == known.first; });
            if (it == std::end(action_names))
                throw ConfigError(where + ".actions: \"" + name +
                                  "\" is not one of push, tag, delete, mirror, retention, rebuild, pull");
            e.actions |= static_cast<unsigned>(it->second);
        }
        if (!e.actions) throw ConfigError(where + ".actions must name at least one action");
    }
    s.string("format", format);
    if (format == "cloudevents") e.format = notify::Format::cloudevents;
    else if (format == "distribution") e.format = notify::Format::distribution;
    else throw ConfigError(where + ".format must be cloudevents or distribution");
    // Receivers written for Distribution know push, pull and delete: rebuilds only when asked for.
    if (e.format == notify::Format::distribution && !s.has("actions"))
        e.actions &= ~static_cast<unsigned>(notify::Action::rebuild);
    // Distribution sends an event per pull and its receivers count events: a count would be lost.
    if (e.format == notify::Format::distribution && e.wants(notify::Action::pull))
        throw ConfigError(where + ".actions: pull events carry a count of pulls, which Distribution's format " +
                          "has no field for: use format cloudevents");
    s.number("max_batch", e.max_batch, 1000);
    if (nats &&
        (e.max_batch != 1 || e.format != notify::Format::cloudevents || !e.headers.empty() || !e.secret.empty()))
        throw ConfigError(where + ": a nats:// endpoint publishes one CloudEvent per message: no max_batch, " +
                          "format, headers or secret_file");
    if (e.max_batch == 0) throw ConfigError(where + ".max_batch must be at least 1");
    if (e.max_batch > 1 && e.format != notify::Format::cloudevents)
        throw ConfigError(where + ".max_batch above 1 is CloudEvents' batched mode: format must be cloudevents");
    std::uint64_t timeout = e.timeout.count();
    s.number("timeout_seconds", timeout, 300);
    if (timeout == 0) throw ConfigError(where + ".timeout_seconds must be at least 1");
    e.timeout = std::chrono::seconds(timeout);
    s.hours("max_age_hours", e.max_age, 365.0 * 24);
}

}  // namespace

void read_notifications(Section& s, Reading& r) {
    auto& options = r.config.notifications;
    std::uint64_t settle = options.settle.count();
    s.number("settle_ms", settle, 60000);
    std::uint64_t pull_interval = options.pull_interval.count();
    s.number("pull_interval_seconds", pull_interval, 3600);
    if (pull_interval == 0) throw ConfigError("notifications.pull_interval_seconds must be at least 1");
    options.pull_interval = std::chrono::seconds(pull_interval);
    options.settle = std::chrono::milliseconds(settle);
    s.strings("operators", options.operators);
    auto* list = s.array("endpoints");
    if (!list) return;
    for (std::size_t i = 0; i < list->size(); ++i) {
        const auto where = "notifications.endpoints[" + std::to_string(i) + "]";
        Section endpoint((*list)[i], where);
        notify::Endpoint e;
        read_endpoint(endpoint, where, r, e);
        endpoint.finish();
        for (auto& other : options.endpoints)
            if (other.name == e.name) throw ConfigError(where + ".name: \"" + e.name + "\" names two endpoints");
        options.endpoints.push_back(std::move(e));
    }
}

}  // namespace berth::config
