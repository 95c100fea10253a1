// The fill's repositories, tags, shared blobs and manifests.
#include "fill_layout.hpp"

#include <algorithm>
#include <cstdio>

#include "blobs.hpp"
#include "manifests.hpp"

namespace berth::bench {

FillLayout::FillLayout(const Options& o) : prefix(o.repo_prefix) {
    per_repo = std::max<std::uint64_t>(1, (o.total + o.repos - 1) / o.repos);
    config = make_config("fill", prefix);
    layer.resize(1024);
    SplitMix{0x5eed}.fill(reinterpret_cast<unsigned char*>(layer.data()), layer.size());
    config_digest = sha256_digest(config.data(), config.size());
    layer_digest = sha256_digest(layer.data(), layer.size());
    Json m = manifest_json(config_digest, config.size(), layer_digest, layer.size());
    m["annotations"] = Json::object({{"org.example.fill", std::string(JsonTemplate::kPlaceholder)}});
    manifest_template = JsonTemplate(m);
}

std::string FillLayout::repo_of_index(std::uint64_t r) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "/r%05llu", static_cast<unsigned long long>(r));
    return prefix + buf;
}

std::string FillLayout::tag(std::uint64_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "t%07llu", static_cast<unsigned long long>(i));
    return buf;
}

std::string FillLayout::manifest(std::uint64_t i) const { return manifest_template.fill(std::to_string(i)); }

}  // namespace berth::bench
