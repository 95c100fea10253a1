#pragma once
// Keys derived from one shared secret, one per purpose, so that no purpose ever holds the secret
// itself: the secret is stretched once with scrypt (a guess at a weak secret then costs a tenth of
// a second, not a hash), and each purpose's key is HKDF-Expand of that under the purpose's label.
#include <string>
#include <string_view>

namespace berth::oci {

class DerivedKeys {
public:
    explicit DerivedKeys(std::string_view secret);
    // 32 bytes, independent of every other label's.
    std::string key(std::string_view label) const;

private:
    std::string stretched_;
};

}  // namespace berth::oci
