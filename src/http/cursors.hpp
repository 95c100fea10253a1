#pragma once
// Paging cursors that name nothing the caller may not see. A page filtered to what the caller
// may pull reads on past hidden names (read_visible), so it never stops at one unless a request's
// reading budget runs out; then the next page's `last` is that name sealed (AES-256-GCM over the
// name padded to a fixed length, "~" + base64url): opaque to the caller, of one length whatever it
// names, opened by any replica (the key is derived from the cluster's secret for this purpose
// alone). Names never begin with "~", so a `last` a client wrote itself is taken as it is: a page
// after it lists the visible names that follow it, the same whether it exists or not.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace berth::http {

class Cursors {
public:
    // key: 32 bytes, or "" for a key of this process only.
    explicit Cursors(std::string key);
    // The `last` of the next page: the name itself when the caller may see it, else sealed.
    std::string next(const std::string& name, bool visible) const;
    // The name a `last` parameter stands for; throws 400 for a sealed one this cluster did not seal.
    std::string open(const std::string& last) const;
    static bool sealed(const std::string& last) { return last.starts_with("~"); }
    // Any text sealed the same way, padded with NULs to a multiple of block bytes (so its length
    // says little of it); unseal gives it back, or throws 400 with `refusal` for anything else.
    std::string seal(const std::string& text, std::size_t block) const;
    std::string unseal(const std::string& sealed, std::size_t max_chars, const char* refusal) const;

private:
    std::string key_;
};

// A page of items the caller may see, read on past hidden ones, after `last` (the request's
// parameter, opened here). read(after, limit) gives a page of the items after `after` in order:
// {items, more}; key(item) is an item's name, visible(item) whether the caller may see it. At most
// budget items are read; `next` is where the following page starts (a visible name, or a sealed one
// where the budget ran out on a hidden one, or where a page read nothing after a sealed `last`).
template <typename Item>
struct VisiblePage {
    std::vector<Item> items;
    std::optional<std::string> next;
};

template <typename Item, typename Read, typename Key, typename Visible>
VisiblePage<Item> read_visible(const Cursors& cursors, const std::string& last, std::size_t n, std::size_t budget,
                               Read read, Key key, Visible visible) {
    VisiblePage<Item> page;
    std::string position = cursors.open(last);
    // A `last` the caller wrote is theirs to see again; one sealed stays sealed (n=0 reads nothing).
    bool position_visible = !Cursors::sealed(last), more = true;
    for (std::size_t read_count = 0; more && page.items.size() < n && read_count < budget;) {
        auto chunk = read(position, std::min<std::size_t>(budget - read_count, 1000));
        more = chunk.more;
        for (std::size_t i = 0; i < chunk.items.size(); ++i) {
            ++read_count;
            position = key(chunk.items[i]);
            position_visible = visible(chunk.items[i]);
            if (position_visible) page.items.push_back(std::move(chunk.items[i]));
            // Stopped inside the chunk: what follows is still to read.
            if ((page.items.size() == n || read_count == budget) && i + 1 < chunk.items.size()) more = true;
            if (page.items.size() == n || read_count == budget) break;
        }
    }
    if (more) page.next = cursors.next(position, position_visible);
    return page;
}

}  // namespace berth::http
