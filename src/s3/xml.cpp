// S3's XML answers and CompleteMultipartUpload's body (xml.hpp).
#include "xml.hpp"

#include <expat.h>

#include <charconv>
#include <functional>
#include <memory>
#include <utility>

#include "dates.hpp"

namespace berth::s3::xml {
namespace {

// Called as each element closes, with its path below the root ("Contents/Key"; "" for the root
// itself) and its own text, which the visitor may take.
using Visit = std::function<void(std::string_view path, std::string& text)>;

struct Walker {
    const Limits& limits;
    std::string_view expected_root;  // "": any
    const Visit& visit;
    XML_Parser parser;
    std::string path;                // from the root, '/'-separated
    std::vector<std::string> texts;  // one per open element
    std::string root;
    std::string refused;  // why the walk was stopped

    void stop(std::string why) {
        if (refused.empty()) refused = std::move(why);
        XML_StopParser(parser, XML_FALSE);
    }
    // Handlers run inside expat's C frames, which an exception must not cross.
    template <typename F>
    void guarded(F&& handle) {
        if (!refused.empty()) return;  // expat may still report the token it was in
        try {
            handle();
        } catch (const std::exception& error) {
            stop(error.what());
        } catch (...) {
            stop("failed reading the XML");
        }
    }
};

void XMLCALL on_start(void* data, const XML_Char* name, const XML_Char** /*attributes*/) {
    auto& walker = *static_cast<Walker*>(data);
    walker.guarded([&] {
        if (walker.texts.size() >= walker.limits.max_depth)
            return walker.stop("XML nested deeper than " + std::to_string(walker.limits.max_depth));
        if (walker.texts.empty()) {
            walker.root = name;
            if (!walker.expected_root.empty() && walker.root != walker.expected_root)
                return walker.stop("the answer is <" + walker.root + ">, not <" + std::string(walker.expected_root) +
                                   ">");
        } else {
            walker.path += '/';
        }
        walker.path += name;
        walker.texts.emplace_back();
    });
}

void XMLCALL on_end(void* data, const XML_Char* /*name*/) {
    auto& walker = *static_cast<Walker*>(data);
    walker.guarded([&] {
        const auto below_root =
            std::string_view(walker.path).substr(std::min(walker.path.size(), walker.root.size() + 1));
        walker.visit(below_root, walker.texts.back());
        walker.texts.pop_back();
        const auto slash = walker.path.rfind('/');
        walker.path.erase(slash == std::string::npos ? 0 : slash);
    });
}

void XMLCALL on_text(void* data, const XML_Char* text, int length) {
    auto& walker = *static_cast<Walker*>(data);
    walker.guarded([&] {
        if (!walker.texts.empty()) walker.texts.back().append(text, static_cast<std::size_t>(length));
    });
}

// S3 never sends a DTD; refusing the DOCTYPE leaves no room for entity expansion (billion
// laughs) or external entities.
void XMLCALL on_doctype(void* data, const XML_Char*, const XML_Char*, const XML_Char*, int) {
    static_cast<Walker*>(data)->stop("a DOCTYPE in an S3 answer");
}

void XMLCALL on_entity(void* data, const XML_Char*, int, const XML_Char*, int, const XML_Char*, const XML_Char*,
                       const XML_Char*, const XML_Char*) {
    static_cast<Walker*>(data)->stop("an entity declaration in an S3 answer");
}

// Returns the root element's name.
std::string walk(std::string_view body, const Limits& limits, std::string_view expected_root, const Visit& visit) {
    if (body.size() > limits.max_bytes)
        throw Malformed("an XML answer of " + std::to_string(body.size()) + " bytes (at most " +
                        std::to_string(limits.max_bytes) + ")");
    std::unique_ptr<XML_ParserStruct, decltype(&XML_ParserFree)> parser(XML_ParserCreate(nullptr), XML_ParserFree);
    if (!parser) throw std::bad_alloc();
    Walker walker{limits, expected_root, visit, parser.get(), {}, {}, {}, {}};
    XML_SetUserData(parser.get(), &walker);
    XML_SetElementHandler(parser.get(), on_start, on_end);
    XML_SetCharacterDataHandler(parser.get(), on_text);
    XML_SetStartDoctypeDeclHandler(parser.get(), on_doctype);
    XML_SetEntityDeclHandler(parser.get(), on_entity);
    if (XML_Parse(parser.get(), body.data(), static_cast<int>(body.size()), XML_TRUE) != XML_STATUS_OK) {
        if (!walker.refused.empty()) throw Malformed(walker.refused);
        throw Malformed(std::string("malformed XML: ") + XML_ErrorString(XML_GetErrorCode(parser.get())) + " at line " +
                        std::to_string(XML_GetCurrentLineNumber(parser.get())));
    }
    return walker.root;
}

std::uint64_t number(const std::string& text, std::string_view field) {
    std::uint64_t value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size())
        throw Malformed("<" + std::string(field) + "> is not a number: " + text.substr(0, 64));
    return value;
}

bool boolean(const std::string& text, std::string_view field) {
    if (text == "true") return true;
    if (text == "false") return false;
    throw Malformed("<" + std::string(field) + "> is neither true nor false: " + text.substr(0, 64));
}

Time time_of(const std::string& text, std::string_view field) {
    auto time = parse_iso8601(text);
    if (!time) throw Malformed("<" + std::string(field) + "> is not an ISO 8601 time: " + text.substr(0, 64));
    return *time;
}

// A listing that says there is more but not where it goes on would be asked again forever.
void require_next(bool truncated, const std::string& next, std::string_view field) {
    if (truncated && next.empty()) throw Malformed("a truncated listing without <" + std::string(field) + ">");
}

}  // namespace

