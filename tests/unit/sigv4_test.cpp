#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "berth/oci/encoding.hpp"
#include "berth/s3/client.hpp"
#include "berth/s3/sigv4.hpp"

using namespace berth;
using namespace std::chrono;

// AWS's SigV4 test suite (aws-sig-v4-test-suite, as kept in awslabs/aws-c-auth's
// tests/aws-signing-test-suite/v4/): service "service", region us-east-1, 2015-08-30T12:36:00Z.
// Its *-normalized cases are left out: S3 never normalizes a path, and neither does berth.
namespace {

const s3::Credentials suite_credentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
const auto suite_time = sys_days{2015y / August / 30} + 12h + 36min;

s3::RequestToSign suite_request(std::string method, std::string path, s3::Query query = {}, net::Headers headers = {}) {
    s3::RequestToSign request;
    request.method = std::move(method);
    request.path = std::move(path);
    request.query = std::move(query);
    request.headers = {{"Host", "example.amazonaws.com"}};
    for (auto& header : headers) request.headers.push_back(header);
    request.headers.emplace_back("X-Amz-Date", "20150830T123600Z");
    request.payload_hash = std::string(s3::empty_payload_sha256);
    request.time = suite_time;
    request.region = "us-east-1";
    request.service = "service";
    request.credentials = suite_credentials;
    return request;
}

std::string suite_authorization(const std::string& signed_headers, const std::string& signature) {
    return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=" +
           signed_headers + ", Signature=" + signature;
}

// The S3 API Reference's examples ("Signature Calculations for the Authorization Header:
// Transferring Payload in a Single Chunk" and "Authenticating Requests: Using Query Parameters").
const s3::Credentials s3_docs_credentials{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};

s3::RequestToSign s3_docs_request(std::string method, std::string path, s3::Query query, net::Headers headers,
                                  std::string payload_hash) {
    s3::RequestToSign request;
    request.method = std::move(method);
    request.path = std::move(path);
    request.query = std::move(query);
    request.headers = std::move(headers);
    request.payload_hash = std::move(payload_hash);
    request.time = sys_days{2013y / May / 24};
    request.region = "us-east-1";
    request.credentials = s3_docs_credentials;
    return request;
}

const std::string empty_hash(s3::empty_payload_sha256);

}  // namespace

