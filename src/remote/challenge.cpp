#include "berth/remote/challenge.hpp"

#include <cctype>

namespace berth::remote {
namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool token_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

Challenge parse_challenge(std::string_view text) {
    Challenge out;
    std::size_t i = 0;
    auto skip_space = [&] {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    };
    auto token = [&] {
        auto start = i;
        while (i < text.size() && token_char(text[i])) ++i;
        return text.substr(start, i - start);
    };
    skip_space();
    out.scheme = lower(token());
    while (i < text.size()) {
        skip_space();
        if (i < text.size() && text[i] == ',') {
            ++i;
            continue;
        }
        auto name = lower(token());
        skip_space();
        if (name.empty() || i >= text.size() || text[i] != '=') break;  // another challenge, or garbage
        ++i;
        skip_space();
        std::string value;
        if (i < text.size() && text[i] == '"') {
            for (++i; i < text.size() && text[i] != '"'; ++i) {
                if (text[i] == '\\' && i + 1 < text.size()) ++i;
                value += text[i];
            }
            ++i;
        } else {
            value = std::string(token());
        }
        out.params.emplace(std::move(name), std::move(value));
    }
    return out;
}

}  // namespace berth::remote