std::string root_name(std::string_view body, const Limits& limits) {
    return walk(body, limits, {}, [](std::string_view, std::string&) {});
}

std::optional<ErrorDocument> parse_error(std::string_view body, const Limits& limits) {
    ErrorDocument document;
    try {
        walk(body, limits, "Error", [&](std::string_view path, std::string& text) {
            if (path == "Code") document.code = std::move(text);
            else if (path == "Message") document.message = std::move(text);
        });
    } catch (const Malformed&) {
        return std::nullopt;
    }
    return document;
}

std::string parse_upload_id(std::string_view body, const Limits& limits) {
    std::string upload_id;
    walk(body, limits, "InitiateMultipartUploadResult", [&](std::string_view path, std::string& text) {
        if (path == "UploadId") upload_id = std::move(text);
    });
    if (upload_id.empty()) throw Malformed("InitiateMultipartUploadResult without an <UploadId>");
    return upload_id;
}

ObjectPage parse_object_page(std::string_view body, const Limits& limits) {
    ObjectPage page;
    ListedObject object;
    walk(body, limits, "ListBucketResult", [&](std::string_view path, std::string& text) {
        if (path == "Contents/Key") {
            object.key = std::move(text);
        } else if (path == "Contents/Size") {
            object.size = number(text, "Size");
        } else if (path == "Contents/LastModified") {
            object.last_modified = time_of(text, "LastModified");
        } else if (path == "Contents/ETag") {
            object.etag = std::move(text);
        } else if (path == "Contents") {
            if (object.key.empty()) throw Malformed("<Contents> without a <Key>");
            page.objects.push_back(std::exchange(object, {}));
        } else if (path == "IsTruncated") {
            page.truncated = boolean(text, "IsTruncated");
        } else if (path == "NextContinuationToken") {
            page.next_continuation_token = std::move(text);
        }
    });
    require_next(page.truncated, page.next_continuation_token, "NextContinuationToken");
    return page;
}

UploadPage parse_upload_page(std::string_view body, const Limits& limits) {
    UploadPage page;
    Upload upload;
    walk(body, limits, "ListMultipartUploadsResult", [&](std::string_view path, std::string& text) {
        if (path == "Upload/Key") {
            upload.key = std::move(text);
        } else if (path == "Upload/UploadId") {
            upload.upload_id = std::move(text);
        } else if (path == "Upload/Initiated") {
            upload.initiated = time_of(text, "Initiated");
        } else if (path == "Upload") {
            if (upload.key.empty() || upload.upload_id.empty()) throw Malformed("<Upload> without a key or an id");
            page.uploads.push_back(std::exchange(upload, {}));
        } else if (path == "IsTruncated") {
            page.truncated = boolean(text, "IsTruncated");
        } else if (path == "NextKeyMarker") {
            page.next_key_marker = std::move(text);
        } else if (path == "NextUploadIdMarker") {
            page.next_upload_id_marker = std::move(text);
        }
    });
    require_next(page.truncated, page.next_key_marker, "NextKeyMarker");
    return page;
}

std::string escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r')
                    throw std::invalid_argument("a control character XML cannot carry");
                out += c;
        }
    }
    return out;
}

std::string complete_multipart_body(const std::vector<Part>& parts) {
    if (parts.empty()) throw std::invalid_argument("a multipart upload completed without parts");
    std::string body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    int previous = 0;
    for (const auto& part : parts) {
        if (part.number <= previous || part.number > 10000)
            throw std::invalid_argument("part numbers must ascend within 1..10000, not " + std::to_string(part.number) +
                                        " after " + std::to_string(previous));
        if (part.etag.empty()) throw std::invalid_argument("part " + std::to_string(part.number) + " without an ETag");
        previous = part.number;
        body += "<Part><PartNumber>" + std::to_string(part.number) + "</PartNumber><ETag>" + escape(part.etag) +
                "</ETag></Part>";
    }
    return body + "</CompleteMultipartUpload>";
}

}  // namespace berth::s3::xml
