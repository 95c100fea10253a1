// The `backup` section: backups the server takes into a directory it mounts (docs/backup.md).
#include "section.hpp"

namespace berth::config {

void read_backup(Section& s, Reading& r) {
    auto& backup = r.config.backup;
    std::string target, secret_file;
    s.string("target", target);
    s.string("secret_file", secret_file);
    s.number("keep", backup.keep, 100000);
    s.seconds("interval_seconds", backup.interval);
    if (target.empty()) throw ConfigError("backup.target must name the directory backups go to");
    backup.target = r.path_of(target);
    // The secret is HTTP's to check (POST /_berth/v1/backup), not the backups'.
    auto& secret = r.config.server.backup_secret;
    if (!secret_file.empty()) {
        secret = secret_from("backup.secret_file", r.path_of(secret_file));
        if (secret.size() < 16) throw ConfigError("backup.secret_file must hold a secret of at least 16 characters");
    }
    if (secret.empty() && backup.interval.count() == 0)
        throw ConfigError("backup: give secret_file (for POST /_berth/v1/backup), interval_seconds, or both");
}

}  // namespace berth::config
