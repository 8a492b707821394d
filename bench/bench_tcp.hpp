#pragma once

// Raw TCP over loopback, the limit of every transfer between two processes:
// a sink in the server process and a benchmark that sends it requests.

#include <cstdint>

#include "bench/bench_common.hpp"

namespace actorps::bench {

/// Binds a listening socket on 127.0.0.1 with a port the OS chooses; sets
/// `port`. Returns the socket, or -1.
int listen_loopback(uint16_t& port);

/// Serves raw TCP requests on `listen_fd` (forever, one thread per
/// connection): per request a 16-byte header (bytes to read, bytes to
/// answer, both uint64_t in host order), that many bytes, then the answer.
void tcp_sink(int listen_fd);

/// Measures round trips to the sink at `port`: `p.bytes_out` bytes one way
/// (plus the 16-byte header), `p.bytes_back` bytes back, TCP_NODELAY. Each
/// iteration's latency goes into `p`, which is then recorded.
void bm_tcp(benchmark::State& st, uint16_t port, point p);

} // namespace actorps::bench
