#pragma once
#include <boost/asio/ip/tcp.hpp>
#include <memory>

namespace berth::http {

struct ServerContext;

// Serves one connection until it closes; keeps itself alive through its handlers.
void start_session(boost::asio::ip::tcp::socket socket, ServerContext& context);

}  // namespace berth::http
