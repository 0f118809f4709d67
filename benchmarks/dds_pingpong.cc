// The floor for net_bridge_benchmark: Cyclone DDS's own round trip, a C-API
// ping-pong with the bridge's Frame type, the same QoS (reliable, keep last
// 16) and the same domain configuration (one interface, unicast peers), so
// the only difference to the bridged round trip is tether and the bridges.
//
//   dds_pingpong pong --interface IF --peer ADDR
//   dds_pingpong ping --interface IF --peer ADDR --size BYTES --samples N
//                [--warmup W] [--out FILE]
// ping writes one round trip in nanoseconds per line to FILE (default
// stdout); pong echoes until SIGTERM.
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dds/dds.h"
#include "net/bridge_config.h"
#include "net/frame.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int64_t NowNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int Fail(const char* what, dds_return_t rc) {
  std::fprintf(stderr, "dds_pingpong: %s: %s\n", what, dds_strretcode(rc));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dds_pingpong ping|pong --interface IF "
                         "--peer ADDR [--size B --samples N --warmup W "
                         "--out FILE]\n");
    return 2;
  }
  const std::string mode = argv[1];
  tether::net::DdsOptions dds;
  dds.domain = 9;
  dds.announce_seconds = 0.2;
  size_t size = 64;
  int samples = 1000, warmup = 100;
  const char* out_path = nullptr;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const char* v = argv[i + 1];
    if (a == "--interface") dds.interface = v;
    else if (a == "--peer") dds.peers.push_back(v);
    else if (a == "--size") size = std::strtoul(v, nullptr, 10);
    else if (a == "--samples") samples = std::atoi(v);
    else if (a == "--warmup") warmup = std::atoi(v);
    else if (a == "--out") out_path = v;
  }
  ::signal(SIGTERM, OnSignal);
  ::signal(SIGINT, OnSignal);
  const std::string xml = tether::net::CycloneConfigXml(dds);
  const dds_entity_t domain = dds_create_domain(dds.domain, xml.c_str());
  if (domain < 0) return Fail("domain", domain);
  const dds_entity_t p = dds_create_participant(dds.domain, nullptr, nullptr);
  if (p < 0) return Fail("participant", p);
  dds_qos_t* q = dds_create_qos();
  dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
  dds_qset_history(q, DDS_HISTORY_KEEP_LAST, 16);
  const bool ping = mode == "ping";
  const dds_entity_t t_ping =
      dds_create_topic(p, &tether_net_Frame_desc, "bench/ping", nullptr, nullptr);
  const dds_entity_t t_pong =
      dds_create_topic(p, &tether_net_Frame_desc, "bench/pong", nullptr, nullptr);
  const dds_entity_t writer = dds_create_writer(p, ping ? t_ping : t_pong, q, nullptr);
  const dds_entity_t reader = dds_create_reader(p, ping ? t_pong : t_ping, q, nullptr);
  dds_delete_qos(q);
  if (writer < 0 || reader < 0) return Fail("endpoints", writer < 0 ? writer : reader);
  const dds_entity_t ws = dds_create_waitset(p);
  const dds_entity_t rc = dds_create_readcondition(reader, DDS_ANY_STATE);
  dds_waitset_attach(ws, rc, 0);

  std::vector<uint8_t> payload(size);
  for (size_t i = 0; i < size; ++i) payload[i] = static_cast<uint8_t>(i * 7);
  void* samples_buf[16] = {};
  dds_sample_info_t infos[16];

  if (!ping) {
    while (!g_stop) {
      if (dds_waitset_wait(ws, nullptr, 0, DDS_MSECS(200)) <= 0) continue;
      const int n = dds_take(reader, samples_buf, infos, 16, 16);
      for (int i = 0; i < n; ++i) {
        if (infos[i].valid_data) dds_write(writer, samples_buf[i]);
      }
      if (n > 0) dds_return_loan(reader, samples_buf, n);
    }
    dds_delete(domain);
    return 0;
  }

  // Wait (bounded) until both directions are matched.
  const int64_t give_up = NowNs() + 30'000'000'000;
  for (;;) {
    dds_publication_matched_status_t pm;
    dds_subscription_matched_status_t sm;
    dds_get_publication_matched_status(writer, &pm);
    dds_get_subscription_matched_status(reader, &sm);
    if (pm.current_count > 0 && sm.current_count > 0) break;
    if (NowNs() > give_up || g_stop) {
      std::fprintf(stderr, "dds_pingpong: no pong matched within 30 s\n");
      return 1;
    }
    dds_sleepfor(DDS_MSECS(20));
  }
  std::FILE* out = out_path ? std::fopen(out_path, "w") : stdout;
  if (out == nullptr) return 1;
  tether_net_Frame f{};
  f.payload._buffer = payload.data();
  f.payload._length = f.payload._maximum = static_cast<uint32_t>(size);
  for (int i = 0; i < warmup + samples && !g_stop; ++i) {
    f.seq = static_cast<uint64_t>(i) + 1;
    const int64_t start = NowNs();
    if (dds_return_t r = dds_write(writer, &f); r < 0) return Fail("write", r);
    bool got = false;
    while (!got && !g_stop) {
      if (NowNs() - start > 5'000'000'000) {
        std::fprintf(stderr, "dds_pingpong: reply %d lost (5 s)\n", i);
        return 1;
      }
      if (dds_waitset_wait(ws, nullptr, 0, DDS_MSECS(100)) <= 0) continue;
      const int n = dds_take(reader, samples_buf, infos, 16, 16);
      for (int k = 0; k < n; ++k) {
        if (infos[k].valid_data &&
            static_cast<tether_net_Frame*>(samples_buf[k])->seq == f.seq) {
          got = true;
        }
      }
      if (n > 0) dds_return_loan(reader, samples_buf, n);
    }
    if (got && i >= warmup) std::fprintf(out, "%lld\n", static_cast<long long>(NowNs() - start));
  }
  if (out != stdout) std::fclose(out);
  dds_delete(domain);
  return 0;
}
