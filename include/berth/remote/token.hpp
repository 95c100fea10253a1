#pragma once
// A token endpoint's answer (the docker token flow), read as untrusted input: bounded, and only a
// token that can go back out in a header. The fuzzer (tests/fuzz/fuzz_upstream_answers.cpp) drives it.
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace berth::remote {

constexpr std::size_t max_token_bytes = 64 << 10;

struct Token {
    std::string value;
    std::chrono::seconds lifetime;
};
// {"token"|"access_token", "expires_in"}; nullopt for anything else.
std::optional<Token> parse_token(std::string_view body);

}  // namespace berth::remote
