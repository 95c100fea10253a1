#include "layout_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <utility>

namespace berth::transfer {

LayoutWriter::LayoutWriter(const std::filesystem::path& to) : dir_(to) {
    if (to.extension() == ".tar") tar_.emplace(to);
    else std::filesystem::create_directories(to / "blobs");
}

bool LayoutWriter::has(const oci::Digest& digest) const {
    if (written_.count(digest.str())) return true;
    return !tar_ && std::filesystem::exists(path_of(digest));
}

void LayoutWriter::add(const oci::Digest& digest,
                       const std::function<void(const std::function<void(std::uint64_t)>&,
                                                const std::function<void(const char*, std::size_t)>&)>& produce,
                       Progress& progress) {
    oci::Hasher hasher(digest.algorithm());
    const auto scratch = dir_ / ("blobs/.partial-" + digest.hex());
    // The scratch file's descriptor, closed and the file removed if this ends early.
    struct Scratch {
        int fd = -1;
        std::filesystem::path path;
        ~Scratch() {
            if (fd < 0) return;
            ::close(fd);
            std::error_code ignored;
            std::filesystem::remove(path, ignored);
        }
    } file{-1, scratch};
    int& fd = file.fd;
    produce(
        [&](std::uint64_t size) {
            if (tar_)
                tar_->begin("blobs/" + std::string(oci::algorithm_name(digest.algorithm())) + "/" + digest.hex(), size);
            else {
                std::filesystem::create_directories(path_of(digest).parent_path());
                fd = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (fd < 0) throw std::runtime_error("cannot write " + scratch.string());
            }
        },
        [&](const char* data, std::size_t n) {
            hasher.update(data, n);
            progress.bytes += n;
            if (tar_) return tar_->write(data, n);
            for (std::size_t done = 0; done < n;) {
                auto w = ::write(fd, data + done, n - done);
                if (w <= 0) throw std::runtime_error("cannot write " + scratch.string());
                done += static_cast<std::size_t>(w);
            }
        });
    if (fd >= 0 && ::fsync(fd) != 0) throw std::runtime_error("cannot sync " + scratch.string());
    if (hasher.peek() != digest) throw std::runtime_error("blob " + digest.str() + " read back as other bytes");
    if (!tar_) {
        ::close(std::exchange(fd, -1));
        std::filesystem::rename(scratch, path_of(digest));
    }
    written_.insert(digest.str());
}

void LayoutWriter::add_bytes(const oci::Digest& digest, const std::string& bytes, Progress& progress) {
    if (has(digest)) return;
    add(
        digest,
        [&](auto& begin, auto& sink) {
            begin(bytes.size());
            sink(bytes.data(), bytes.size());
        },
        progress);
}

void LayoutWriter::finish(const nlohmann::json& index) {
    const std::string layout = R"({"imageLayoutVersion":"1.0.0"})";
    const auto text = index.dump(2);
    if (tar_) {
        for (auto& [name, content] : {std::pair{"oci-layout", layout}, std::pair{"index.json", text}}) {
            tar_->begin(name, content.size());
            tar_->write(content.data(), content.size());
        }
        tar_->finish();
        return;
    }
    for (auto& [name, content] : {std::pair{"oci-layout", layout}, std::pair{"index.json", text}}) {
        std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
        out << content;
        if (!out.flush()) throw std::runtime_error("cannot write " + (dir_ / name).string());
    }
}

std::filesystem::path LayoutWriter::path_of(const oci::Digest& digest) const {
    return dir_ / "blobs" / std::string(oci::algorithm_name(digest.algorithm())) / digest.hex();
}

}  // namespace berth::transfer
