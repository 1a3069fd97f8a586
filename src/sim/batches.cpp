#include "sim/batches.h"

#include <algorithm>
#include <numeric>
#include <tuple>
#include <unordered_map>

namespace moetier::sim {

namespace {

using trace::TraceRow;

// The order the cache sees rows in: turn, prefill before decode, then prefill chunk-major and layer-major (a
// batch per (chunk, layer)) and decode step-major (a batch per (step, layer)); inside a batch token order, then
// slot order. `chunk` is the row's prefill chunk (0 for decode rows and for traces without a `# cache` line).
auto order_key(const TraceRow& r, int64_t chunk) {
  return r.phase == 0 ? std::make_tuple(r.turn, 0, chunk, int64_t{r.layer}, r.step, r.slot)
                      : std::make_tuple(r.turn, 1, r.step, int64_t{r.layer}, int64_t{0}, r.slot);
}

bool same_batch(const TraceRow& a, int64_t chunk_a, const TraceRow& b, int64_t chunk_b) {
  return a.turn == b.turn && a.phase == b.phase && a.layer == b.layer &&
         (a.phase == 0 ? chunk_a == chunk_b : a.step == b.step);
}

bool same_step(const TraceRow& a, const TraceRow& b) {
  return a.turn == b.turn && a.phase == b.phase && (a.phase == 0 || a.step == b.step);
}

// Each row's prefill chunk: (position - the turn's first prompt position) / n_batch, as the engine's prefill
// splits a prompt (model/generator.cpp). All 0 without a `# cache` line: one pass, as the phone engine counted.
std::vector<int64_t> prefill_chunks(const trace::RouteTrace& trace) {
  std::vector<int64_t> chunk(trace.rows.size(), 0);
  if (!trace.header.cache) return chunk;
  std::unordered_map<int32_t, int64_t> first;  // turn -> its first prompt position
  for (const TraceRow& r : trace.rows) {
    if (r.phase != 0) continue;
    const auto [it, inserted] = first.try_emplace(r.turn, r.step);
    if (!inserted) it->second = std::min(it->second, r.step);
  }
  const int64_t n_batch = trace.header.cache->n_batch;
  for (size_t i = 0; i < trace.rows.size(); ++i) {
    const TraceRow& r = trace.rows[i];
    if (r.phase == 0) chunk[i] = (r.step - first.at(r.turn)) / n_batch;
  }
  return chunk;
}

}  // namespace

BatchedTrace make_batches(const trace::RouteTrace& trace) {
  BatchedTrace bt;
  bt.header = trace.header;
  // moetier asks its store for a batch's experts in ascending id order; the phone engine's recency is last use.
  const bool ascending = trace.header.cache.has_value();
  const std::vector<TraceRow>& rows = trace.rows;
  const std::vector<int64_t> chunk = prefill_chunks(trace);
  std::vector<uint32_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0u);
  auto less = [&](uint32_t a, uint32_t b) { return order_key(rows[a], chunk[a]) < order_key(rows[b], chunk[b]); };
  if (!std::is_sorted(order.begin(), order.end(), less)) std::stable_sort(order.begin(), order.end(), less);

  bt.rows.reserve(rows.size());
  bt.experts.reserve(rows.size());
  std::vector<uint32_t> seen(static_cast<size_t>(trace.header.n_expert), 0);  // batch stamp per expert
  uint32_t stamp = 0;
  int32_t done_tokens = 0, chunk_tokens = 0;  // prefill: tokens of the step's finished chunks, of the current one
  int64_t cur_chunk = 0;
  for (size_t i = 0; i < order.size();) {
    // One batch: rows [i, j).
    size_t j = i + 1;
    while (j < order.size() && same_batch(rows[order[i]], chunk[order[i]], rows[order[j]], chunk[order[j]])) ++j;
    const TraceRow& first = rows[order[i]];
    if (i == 0 || !same_step(rows[order[i - 1]], first)) {
      Step s;
      s.phase = first.phase == 0 ? moe::Phase::prefill : moe::Phase::decode;
      s.turn = first.turn;
      s.first_pos = first.step;
      s.tokens = 1;
      s.batch_begin = s.batch_end = static_cast<uint32_t>(bt.batches.size());
      bt.steps.push_back(s);
      done_tokens = chunk_tokens = 0;
      cur_chunk = chunk[order[i]];
    }
    Step& step = bt.steps.back();
    Batch b;
    b.layer = first.layer;
    b.row_begin = static_cast<uint32_t>(bt.rows.size());
    for (size_t k = i; k < j; ++k) {
      const TraceRow& r = rows[order[k]];
      bt.rows.push_back({r.expert, static_cast<uint8_t>(r.residency != trace::Residency::miss)});
    }
    b.row_end = static_cast<uint32_t>(bt.rows.size());
    // Distinct experts in order of last use (walk backwards, keep first sightings, then reverse) or ascending.
    ++stamp;
    b.expert_begin = static_cast<uint32_t>(bt.experts.size());
    for (size_t k = j; k-- > i;) {
      const int32_t e = rows[order[k]].expert;
      if (seen[e] != stamp) {
        seen[e] = stamp;
        bt.experts.push_back(e);
      }
    }
    b.expert_end = static_cast<uint32_t>(bt.experts.size());
    if (ascending) {
      std::sort(bt.experts.begin() + b.expert_begin, bt.experts.end());
    } else {
      std::reverse(bt.experts.begin() + b.expert_begin, bt.experts.end());
    }
    if (step.phase == moe::Phase::prefill) {
      // Prompt length: the sum over chunks of each chunk's distinct positions (its rows are in token order).
      if (chunk[order[i]] != cur_chunk) {
        done_tokens += chunk_tokens;
        chunk_tokens = 0;
        cur_chunk = chunk[order[i]];
      }
      int32_t tokens = 0;
      for (size_t k = i; k < j; ++k) tokens += (k == i || rows[order[k]].step != rows[order[k - 1]].step) ? 1 : 0;
      chunk_tokens = std::max(chunk_tokens, tokens);
      step.tokens = done_tokens + chunk_tokens;
    }
    bt.batches.push_back(b);
    step.batch_end = static_cast<uint32_t>(bt.batches.size());
    i = j;
  }
  for (const Step& s : bt.steps) (s.phase == moe::Phase::prefill ? bt.prefill_tokens : bt.decode_tokens) += s.tokens;
  return bt;
}

}  // namespace moetier::sim
