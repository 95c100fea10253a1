#include "berth/oci/json.hpp"

#include <stdexcept>
#include <string>

namespace berth::oci {
namespace {

using nlohmann::json;

// Heap bytes nlohmann and glibc spend per value (64-bit): a value's slot is
// 16 bytes, doubled for a vector's spare capacity; a string is a heap
// std::string plus its characters; an object member is a map node with its
// key. Each allocation carries 16 bytes of malloc's own.
constexpr std::size_t slot = 32, string_base = 48 + 32, array_base = 48 + slot, object_base = 64 + slot,
                      member_base = 96 + 32;

// Counts and checks, builds nothing; returning false stops the parse.
class Estimate : public nlohmann::json_sax<json> {
public:
    Estimate(std::size_t max_depth, std::size_t budget) : max_depth_(max_depth), budget_(budget) {}

    bool null() override { return add(slot); }
    bool boolean(bool) override { return add(slot); }
    bool number_integer(number_integer_t) override { return add(slot); }
    bool number_unsigned(number_unsigned_t) override { return add(slot); }
    bool number_float(number_float_t, const string_t&) override { return add(slot); }
    bool string(string_t& value) override { return add(string_base + value.size()); }
    bool binary(binary_t& value) override { return add(string_base + value.size()); }
    bool start_object(std::size_t) override { return enter() && add(object_base); }
    bool key(string_t& value) override { return add(member_base + value.size()); }
    bool end_object() override { return leave(); }
    bool start_array(std::size_t) override { return enter() && add(array_base); }
    bool end_array() override { return leave(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

    std::size_t cost() const { return cost_; }

private:
    bool add(std::size_t bytes) {
        cost_ += bytes;
        return cost_ <= budget_;
    }
    bool enter() { return ++depth_ <= max_depth_; }
    bool leave() {
        --depth_;
        return true;
    }

    std::size_t max_depth_, budget_, depth_ = 0, cost_ = 0;
};

// The strings of one top-level array, nothing else kept.
class StringsOf : public nlohmann::json_sax<json> {
public:
    StringsOf(std::string_view key, std::size_t max_depth, const std::function<bool(std::string&&)>& each)
        : key_(key), max_depth_(max_depth), each_(each) {}

    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t& value) override { return !in_list() || each_(std::move(value)); }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override {
        if (depth_ == 0) top_object_ = true;
        return ++depth_ <= max_depth_;
    }
    bool key(string_t& value) override {
        if (depth_ == 1) at_key_ = value == key_;
        return true;
    }
    bool end_object() override { return leave(); }
    bool start_array(std::size_t) override {
        if (depth_ == 1 && at_key_) list_depth_ = 2;
        return ++depth_ <= max_depth_;
    }
    bool end_array() override { return leave(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

    bool top_object() const { return top_object_; }

private:
    bool in_list() const { return list_depth_ && depth_ == list_depth_; }
    bool leave() {
        if (in_list()) list_depth_ = 0;
        --depth_;
        return true;
    }

    std::string_view key_;
    std::size_t max_depth_;
    const std::function<bool(std::string&&)>& each_;
    std::size_t depth_ = 0, list_depth_ = 0;
    bool at_key_ = false, top_object_ = false;
};

}  // namespace

std::size_t json_cost(std::string_view text, std::size_t max_depth) {
    Estimate estimate(max_depth, SIZE_MAX);
    if (!json::sax_parse(text, &estimate)) return 0;
    return estimate.cost();
}

json parse_json(std::string_view text, const JsonLimits& limits) {
    const auto budget = std::max(limits.cost_floor, text.size() * limits.max_cost_per_byte);
    Estimate estimate(limits.max_depth, budget);
    if (!json::sax_parse(text, &estimate)) return json(json::value_t::discarded);
    return json::parse(text, nullptr, false);
}

json parse_json_or_throw(std::string_view text, const char* what, const JsonLimits& limits) {
    auto doc = parse_json(text, limits);
    if (doc.is_discarded()) throw std::invalid_argument(std::string(what) + " is not JSON within bounds");
    return doc;
}

bool for_each_string_in(std::string_view text, std::string_view key, std::size_t max_depth,
                        const std::function<bool(std::string&&)>& each) {
    StringsOf strings(key, max_depth, each);
    return json::sax_parse(text, &strings) && strings.top_object();
}

}  // namespace berth::oci
