#pragma once
// Where manifest i of a fill-manifests fill goes, and what it holds. Deterministic, so
// that a fill can be grown in steps (--first) and a caller can name any manifest of it.
#include <cstdint>
#include <string>

#include "manifests.hpp"
#include "options.hpp"

namespace berth::bench {

struct FillLayout {
    std::string prefix;
    std::uint64_t per_repo = 1;
    std::string config, layer;  // the two blobs every manifest shares
    std::string config_digest, layer_digest;
    JsonTemplate manifest_template;  // the annotation's value left out

    explicit FillLayout(const Options& o);

    // <prefix>/r<r, 5 digits>: repository r of the fill.
    std::string repo_of_index(std::uint64_t r) const;
    // The repository of manifest i.
    std::string repo(std::uint64_t i) const { return repo_of_index(i / per_repo); }
    // t<i, 7 digits>: the tag of manifest i.
    static std::string tag(std::uint64_t i);
    // The shared config and layer, and an annotation that makes manifest i unlike any other.
    std::string manifest(std::uint64_t i) const;
};

}  // namespace berth::bench
