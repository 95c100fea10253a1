#include "keys.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "berth/observe/log.hpp"

namespace berth::trust {
namespace {

constexpr std::size_t max_key_file_bytes = 64 << 10;

EVP_PKEY* pkey_of(void* p) { return static_cast<EVP_PKEY*>(p); }

bool digest_verify(EVP_PKEY* key, const EVP_MD* md, std::string_view data, std::string_view signature) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, md, nullptr, key) != 1) return false;
    return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                            reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
}

std::string read_key_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::string text(max_key_file_bytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_key_file_bytes) throw std::runtime_error(path + " is too large for a public key");
    return text;
}

}  // namespace

PublicKey::PublicKey(void* pkey, std::string name) : pkey_(pkey), name_(std::move(name)) {}
PublicKey::~PublicKey() { EVP_PKEY_free(pkey_of(pkey_)); }

std::shared_ptr<PublicKey> PublicKey::from_pem(std::string_view pem, std::string name) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
    EVP_PKEY* key = bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr;
    if (!key) throw std::runtime_error(name + " holds no PEM public key");
    const int type = EVP_PKEY_get_base_id(key);
    if (type != EVP_PKEY_EC && type != EVP_PKEY_RSA && type != EVP_PKEY_ED25519) {
        EVP_PKEY_free(key);
        throw std::runtime_error(name + ": only ECDSA, RSA and Ed25519 keys verify signatures");
    }
    if (type == EVP_PKEY_RSA && EVP_PKEY_get_bits(key) < 2048) {
        EVP_PKEY_free(key);
        throw std::runtime_error(name + ": an RSA key needs at least 2048 bits");
    }
    return std::shared_ptr<PublicKey>(new PublicKey(key, std::move(name)));
}

bool PublicKey::verify(std::string_view data, std::string_view signature) const {
    auto* key = pkey_of(pkey_);
    switch (EVP_PKEY_get_base_id(key)) {
        case EVP_PKEY_ED25519: return digest_verify(key, nullptr, data, signature);
        case EVP_PKEY_RSA: return digest_verify(key, EVP_sha256(), data, signature);
        default: {
            // cosign 2.6 and later hash with the curve's own (SHA-384 on P-384, SHA-512 on
            // P-521); containers/image and older cosign with SHA-256 on every curve.
            const int bits = EVP_PKEY_get_bits(key);
            const EVP_MD* own = bits > 384 ? EVP_sha512() : bits > 256 ? EVP_sha384() : EVP_sha256();
            return digest_verify(key, own, data, signature) ||
                   (own != EVP_sha256() && digest_verify(key, EVP_sha256(), data, signature));
        }
    }
}

KeySet::KeySet(std::vector<std::string> files) {
    for (auto& path : files) {
        std::error_code error;
        auto mtime = std::filesystem::last_write_time(path, error);
        files_.push_back({path, mtime, PublicKey::from_pem(read_key_file(path), path)});
    }
    checked_ = std::chrono::steady_clock::now();
}

KeySet::Snapshot KeySet::current() {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - checked_ >= std::chrono::seconds(1)) {
        checked_ = now;
        for (auto& file : files_) {
            std::error_code error;
            auto mtime = std::filesystem::last_write_time(file.path, error);
            if (error || mtime == file.mtime) continue;
            try {
                file.key = PublicKey::from_pem(read_key_file(file.path), file.path);
                file.mtime = mtime;
                ++generation_;
                observe::log("info", "signature key read again", {{"file", file.path}});
            } catch (const std::exception& failure) {
                file.mtime = mtime;  // said once per change, not every second
                observe::log("warn", "signature key unusable; keeping the last good one",
                             {{"file", file.path}, {"error", std::string(failure.what())}});
            }
        }
    }
    Snapshot snapshot{{}, generation_};
    for (auto& file : files_) snapshot.keys.push_back(file.key);
    return snapshot;
}

}  // namespace berth::trust
