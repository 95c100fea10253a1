#pragma once
// What the configuration's section readers share (config.cpp and the per-feature *_config.cpp):
// a checked reader of one JSON object, and where relative paths start.
#include "berth/config/config.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace berth::config {

using nlohmann::json;

// Reads the keys of one JSON object, checking each type, and refuses any key
// it was not asked for.
class Section {
public:
    Section(const json& value, std::string path) : value_(value), path_(std::move(path)) {
        if (!value_.is_object()) throw ConfigError(where("") + " must be an object");
    }

    void string(const char* key, std::string& out, bool may_be_empty = true) {
        if (auto* v = find(key)) {
            if (!v->is_string()) throw ConfigError(where(key) + " must be a string");
            if (!may_be_empty && v->get<std::string>().empty()) throw ConfigError(where(key) + " must not be empty");
            out = v->get<std::string>();
        }
    }

    void strings(const char* key, std::vector<std::string>& out) {
        if (auto* v = find(key)) {
            if (!v->is_array()) throw ConfigError(where(key) + " must be an array of strings");
            out.clear();
            for (auto& item : *v) {
                if (!item.is_string() || item.get<std::string>().empty())
                    throw ConfigError(where(key) + " must be an array of non-empty strings");
                out.push_back(item.get<std::string>());
            }
        }
    }

    void boolean(const char* key, bool& out) {
        if (auto* v = find(key)) {
            if (!v->is_boolean()) throw ConfigError(where(key) + " must be true or false");
            out = v->get<bool>();
        }
    }

    template <typename Unsigned>
    void number(const char* key, Unsigned& out, std::uint64_t max = UINT32_MAX) {
        if (auto* v = find(key)) {
            if (!v->is_number_unsigned() || v->get<std::uint64_t>() > max)
                throw ConfigError(where(key) + " must be a whole number from 0 to " + std::to_string(max));
            out = static_cast<Unsigned>(v->get<std::uint64_t>());
        }
    }

    // A number of days, fractions allowed, to the second.
    void days(const char* key, std::optional<std::chrono::seconds>& out, double max = 36500) {
        if (auto* v = find(key)) {
            if (!v->is_number() || v->get<double>() < 0 || v->get<double>() > max)
                throw ConfigError(where(key) + " must be a number of days from 0 to " + std::to_string(int(max)));
            out = std::chrono::seconds(std::llround(v->get<double>() * 86400));
        }
    }

    // A number of hours above 0, fractions allowed, to the second.
    void hours(const char* key, std::chrono::seconds& out, double max) {
        if (auto* v = find(key)) {
            if (!v->is_number() || v->get<double>() * 3600 < 1 || v->get<double>() > max)
                throw ConfigError(where(key) + " must be a number of hours from 1/3600 to " + std::to_string(int(max)));
            out = std::chrono::seconds(std::llround(v->get<double>() * 3600));
        }
    }

    void seconds(const char* key, std::chrono::seconds& out) {
        std::uint64_t value = static_cast<std::uint64_t>(out.count());
        number(key, value, 365ull * 24 * 3600);
        out = std::chrono::seconds(value);
    }

    bool has(const char* key) const { return value_.contains(key); }

    const json* object(const char* key) {
        auto* v = find(key);
        if (v && !v->is_object()) throw ConfigError(where(key) + " must be an object");
        return v;
    }

    const json* array(const char* key) {
        auto* v = find(key);
        if (v && !v->is_array()) throw ConfigError(where(key) + " must be an array");
        return v;
    }

    template <typename Read>
    void section(const char* key, Read read) {
        if (auto* v = find(key)) {
            Section inner(*v, where(key));
            read(inner);
            inner.finish();
        }
    }

    void finish() const {
        for (auto& [key, unused] : value_.items())
            if (!seen_.count(key)) throw ConfigError("unknown key " + where(key.c_str()));
    }

private:
    const json* find(const char* key) {
        seen_.insert(key);
        auto it = value_.find(key);
        return it == value_.end() ? nullptr : &*it;
    }

    std::string where(const char* key) const {
        if (!*key) return path_.empty() ? "the configuration" : path_;
        return path_.empty() ? key : path_ + "." + key;
    }

    const json& value_;
    std::string path_;
    std::set<std::string> seen_;
};

// What the sections share while they are read: where relative paths start, and keys checked
// only once every section has been read.
struct Reading {
    Config& config;
    std::filesystem::path base;
    std::string secret_file, quorum;  // kept for check_combinations

    std::string path_of(const std::string& file) const {
        std::filesystem::path path(file);
        return (path.is_relative() ? base / path : path).string();
    }
};

void check_repository_globs(const std::string& key, const std::vector<std::string>& globs);
// A file named by the configuration must be readable now, not at the first fetch.
std::string readable_file(const std::string& key, const std::string& path);
// The first line of a file, trailing white space removed; an empty secret is refused.
std::string secret_from(const std::string& key, const std::string& path);
void check_url(const std::string& key, const std::string& url);

void read_auth(Section& s, Reading& r);            // auth_config.cpp
void read_policies(const json& list, Reading& r);  // policy_config.cpp
void read_backup(Section& s, Reading& r);          // backup_config.cpp
void read_storage(Section& s, Reading& r);         // storage_config.cpp
void read_ui(Section& s, Reading& r);              // ui_config.cpp
void read_notifications(Section& s, Reading& r);   // notify_config.cpp
void read_runtime_files(Section& s, Reading& r);   // agent_config.cpp
void read_keep_images(Section& s, Reading& r);     // agent_config.cpp
void read_agent_peers(Section& s, Reading& r);     // agent_config.cpp
void read_preheat(Section& s, Reading& r);         // agent_config.cpp
// The agent's URL as its node's runtime reaches it (the listen address, a wildcard as loopback).
std::string agent_mirror_url(const http::ServerOptions& server);

}  // namespace berth::config
