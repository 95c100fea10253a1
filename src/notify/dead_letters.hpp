#pragma once
// An endpoint's dead letters: the events that did not reach it within its max_age, kept on the
// replica that gave up on them (storage/layout.hpp: notifications/<endpoint>.dead), newest last.
#include <cstddef>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

namespace berth::notify {

class DeadLetters {
public:
    explicit DeadLetters(std::filesystem::path file) : file_(std::move(file)) {}
    void add(const std::vector<std::string>& events);
    // Newest first, after skipping `skip`.
    std::vector<std::string> list(std::size_t skip, std::size_t limit) const;

private:
    static constexpr std::uintmax_t max_bytes = 16 << 20;
    std::filesystem::path file_;
    mutable std::mutex mutex_;
};

}  // namespace berth::notify
