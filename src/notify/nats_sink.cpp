// Deliveries to NATS JetStream (webhook.hpp's Sink): each event one message on the endpoint's
// subject, its id as Nats-Msg-Id, so the stream's duplicate window keeps one copy of an event that
// berth sent twice (after a failover, or a kill between publishing and recording it).
#include <nats/nats.h>

#include <string>

#include "webhook.hpp"

namespace berth::notify {
namespace {

std::string status_text(natsStatus status) {
    const char* last = nats_GetLastError(nullptr);
    return std::string(natsStatus_GetText(status)) + (last && *last ? std::string(": ") + last : "");
}

// {repository} as subject tokens: '/' separates tokens; '.' (which would too) becomes "_d" and '_'
// becomes "__", so that no two repositories share a subject. Names are [a-z0-9._-/] (oci/names), so
// nothing else needs escaping: no wildcard or white space reaches a subject.
std::string subject_of(const std::string& pattern, const Notice& notice) {
    std::string repository;
    for (char c : notice.repository)
        repository += c == '/' ? "." : c == '.' ? "_d" : c == '_' ? "__" : std::string(1, c);
    std::string out = pattern;
    for (auto [name, value] :
         {std::pair<std::string, std::string>{"{repository}", repository}, {"{action}", action_name(notice.action)}})
        for (auto at = out.find(name); at != std::string::npos; at = out.find(name, at + value.size()))
            out.replace(at, name.size(), value);
    return out;
}

class NatsSink final : public Sink {
public:
    explicit NatsSink(const Endpoint& endpoint) : endpoint_(endpoint) {}
    ~NatsSink() override { disconnect(); }

    Outcome deliver(const std::vector<Notice>& notices) override {
        Outcome out;
        if (!connection_) {
            if (auto status = connect(); status != NATS_OK) {
                out.detail = "connecting: " + status_text(status);
                disconnect();
                return out;
            }
        }
        for (auto& notice : notices) {
            const auto body = cloudevent_json(notice);
            jsPubOptions options;
            jsPubOptions_Init(&options);
            options.MsgId = notice.id.c_str();
            options.MaxWait = std::chrono::duration_cast<std::chrono::milliseconds>(endpoint_.timeout).count();
            jsPubAck* ack = nullptr;
            jsErrCode code = static_cast<jsErrCode>(0);
            const auto status = js_Publish(&ack, stream_, subject_of(endpoint_.subject, notice).c_str(), body.data(),
                                           static_cast<int>(body.size()), &options, &code);
            jsPubAck_Destroy(ack);
            if (status != NATS_OK) {
                out.detail = "publishing: " + status_text(status);
                disconnect();  // the next try starts on a fresh connection
                return out;
            }
        }
        out.kind = Outcome::Kind::delivered;
        return out;
    }

private:
    natsStatus connect() {
        natsOptions* options = nullptr;
        auto status = natsOptions_Create(&options);
        const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(endpoint_.timeout).count();
        const bool tls = endpoint_.url.starts_with("tls://");
        if (status == NATS_OK) status = natsOptions_SetURL(options, endpoint_.url.c_str());
        if (status == NATS_OK) status = natsOptions_SetTimeout(options, timeout);
        // A server that stops reading must not hold a publish (and so the endpoint, and the
        // shutdown that waits for it) forever: writes give up after the endpoint's timeout too.
        if (status == NATS_OK) status = natsOptions_SetWriteDeadline(options, timeout);
        // Reconnecting in the background would queue publishes past our timeout: the endpoint's
        // backoff retries instead.
        if (status == NATS_OK) status = natsOptions_SetAllowReconnect(options, false);
        if (status == NATS_OK && tls) status = natsOptions_SetSecure(options, true);
        if (status == NATS_OK && tls && !endpoint_.ca_file.empty())
            status = natsOptions_LoadCATrustedCertificates(options, endpoint_.ca_file.c_str());
        if (status == NATS_OK && tls && endpoint_.insecure) status = natsOptions_SkipServerVerification(options, true);
        if (status == NATS_OK) status = natsConnection_Connect(&connection_, options);
        natsOptions_Destroy(options);
        if (status != NATS_OK) return status;
        jsOptions js;
        jsOptions_Init(&js);
        js.Wait = timeout;
        return natsConnection_JetStream(&stream_, connection_, &js);
    }

    void disconnect() {
        if (stream_) jsCtx_Destroy(stream_);
        if (connection_) natsConnection_Destroy(connection_);
        stream_ = nullptr;
        connection_ = nullptr;
    }

    const Endpoint& endpoint_;
    natsConnection* connection_ = nullptr;
    jsCtx* stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Sink> make_sink(const Endpoint& endpoint) {
    if (endpoint.url.starts_with("nats://") || endpoint.url.starts_with("tls://"))
        return std::make_unique<NatsSink>(endpoint);
    return std::make_unique<Webhook>(endpoint);
}

}  // namespace berth::notify
