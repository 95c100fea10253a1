#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <string>

#include "s3/answers.hpp"
#include "s3/dates.hpp"
#include "s3/xml.hpp"

using namespace berth;
using namespace std::chrono;

namespace {

const std::string declaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
const std::string ns = " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

}  // namespace

TEST_CASE("S3 XML: an error document", "[s3][xml]") {
    const auto error = s3::xml::parse_error(declaration +
                                            "<Error><Code>NoSuchKey</Code><Message>The resource you requested does "
                                            "not exist</Message><Resource>/mybucket/myfoto.jpg</Resource>"
                                            "<RequestId>4442587FB7D0A2F9</RequestId></Error>");
    REQUIRE(error);
    CHECK(error->code == "NoSuchKey");
    CHECK(error->message == "The resource you requested does not exist");
    // Anything else is no error document: the caller falls back on the status.
    CHECK_FALSE(s3::xml::parse_error(""));
    CHECK_FALSE(s3::xml::parse_error("<html><body>502 Bad Gateway</body></html>"));
    CHECK_FALSE(s3::xml::parse_error("<Error><Code>SlowDown</Code>"));
    CHECK(s3::xml::root_name(declaration + "<Error><Code>InternalError</Code></Error>") == "Error");
    CHECK(s3::xml::root_name(declaration + "<CompleteMultipartUploadResult" + ns +
                             "><Location>http://x/b/k</Location><Bucket>b</Bucket><Key>k</Key><ETag></ETag>"
                             "</CompleteMultipartUploadResult>") == "CompleteMultipartUploadResult");
}

TEST_CASE("S3 XML: InitiateMultipartUploadResult", "[s3][xml]") {
    CHECK(s3::xml::parse_upload_id(declaration + "<InitiateMultipartUploadResult" + ns +
                                   "><Bucket>b</Bucket><Key>blobs/x</Key>"
                                   "<UploadId>2~iCw_lDY8VoNFDHTeUrWbVpmVLaDzSZc</UploadId>"
                                   "</InitiateMultipartUploadResult>") == "2~iCw_lDY8VoNFDHTeUrWbVpmVLaDzSZc");
    CHECK_THROWS_AS(s3::xml::parse_upload_id("<InitiateMultipartUploadResult><Key>k</Key>"
                                             "</InitiateMultipartUploadResult>"),
                    s3::xml::Malformed);
    CHECK_THROWS_AS(s3::xml::parse_upload_id("<Error><UploadId>x</UploadId></Error>"), s3::xml::Malformed);
}

