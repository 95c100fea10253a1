#include "dead_letters.hpp"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "berth/observe/log.hpp"

namespace berth::notify {

void DeadLetters::add(const std::vector<std::string>& events) {
    std::lock_guard lock(mutex_);
    std::error_code error;
    std::filesystem::create_directories(file_.parent_path(), error);
    if (std::filesystem::file_size(file_, error) > max_bytes && !error)
        std::filesystem::rename(file_, file_.string() + ".1", error);
    std::ofstream out(file_, std::ios::app);
    for (auto& event : events) out << event << '\n';
    if (!out) observe::log("error", "cannot keep dead letters", {{"file", file_.string()}});
}

std::vector<std::string> DeadLetters::list(std::size_t skip, std::size_t limit) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> lines;
    std::ifstream in(file_);
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(std::move(line));
    std::reverse(lines.begin(), lines.end());
    std::vector<std::string> out;
    for (std::size_t i = skip; i < lines.size() && out.size() < limit; ++i) out.push_back(std::move(lines[i]));
    return out;
}

}  // namespace berth::notify
