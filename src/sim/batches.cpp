#include "sim/batches.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace moetier::sim {

namespace {

using trace::TraceRow;

// The order the cache sees rows in: turn, prefill before decode, then prefill layer-major (a batch per layer)
// and decode step-major (a batch per (step, layer)); inside a batch token order, then slot order.
auto order_key(const TraceRow& r) {
  return r.phase == 0 ? std::make_tuple(r.turn, 0, int64_t{r.layer}, r.step, r.slot)
                      : std::make_tuple(r.turn, 1, r.step, int64_t{r.layer}, r.slot);
}

bool same_batch(const TraceRow& a, const TraceRow& b) {
  return a.turn == b.turn && a.phase == b.phase && a.layer == b.layer && (a.phase == 0 || a.step == b.step);
}

bool same_step(const TraceRow& a, const TraceRow& b) {
  return a.turn == b.turn && a.phase == b.phase && (a.phase == 0 || a.step == b.step);
}

}  // namespace

BatchedTrace make_batches(const trace::RouteTrace& trace) {
  BatchedTrace bt;
  bt.header = trace.header;
  const std::vector<TraceRow>& rows = trace.rows;
  std::vector<uint32_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0u);
  auto less = [&](uint32_t a, uint32_t b) { return order_key(rows[a]) < order_key(rows[b]); };
  if (!std::is_sorted(order.begin(), order.end(), less)) std::stable_sort(order.begin(), order.end(), less);

  bt.rows.reserve(rows.size());
  bt.experts.reserve(rows.size());
  std::vector<uint32_t> seen(static_cast<size_t>(trace.header.n_expert), 0);  // batch stamp per expert
  uint32_t stamp = 0;
  for (size_t i = 0; i < order.size();) {
    // One batch: rows [i, j).
    size_t j = i + 1;
    while (j < order.size() && same_batch(rows[order[i]], rows[order[j]])) ++j;
    const TraceRow& first = rows[order[i]];
    if (i == 0 || !same_step(rows[order[i - 1]], first)) {
      Step s;
      s.phase = first.phase == 0 ? moe::Phase::prefill : moe::Phase::decode;
      s.turn = first.turn;
      s.first_pos = first.step;
      s.tokens = 1;
      s.batch_begin = s.batch_end = static_cast<uint32_t>(bt.batches.size());
      bt.steps.push_back(s);
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
    // Distinct experts in order of last use: walk backwards, keep first sightings, then reverse.
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
    std::reverse(bt.experts.begin() + b.expert_begin, bt.experts.end());
    if (step.phase == moe::Phase::prefill) {
      // Prompt length: distinct positions of this layer's rows (rows are in token order).
      int32_t tokens = 0;
      for (size_t k = i; k < j; ++k) tokens += (k == i || rows[order[k]].step != rows[order[k - 1]].step) ? 1 : 0;
      step.tokens = std::max(step.tokens, tokens);
    }
    bt.batches.push_back(b);
    step.batch_end = static_cast<uint32_t>(bt.batches.size());
    i = j;
  }
  for (const Step& s : bt.steps) (s.phase == moe::Phase::prefill ? bt.prefill_tokens : bt.decode_tokens) += s.tokens;
  return bt;
}

}  // namespace moetier::sim