TEST_CASE("S3 XML: ListBucketResult of ListObjectsV2", "[s3][xml]") {
    const auto page = s3::xml::parse_object_page(
        declaration + "<ListBucketResult" + ns +
        "><Name>b</Name><Prefix>blobs/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
        "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="
        "</NextContinuationToken>"
        "<Contents><Key>blobs/a &amp; b</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>"
        "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>"
        "<StorageClass>STANDARD</StorageClass><Owner><ID>o</ID><DisplayName>d</DisplayName></Owner></Contents>"
        "<Contents><Key>blobs/c</Key><LastModified>2023-01-02T03:04:05Z</LastModified><ETag>\"x-2\"</ETag>"
        "<Size>18446744073709551615</Size></Contents>"
        "</ListBucketResult>");
    REQUIRE(page.objects.size() == 2);
    CHECK(page.truncated);
    CHECK(page.next_continuation_token == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    CHECK(page.objects[0].key == "blobs/a & b");
    CHECK(page.objects[0].size == 434234);
    CHECK(page.objects[0].etag == "\"fba9dede5f27731c9771645a39863328\"");
    CHECK(page.objects[0].last_modified == sys_days{2009y / October / 12} + 17h + 50min + 30s);
    CHECK(page.objects[1].size == 18446744073709551615u);
    CHECK(page.objects[1].last_modified == sys_days{2023y / January / 2} + 3h + 4min + 5s);

    const auto last =
        s3::xml::parse_object_page("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
    CHECK(last.objects.empty());
    CHECK_FALSE(last.truncated);
}

TEST_CASE("S3 XML: a listing's fields are checked", "[s3][xml]") {
    auto page = [](const std::string& contents, const std::string& tail = "<IsTruncated>false</IsTruncated>") {
        return s3::xml::parse_object_page("<ListBucketResult>" + tail + "<Contents>" + contents +
                                          "</Contents></ListBucketResult>");
    };
    CHECK_NOTHROW(page("<Key>k</Key><Size>1</Size>"));
    CHECK_THROWS_AS(page("<Key>k</Key><Size>-1</Size>"), s3::xml::Malformed);
    CHECK_THROWS_AS(page("<Key>k</Key><Size>1 </Size>"), s3::xml::Malformed);
    CHECK_THROWS_AS(page("<Key>k</Key><Size>18446744073709551616</Size>"), s3::xml::Malformed);
    CHECK_THROWS_AS(page("<Key>k</Key><LastModified>yesterday</LastModified>"), s3::xml::Malformed);
    CHECK_THROWS_AS(page("<Size>1</Size>"), s3::xml::Malformed);
    CHECK_THROWS_AS(page("<Key>k</Key>", "<IsTruncated>yes</IsTruncated>"), s3::xml::Malformed);
    // More to come but no token to ask for it: refused rather than listed again forever.
    CHECK_THROWS_AS(page("<Key>k</Key>", "<IsTruncated>true</IsTruncated>"), s3::xml::Malformed);
    CHECK_THROWS_AS(s3::xml::parse_object_page("<ListMultipartUploadsResult/>"), s3::xml::Malformed);
}

TEST_CASE("S3 XML: ListMultipartUploadsResult", "[s3][xml]") {
    const auto page = s3::xml::parse_upload_page(
        declaration + "<ListMultipartUploadsResult" + ns +
        "><Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>"
        "<NextKeyMarker>uploads/b</NextKeyMarker><NextUploadIdMarker>2~b</NextUploadIdMarker>"
        "<MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated>"
        "<Upload><Key>uploads/a</Key><UploadId>2~a</UploadId><Initiator><ID>i</ID><DisplayName>d</DisplayName>"
        "</Initiator><Owner><ID>o</ID><DisplayName>d</DisplayName></Owner><StorageClass>STANDARD</StorageClass>"
        "<Initiated>2010-11-10T20:48:33.000Z</Initiated></Upload>"
        "<Upload><Key>uploads/b</Key><UploadId>2~b</UploadId><Initiated>2010-11-10T20:49:33.000Z</Initiated>"
        "</Upload></ListMultipartUploadsResult>");
    REQUIRE(page.uploads.size() == 2);
    CHECK(page.truncated);
    CHECK(page.next_key_marker == "uploads/b");
    CHECK(page.next_upload_id_marker == "2~b");
    CHECK(page.uploads[0].key == "uploads/a");
    CHECK(page.uploads[0].upload_id == "2~a");
    CHECK(page.uploads[0].initiated == sys_days{2010y / November / 10} + 20h + 48min + 33s);
    CHECK(page.uploads[1].upload_id == "2~b");
    CHECK_THROWS_AS(s3::xml::parse_upload_page("<ListMultipartUploadsResult><Upload><Key>k</Key></Upload>"
                                               "</ListMultipartUploadsResult>"),
                    s3::xml::Malformed);
    CHECK_THROWS_AS(s3::xml::parse_upload_page("<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
                                               "</ListMultipartUploadsResult>"),
                    s3::xml::Malformed);
}

TEST_CASE("S3 XML: hostile answers are refused", "[s3][xml]") {
    using s3::xml::Malformed;
    // Too deep: 8 levels are S3's and then some; 9 are refused before anything is built.
    std::string deep = "<ListBucketResult>", close = "</ListBucketResult>";
    for (int i = 1; i < 8; ++i) deep += "<a>", close = "</a>" + close;
    CHECK_NOTHROW(s3::xml::parse_object_page(deep + close));
    CHECK_THROWS_WITH(s3::xml::parse_object_page(deep + "<a></a>" + close), Catch::Contains("deeper than 8"));
    CHECK_THROWS_AS(s3::xml::root_name(std::string(100000, '<')), Malformed);

    // Too big: refused before parsing, whatever it holds.
    const std::string big = "<ListBucketResult>" + std::string(1 << 20, ' ') + "</ListBucketResult>";
    CHECK_THROWS_WITH(s3::xml::parse_object_page(big), Catch::Contains("bytes (at most 1048576)"));
    CHECK_NOTHROW(s3::xml::parse_object_page(big, {.max_bytes = 2 << 20}));
    CHECK_FALSE(s3::xml::parse_error("<Error><Code>" + std::string(2 << 20, 'x') + "</Code></Error>"));

    // Entities: no DOCTYPE at all, so neither a billion laughs nor an external entity.
    const std::string laughs =
        "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
        "<!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
        "<!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">]>"
        "<Error><Code>&lol3;</Code></Error>";
    CHECK_FALSE(s3::xml::parse_error(laughs));
    CHECK_THROWS_WITH(s3::xml::root_name(laughs), Catch::Contains("DOCTYPE"));
    CHECK_THROWS_WITH(s3::xml::root_name("<!DOCTYPE r SYSTEM \"file:///etc/passwd\"><Error>&xxe;</Error>"),
                      Catch::Contains("DOCTYPE"));
    CHECK_THROWS_AS(s3::xml::root_name("<Error>&undefined;</Error>"), Malformed);
    // XML's own entities and character references are only text.
    CHECK(s3::xml::parse_error("<Error><Code>&lt;&#65;&#x42;&gt;</Code></Error>")->code == "<AB>");

    // Malformed.
    for (const char* broken : {"", "not xml", "<Error>", "<Error></Code>", "<Error/><Error/>", "<a><b></a></b>",
                               "<Error>\xff\xfe</Error>", "<Error a='1' a='2'/>"}) {
        INFO(broken);
        CHECK_THROWS_AS(s3::xml::root_name(broken), Malformed);
        CHECK_FALSE(s3::xml::parse_error(broken));
    }
}

TEST_CASE("S3 XML: CompleteMultipartUpload's body", "[s3][xml]") {
    const auto body =
        s3::xml::complete_multipart_body({{1, "\"a54357aff0632cce46d942af68356b38\""}, {3, "\"0c78&<>\""}});
    CHECK(body == declaration +
                      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                      "<Part><PartNumber>1</PartNumber><ETag>&quot;a54357aff0632cce46d942af68356b38&quot;</ETag></Part>"
                      "<Part><PartNumber>3</PartNumber><ETag>&quot;0c78&amp;&lt;&gt;&quot;</ETag></Part>"
                      "</CompleteMultipartUpload>");
    // What berth writes, expat reads back as written.
    CHECK(s3::xml::root_name(body) == "CompleteMultipartUpload");
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({{2, "\"a\""}, {1, "\"b\""}}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({{1, "\"a\""}, {1, "\"b\""}}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({{0, "\"a\""}}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({{10001, "\"a\""}}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::complete_multipart_body({{1, ""}}), std::invalid_argument);
    CHECK_THROWS_AS(s3::xml::escape(std::string("a\0b", 3)), std::invalid_argument);
    CHECK(s3::xml::escape("it's \"x\"\t") == "it&apos;s &quot;x&quot;\t");
}

TEST_CASE("S3 times: ISO 8601 and Last-Modified", "[s3]") {
    CHECK(s3::parse_iso8601("2009-10-12T17:50:30.000Z") == sys_days{2009y / October / 12} + 17h + 50min + 30s);
    CHECK(s3::parse_iso8601("2009-10-12T17:50:30Z") == sys_days{2009y / October / 12} + 17h + 50min + 30s);
    for (const char* wrong : {"", "2009-10-12", "2009-10-12T17:50:30", "2009-10-12T17:50:30.Z", "2009-02-30T00:00:00Z",
                              "2009-10-12T24:00:00Z", "2009-10-12T17:50:30+01:00", "2009-10-12T17:50:30.000Zx"}) {
        INFO(wrong);
        CHECK_FALSE(s3::parse_iso8601(wrong));
    }
    CHECK(s3::parse_http_date("Wed, 12 Oct 2009 17:50:00 GMT") == sys_days{2009y / October / 12} + 17h + 50min);
    CHECK(s3::parse_http_date("Thu, 29 Feb 2024 00:00:01 GMT") == sys_days{2024y / February / 29} + 1s);
    for (const char* wrong : {"", "Wed, 12 Oct 2009 17:50:00 UTC", "Wed, 12 Okt 2009 17:50:00 GMT",
                              "Wed, 31 Apr 2009 17:50:00 GMT", "Wednesday, 12-Oct-09 17:50:00 GMT"}) {
        INFO(wrong);
        CHECK_FALSE(s3::parse_http_date(wrong));
    }
}

TEST_CASE("S3 answers: a ranged GET's answer is checked against the range asked", "[s3]") {
    auto ranged = [](const std::string& content_range, std::optional<std::uint64_t> length = std::nullopt) {
        net::ResponseHead head;
        head.status = 206;
        head.headers = {{"Content-Range", content_range}};
        head.content_length = length;
        return head;
    };
    CHECK(s3::bytes_to_read(ranged("bytes 7-14/26", 8), 7, 8, "GET") == 8);
    CHECK(s3::bytes_to_read(ranged("bytes 7-14/*"), 7, 8, "GET") == 8);
    // Shorter than asked only where the object ends; to its end with the largest length.
    CHECK(s3::bytes_to_read(ranged("bytes 20-25/26", 6), 20, 100, "GET") == 6);
    CHECK(s3::bytes_to_read(ranged("bytes 3-25/26"), 3, std::numeric_limits<std::uint64_t>::max(), "GET") == 23);
    struct Wrong {
        const char* content_range;
        std::uint64_t offset, length;
        const char* why;
    };
    for (const auto& wrong :
         {Wrong{"bytes 20-24/26", 20, 100, "short before the end"},
          Wrong{"bytes 20-24/*", 20, 100, "short, the size unknown"}, Wrong{"bytes 0-7/26", 7, 8, "another start"},
          Wrong{"bytes 7-20/26", 7, 8, "more than asked"}, Wrong{"bytes 7-14/14", 7, 8, "past the object's size"},
          Wrong{"bytes 14-7/26", 14, 8, "backwards"}, Wrong{"bytes x-y/z", 7, 8, "unreadable"},
          Wrong{"items 7-14/26", 7, 8, "another unit"}, Wrong{"", 7, 8, "none"}}) {
        INFO(wrong.why);
        CHECK_THROWS_AS(s3::bytes_to_read(ranged(wrong.content_range), wrong.offset, wrong.length, "GET"), s3::Error);
    }
    CHECK_THROWS_AS(s3::bytes_to_read(ranged("bytes 7-14/26", 9), 7, 8, "GET"), s3::Error);

    net::ResponseHead whole;
    whole.status = 200;
    whole.content_length = 26;
    CHECK(s3::bytes_to_read(whole, 0, 8, "GET") == 8);
    CHECK(s3::bytes_to_read(whole, 0, 100, "GET") == 26);
    CHECK_THROWS_AS(s3::bytes_to_read(whole, 1, 8, "GET"), s3::Error);  // the range ignored, not from its start
    whole.content_length.reset();
    CHECK_THROWS_AS(s3::bytes_to_read(whole, 0, 8, "GET"), s3::Error);
}

TEST_CASE("S3 answers: errors keep S3's status and code, and say whether to try again", "[s3]") {
    const auto slow =
        s3::failure(503, "<Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>", "PUT /k");
    CHECK(slow.status() == 503);
    CHECK(slow.code() == "SlowDown");
    CHECK(slow.retryable());
    CHECK(std::string(slow.what()) == "PUT /k: answered 503 SlowDown (Please reduce)");
    const auto missing = s3::failure(404, "<Error><Code>NoSuchKey</Code></Error>", "GET /k");
    CHECK(missing.code() == "NoSuchKey");
    CHECK_FALSE(missing.retryable());
    CHECK(s3::failure(400, "<Error><Code>RequestTimeout</Code></Error>", "PUT /k").retryable());
    CHECK_FALSE(s3::failure(403, "<Error><Code>SignatureDoesNotMatch</Code></Error>", "PUT /k").retryable());
    // An <Error> after a 200 (CompleteMultipartUpload's) is judged by its code.
    CHECK(s3::failure(200, "<Error><Code>InternalError</Code></Error>", "complete").retryable());
    const auto proxy = s3::failure(502, "<html>Bad Gateway</html>", "GET /k");
    CHECK(proxy.code().empty());
    CHECK(proxy.retryable());

    const auto timeout = s3::transport_failure(net::Error(net::Error::Kind::timeout, "no answer"), "GET /k");
    CHECK(timeout.status() == 0);
    CHECK(timeout.retryable());
    CHECK(std::string(timeout.what()) == "GET /k: no answer");
    CHECK_FALSE(s3::transport_failure(net::Error(net::Error::Kind::tls, "bad certificate"), "GET /k").retryable());
}