TEST_CASE("SigV4 suite: get-vanilla, stage by stage", "[sigv4]") {
    const auto request = suite_request("GET", "/");
    CHECK(s3::canonical_request(request) ==
          "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + empty_hash);
    CHECK(s3::string_to_sign(request) ==
          "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
          "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
    CHECK(s3::signature(request) == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    CHECK(s3::authorization(request) ==
          suite_authorization("host;x-amz-date", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
}

TEST_CASE("SigV4 suite: get-vanilla-query-order-key-case sorts the query", "[sigv4]") {
    const auto request = suite_request("GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}});
    CHECK(s3::canonical_request(request) ==
          "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
          "host;x-amz-date\n" +
              empty_hash);
    CHECK(s3::string_to_sign(request) ==
          "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
          "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0");
    CHECK(s3::authorization(request) ==
          suite_authorization("host;x-amz-date", "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"));
}

TEST_CASE("SigV4 suite: get-header-value-trim trims and collapses spaces", "[sigv4]") {
    const auto request = suite_request("GET", "/", {}, {{"My-Header1", " value1"}, {"My-Header2", "\"a   b   c\""}});
    CHECK(s3::canonical_request(request) ==
          "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\n"
          "x-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n" +
              empty_hash);
    CHECK(s3::string_to_sign(request) ==
          "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
          "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7");
    CHECK(s3::authorization(request) ==
          suite_authorization("host;my-header1;my-header2;x-amz-date",
                              "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"));
}

TEST_CASE("SigV4 suite: post-x-www-form-urlencoded with its body signed", "[sigv4]") {
    // The suite's current form (aws-c-auth): Content-Length and x-amz-content-sha256 signed too.
    const std::string body_hash = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e";
    auto request = suite_request("POST", "/", {},
                                 {{"Content-Type", "application/x-www-form-urlencoded"},
                                  {"Content-Length", "13"},
                                  {"x-amz-content-sha256", body_hash}});
    request.payload_hash = body_hash;
    CHECK(s3::canonical_request(request) ==
          "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded\n"
          "host:example.amazonaws.com\nx-amz-content-sha256:" +
              body_hash +
              "\nx-amz-date:20150830T123600Z\n\n"
              "content-length;content-type;host;x-amz-content-sha256;x-amz-date\n" +
              body_hash);
    CHECK(s3::string_to_sign(request) ==
          "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
          "b1edd1d03544c25390e32085d55b57acc9a3961bb59415ff86c45c3d89d16cfb");
    CHECK(s3::signature(request) == "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b");

    // The 2015 suite's form: Content-Type the only header besides Host and X-Amz-Date.
    auto original = suite_request("POST", "/", {}, {{"Content-Type", "application/x-www-form-urlencoded"}});
    original.payload_hash = body_hash;
    CHECK(s3::string_to_sign(original) ==
          "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
          "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
    CHECK(s3::authorization(original) ==
          suite_authorization("content-type;host;x-amz-date",
                              "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"));

    auto parameters = suite_request("POST", "/", {},
                                    {{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
                                     {"Content-Length", "13"},
                                     {"x-amz-content-sha256", body_hash}});
    parameters.payload_hash = body_hash;
    CHECK(s3::signature(parameters) == "328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422");
}

TEST_CASE("SigV4 suite: the other header-signed cases", "[sigv4]") {
    struct Case {
        const char* name;
        s3::RequestToSign request;
        const char* signature;
    };
    const std::string utf8 = "\xE1\x88\xB4";  // U+1234
    const std::string unreserved = "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const std::string token =
        "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8Y"
        "UuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6"
        "fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQw"
        "j2ICCR/oLxBA==";
    const std::vector<Case> cases{
        {"get-header-key-duplicate",
         suite_request("GET", "/", {}, {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}}),
         "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
        {"get-header-value-multiline", suite_request("GET", "/", {}, {{"My-Header1", "value1\n  value2\n     value3"}}),
         "cfd34249e4b1c8d6b91ef74165d41a32e5fab3306300901bb65a51a73575eefd"},
        {"get-header-value-order",
         suite_request(
             "GET", "/", {},
             {{"My-Header1", "value4"}, {"My-Header1", "value1"}, {"My-Header1", "value3"}, {"My-Header1", "value2"}}),
         "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
        {"get-unreserved", suite_request("GET", "/" + unreserved),
         "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
        {"get-utf8", suite_request("GET", "/" + utf8),
         "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
        {"get-vanilla-utf8-query", suite_request("GET", "/", {{utf8, "bar"}}),
         "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
        {"get-vanilla-query-order-encoded",
         suite_request("GET", "/", {{"Param-3", "Value3"}, {"Param", "Value2"}, {utf8, "Value1"}}),
         "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"},
        {"get-vanilla-query-unreserved", suite_request("GET", "/", {{unreserved, unreserved}}),
         "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
        {"get-vanilla-empty-query-key", suite_request("GET", "/", {{"Param1", "value1"}}),
         "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
        {"get-vanilla-query", suite_request("GET", "/"),
         "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
        {"get-space-unnormalized", suite_request("GET", "/example space/"),
         "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
        {"get-slashes-unnormalized", suite_request("GET", "//example//"),
         "87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5"},
        {"get-slash-unnormalized", suite_request("GET", "//"),
         "c88bcd3d312d75078c0cd961d6deae3f4c754924b01669efcfcb439fd5e5b76e"},
        {"get-slash-dot-slash-unnormalized", suite_request("GET", "/./"),
         "68714168e6557f8f2de0ef956fc24dc2593a4bd2961f8df51898d8a134695145"},
        {"get-slash-pointless-dot-unnormalized", suite_request("GET", "/./example"),
         "beb03f223f7deae4146464f06e29eebbee9c8afbe15c290cf07aa8b119e14cff"},
        {"get-relative-unnormalized", suite_request("GET", "/example/.."),
         "eca7ead57bb5aa5c8e28007acd4ff04e1ff9a0ff3b237ec1554a184887ff9282"},
        {"get-relative-relative-unnormalized", suite_request("GET", "/example1/example2/../.."),
         "dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b"},
        {"get-vanilla-with-session-token",
         suite_request("GET", "/", {},
                       {{"X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"}}),
         "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
        {"post-vanilla", suite_request("POST", "/"),
         "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
        {"post-vanilla-query", suite_request("POST", "/", {{"Param1", "value1"}}),
         "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
        {"post-header-key-sort", suite_request("POST", "/", {}, {{"My-Header1", "value1"}}),
         "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
        {"post-header-value-case", suite_request("POST", "/", {}, {{"My-Header1", "VALUE1"}}),
         "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
        {"post-sts-header-before", suite_request("POST", "/", {}, {{"X-Amz-Security-Token", token}}),
         "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        CHECK(s3::signature(c.request) == c.signature);
    }
}

TEST_CASE("SigV4 suite: the query-signed (presigned) cases", "[sigv4]") {
    auto presigned = [](s3::RequestToSign request) {
        request.headers.pop_back();  // a presigned request carries its date in the query, not a header
        return s3::presigned_query(request, 3600s);
    };
    const std::string credential =
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Fus-east-1%2Fservice%2F"
        "aws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=3600";
    CHECK(presigned(suite_request("GET", "/")) ==
          credential +
              "&X-Amz-SignedHeaders=host"
              "&X-Amz-Signature=e93c787ed7f371d5c6b165c1b38ede9550f4dce4144713e844b25b7192d3865d");
    CHECK(presigned(suite_request("GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}})) ==
          "Param1=value1&Param2=value2&" + credential +
              "&X-Amz-SignedHeaders=host"
              "&X-Amz-Signature=86012e2c9ad4d77369f5d81c11f75158aae4f895a085212cc6d3f923d300bed5");
    CHECK(presigned(suite_request("GET", "/", {}, {{"My-Header1", " value1"}, {"My-Header2", "\"a   b   c\""}})) ==
          credential +
              "&X-Amz-SignedHeaders=host%3Bmy-header1%3Bmy-header2"
              "&X-Amz-Signature=e7bb0fd515e125e1aec2ecc4c0c17484fb06f6846b927c35e46005dd3df3acd4");
    auto form = suite_request("POST", "/", {},
                              {{"Content-Type", "application/x-www-form-urlencoded"}, {"Content-Length", "13"}});
    form.payload_hash = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e";
    CHECK(presigned(form) == credential +
                                 "&X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost"
                                 "&X-Amz-Signature=89a40deed0f26f9461242825a082d2222717248abc7ab41f552ad84a94ad46e9");
}

TEST_CASE("SigV4: the signing key of AWS's documented derivation", "[sigv4]") {
    // AWS General Reference, "Create a signing key": the IAM example of 2015-08-30.
    CHECK(oci::hex(s3::signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam")) ==
          "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9");
}

TEST_CASE("SigV4 for S3: GET Object with a Range", "[sigv4]") {
    const auto request = s3_docs_request("GET", "/test.txt", {},
                                         {{"Host", "examplebucket.s3.amazonaws.com"},
                                          {"Range", "bytes=0-9"},
                                          {"x-amz-content-sha256", empty_hash},
                                          {"x-amz-date", "20130524T000000Z"}},
                                         empty_hash);
    CHECK(s3::canonical_request(request) ==
          "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\nx-amz-content-sha256:" + empty_hash +
              "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n" + empty_hash);
    CHECK(s3::string_to_sign(request) ==
          "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
          "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    CHECK(s3::authorization(request) ==
          "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
          "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
          "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("SigV4 for S3: PUT Object, a '$' in the key encoded once", "[sigv4]") {
    const std::string body_hash = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    const auto request = s3_docs_request("PUT", "/test$file.text", {},
                                         {{"Host", "examplebucket.s3.amazonaws.com"},
                                          {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                          {"x-amz-date", "20130524T000000Z"},
                                          {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                                          {"x-amz-content-sha256", body_hash}},
                                         body_hash);
    CHECK(s3::canonical_request(request) ==
          "PUT\n/test%24file.text\n\ndate:Fri, 24 May 2013 00:00:00 GMT\nhost:examplebucket.s3.amazonaws.com\n"
          "x-amz-content-sha256:" +
              body_hash +
              "\nx-amz-date:20130524T000000Z\nx-amz-storage-class:REDUCED_REDUNDANCY\n\n"
              "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n" +
              body_hash);
    CHECK(s3::signature(request) == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST_CASE("SigV4 for S3: GET Bucket Lifecycle and List Objects", "[sigv4]") {
    const net::Headers headers{{"Host", "examplebucket.s3.amazonaws.com"},
                               {"x-amz-date", "20130524T000000Z"},
                               {"x-amz-content-sha256", empty_hash}};
    const auto lifecycle = s3_docs_request("GET", "/", {{"lifecycle", ""}}, headers, empty_hash);
    CHECK(s3::canonical_request(lifecycle).starts_with("GET\n/\nlifecycle=\n"));
    CHECK(s3::signature(lifecycle) == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    const auto list = s3_docs_request("GET", "/", {{"prefix", "J"}, {"max-keys", "2"}}, headers, empty_hash);
    CHECK(s3::canonical_request(list).starts_with("GET\n/\nmax-keys=2&prefix=J\n"));
    CHECK(s3::signature(list) == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("SigV4 for S3: the presigned GET of the documentation", "[sigv4]") {
    const auto request =
        s3_docs_request("GET", "/test.txt", {}, {{"Host", "examplebucket.s3.amazonaws.com"}}, "UNSIGNED-PAYLOAD");
    CHECK(s3::presigned_query(request, 86400s) ==
          "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2F"
          "aws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
          "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
    CHECK_THROWS_AS(s3::presigned_query(request, 0s), std::invalid_argument);
    CHECK_THROWS_AS(s3::presigned_query(request, 604801s), std::invalid_argument);
    CHECK_NOTHROW(s3::presigned_query(request, 604800s));
}

TEST_CASE("SigV4: a streaming payload hash is refused, never signed", "[sigv4]") {
    auto request = suite_request("PUT", "/key");
    for (const char* refused : {"STREAMING-UNSIGNED-PAYLOAD-TRAILER", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "",
                                "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"}) {
        INFO(refused);
        request.payload_hash = refused;
        CHECK_THROWS_AS(s3::authorization(request), std::invalid_argument);
    }
    request.payload_hash = "UNSIGNED-PAYLOAD";
    CHECK_NOTHROW(s3::authorization(request));
}

TEST_CASE("SigV4: S3's URI encoding and the date", "[sigv4]") {
    CHECK(s3::encode_path("/blobs/sha256/ab/a b+c%d~e") == "/blobs/sha256/ab/a%20b%2Bc%25d~e");
    CHECK(s3::uri_encode("a/b=c&d", false) == "a%2Fb%3Dc%26d");
    CHECK(s3::uri_encode("\xff\x01", false) == "%FF%01");
    // A continuation token or an upload id is opaque: '+', '/' and '=' are encoded in the query.
    CHECK(s3::canonical_query({{"uploadId", "a+b/c=="}, {"uploads", ""}, {"partNumber", "2"}}) ==
          "partNumber=2&uploadId=a%2Bb%2Fc%3D%3D&uploads=");
    CHECK(s3::amz_date(sys_days{2024y / February / 29} + 23h + 59min + 59s + 999ms) == "20240229T235959Z");
    CHECK(s3::amz_date(sys_days{1970y / January / 1}) == "19700101T000000Z");
}

TEST_CASE("S3 client: presigned URLs address the bucket as configured", "[sigv4][s3]") {
    net::Client http;
    auto presigned = [&](s3::Config config, const std::string& key = "blobs/a b") {
        return s3::Client(std::move(config), http).presign_get(key, 60s);
    };
    s3::Config base;
    base.endpoint = "https://s3.example.com";
    base.bucket = "examplebucket";
    base.access_key = "AK";
    base.secret_key = "SK";
    const std::string query = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F";
    const auto path_style = presigned(base);
    CHECK(path_style.starts_with("https://s3.example.com/examplebucket/blobs/a%20b" + query));
    CHECK(path_style.find("%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=") != std::string::npos);
    CHECK(path_style.find("&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=") != std::string::npos);
    auto virtual_host = base;
    virtual_host.path_style = false;
    CHECK(presigned(virtual_host).starts_with("https://examplebucket.s3.example.com/blobs/a%20b" + query));
    auto radosgw = base;
    radosgw.endpoint = "http://127.0.0.1:7480";
    CHECK(presigned(radosgw, "k").starts_with("http://127.0.0.1:7480/examplebucket/k" + query));
    auto prefixed = base;
    prefixed.endpoint = "http://gateway:80/s3";
    CHECK(presigned(prefixed, "k").starts_with("http://gateway/s3/examplebucket/k" + query));

    auto refused = [&](auto change) {
        auto config = base;
        change(config);
        return s3::Client(config, http);
    };
    CHECK_THROWS_AS(refused([](auto& c) { c.bucket = "Bad_Bucket"; }), std::invalid_argument);
    CHECK_THROWS_AS(refused([](auto& c) { c.bucket = "ab"; }), std::invalid_argument);
    CHECK_THROWS_AS(refused([](auto& c) { c.endpoint = "ftp://s3.example.com"; }), std::invalid_argument);
    CHECK_THROWS_AS(refused([](auto& c) {
                        c.endpoint = "http://10.0.0.1:7480";
                        c.path_style = false;
                    }),
                    std::invalid_argument);
    CHECK_THROWS_AS(refused([](auto& c) { c.part_size = 1 << 20; }), std::invalid_argument);
    CHECK_THROWS_AS(refused([](auto& c) { c.secret_key.clear(); }), std::invalid_argument);
    CHECK_THROWS_AS(presigned(base, ""), std::invalid_argument);
    CHECK_THROWS_AS(presigned(base, std::string(1025, 'k')), std::invalid_argument);
    CHECK_THROWS_AS(s3::Client(base, http).presign_get("k", 0s), std::invalid_argument);
}
