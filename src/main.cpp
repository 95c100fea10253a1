// berth: the command line. Each command is in src/cli/ (commands.hpp); node/ builds and runs
// what `berth serve` serves.
#include <csignal>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "berth/config/config.hpp"
#include "cli/commands.hpp"

namespace {

constexpr const char* usage_text = R"(berth — an OCI distribution-spec registry

Usage:
  berth serve [--config FILE] [--listen HOST:PORT] [--root DIR]
  berth gc [--config FILE] [--root DIR] [--dry-run]
  berth lineage --root DIR [--json] REPOSITORY[:TAG|@DIGEST]
  berth backup --root DIR --to TARGET [--incremental]
  berth backup verify TARGET
  berth backup prune TARGET --keep N
  berth restore --from TARGET --root DIR [--backup ID] [--as-new-replica]
  berth import (--root DIR [--config FILE] | --url URL) SOURCE... [--repository R] [--repository-prefix P]
  berth export (--root DIR | --url URL) REPOSITORY[:TAG|@DIGEST]... --to DIR|FILE.tar [--since TIME]
  berth migrate --to-s3 --config FILE [--root DIR] [--parallel N]
  berth agent-runtime apply|check|remove --config FILE [--host-root DIR]
  berth credential-provider [--registry HOST[:PORT]]... [--username NAME]
  berth version
  berth help

Run 'berth COMMAND --help' for what a command does.
)";

int version(const std::vector<std::string>& args) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
        std::cout << "Usage: berth version\n\nPrints berth's version.\n";
        return 0;
    }
    std::cout << "berth " << BERTH_VERSION << "\n";
    return 0;
}

struct Command {
    std::string_view name;
    int (*run)(const std::vector<std::string>& args);
};

constexpr Command commands[] = {
    {"serve", berth::cli::serve},
    {"gc", berth::cli::gc},
    {"lineage", berth::cli::lineage},
    {"backup", berth::cli::backup},
    {"restore", berth::cli::restore},
    {"import", berth::cli::import},
    {"export", berth::cli::export_images},
    {"migrate", berth::cli::migrate},
    {"agent-runtime", berth::cli::agent_runtime},
    {"credential-provider", berth::cli::credential_provider},
    {"version", version},
    {"--version", version},
};

}  // namespace

int main(int argc, char** argv) {
    // sendfile(2) has no MSG_NOSIGNAL: a client that resets the connection in
    // the middle of a blob would otherwise kill the process. EPIPE is handled.
    std::signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::cout << usage_text;
        return args.empty() ? 2 : 0;
    }
    try {
        for (auto& command : commands)
            if (args[0] == command.name) return command.run({args.begin() + 1, args.end()});
        std::cerr << "berth: unknown command '" << args[0] << "'\n\n" << usage_text;
        return 2;
    } catch (const berth::config::ConfigError& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 2;
    } catch (const berth::cli::UsageError& error) {
        std::cerr << "berth " << args[0] << ": " << error.what() << " (see berth " << args[0] << " --help)\n";
        return 2;
    } catch (const std::exception& error) {
        std::cerr << "berth: " << error.what() << "\n";
        return 1;
    }
}
