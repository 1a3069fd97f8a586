// route_trace v1: router decisions recorded per (step, layer, slot), the input of the cache simulator and what
// the engine records. Format (../shared/traces/README.md, as written by the BigMoeOnEdge engine):
//   # route_trace v1
//   # model=PATH arch=ARCH n_layer=L n_expert=E n_expert_used=K
//   # layer=I expert_bytes=B dense_bytes=D          (one line per layer, I = 0..L-1)
//   # cache slot_bytes=S n_batch=N cliff_guard=G     (optional: moetier's expert cache, see TraceCache)
//   turn,phase,step,layer,slot,expert,weight,residency,expert_bytes
//   one CSV row per routed (step, layer, slot); weight is %.6g or `nan`.
// Other `#` lines are ignored by the reader. Rows may be in any order; the simulator groups them into batches.
// `layer` everywhere is the MoE ordinal (0..L-1 over the layers with routed experts, not the block index), and L
// counts MoE layers: the key `n_layer` is historical (the first engines had no dense layers) and is kept so that
// recorded traces still read; TraceHeader calls it n_moe_layers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::trace {

struct TraceLayer {
  uint64_t expert_bytes = 0;  // one expert's bytes across its gate, up and down tensors
  uint64_t dense_bytes = 0;   // the layer's non-expert bytes
  friend bool operator==(const TraceLayer&, const TraceLayer&) = default;
};

// The recording engine's expert cache, from the optional `# cache` line that moetier writes for a streamed run.
// Its presence says the trace was counted the way moetier's expert store counts (sim/batches.h, sim/replay.h):
// a cache of fixed slots (strict capacity), each batch's experts looked up in ascending id order, a prefill
// longer than n_batch tokens run as several passes over the layers. Traces of other engines (the shared phone
// traces) have no such line and were counted by a byte budget over one prefill pass.
struct TraceCache {
  uint64_t slot_bytes = 0;    // one cache slot, bytes (> 0): a cache of C bytes has floor(C / slot_bytes) slots
  int64_t n_batch = 0;        // most tokens per forward pass (> 0): a longer prefill runs in chunks of this many
  bool cliff_guard = false;   // the policy's cliff guard was enabled (moe/cache_policy.h)
  friend bool operator==(const TraceCache&, const TraceCache&) = default;
};

struct TraceHeader {
  std::string model;          // model path as recorded: everything between "model=" and " arch="
  std::string arch;           // GGUF architecture name, e.g. "qwen3moe"
  int32_t n_moe_layers = 0;   // layers with routed experts (the file's `n_layer` key)
  int32_t n_expert = 0;       // experts per layer
  int32_t n_expert_used = 0;  // effective top-k of the run
  std::vector<TraceLayer> layers;  // [n_moe_layers], by MoE ordinal
  std::optional<TraceCache> cache;  // the `# cache` line; empty when the trace has none
  friend bool operator==(const TraceHeader&, const TraceHeader&) = default;
};

enum class Residency : uint8_t { miss = 0, hit = 1, prefetched_hit = 2 };

struct TraceRow {
  int32_t turn = 0;       // session turn
  uint8_t phase = 0;      // 0 = prefill, 1 = decode
  int64_t step = 0;       // absolute position in the context
  int32_t layer = 0;      // MoE ordinal, [0, n_moe_layers)
  int32_t slot = 0;       // rank in the router's order
  int32_t expert = 0;
  float weight = 0.0f;    // router weight; NaN when not recorded
  Residency residency = Residency::miss;
  uint64_t expert_bytes = 0;  // bytes actually read for this row (0 on a hit and on repeats within a batch)
};

struct RouteTrace {
  TraceHeader header;
  std::vector<TraceRow> rows;  // file order
};

// Parse a whole trace. The model, layer and cache lines come once each, before the CSV header. Throws
// moetier::Error naming `name` (the file) and the 1-based line, and what was expected. Linear time; about 10 ns
// per byte is the budget (a 4-million-row trace reads in well under 1 s).
RouteTrace parse_route_trace(std::string_view text, std::string_view name);
RouteTrace read_route_trace(const std::filesystem::path& path);

// Text of the header (version, model and layer lines, CSV header), then rows. A weight is written as the
// shortest text that reads back as the same float (nan for NaN): a written trace reads back identical, and a
// trace recorded with %.6g weights is written back byte-identical.
std::string format_route_header(const TraceHeader& header);
void append_route_row(std::string& out, const TraceRow& row);
void write_route_trace(const std::filesystem::path& path, const RouteTrace& trace);

// Streaming writer for the engine: header on open, rows appended in batches of ~1 MiB. Throws moetier::Error
// naming the path on I/O failure. Not thread-safe.
class RouteTraceWriter {
 public:
  RouteTraceWriter(const std::filesystem::path& path, const TraceHeader& header);
  ~RouteTraceWriter();  // flushes; errors at destruction are swallowed, call close() to see them
  RouteTraceWriter(const RouteTraceWriter&) = delete;
  RouteTraceWriter& operator=(const RouteTraceWriter&) = delete;
  void add(const TraceRow& row);
  void close();

 private:
  void flush();
  std::filesystem::path path_;
  std::ofstream out_;
  std::string buf_;
};

}  // namespace moetier::trace
