#pragma once
// berth's commands, each parsed the one way parse_arguments does: options with values, flags,
// and the rest in order. An unknown option is an error, never ignored.
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace berth::cli {

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Arguments {
    std::map<std::string, std::vector<std::string>> values;  // --option VALUE, repeatable
    std::set<std::string> flags;                             // --flag
    std::vector<std::string> rest;
    bool help = false;

    std::optional<std::string> value(const std::string& option) const {
        auto it = values.find(option);
        return it == values.end() ? std::nullopt : std::optional(it->second.back());
    }
    std::string required(const std::string& option) const {
        auto found = value(option);
        if (!found) throw UsageError(option + " is required");
        return *found;
    }
    bool flag(const std::string& name) const { return flags.count(name) > 0; }
};

inline Arguments parse_arguments(const std::vector<std::string>& args, const std::set<std::string>& valued,
                                 const std::set<std::string>& flags) {
    Arguments out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& arg = args[i];
        if (arg == "-h" || arg == "--help") out.help = true;
        else if (valued.count(arg)) {
            if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
            out.values[arg].push_back(args[++i]);
        } else if (flags.count(arg)) out.flags.insert(arg);
        else if (arg.starts_with("-")) throw UsageError("unknown option " + arg);
        else out.rest.push_back(arg);
    }
    return out;
}

// Each command: its arguments after the command's name; returns the exit status.
int serve(const std::vector<std::string>& args);
int gc(const std::vector<std::string>& args);
int credential_provider(const std::vector<std::string>& args);
int lineage(const std::vector<std::string>& args);
int backup(const std::vector<std::string>& args);
int restore(const std::vector<std::string>& args);
int import(const std::vector<std::string>& args);
int export_images(const std::vector<std::string>& args);
int migrate(const std::vector<std::string>& args);
int agent_runtime(const std::vector<std::string>& args);

}  // namespace berth::cli
