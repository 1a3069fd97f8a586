#include "gpu/vulkan/vulkan_step.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <tuple>

#include "util/error.h"

namespace moetier::gpu::vk_impl {

namespace {

constexpr uint32_t kNone = 0xffffffffu;  // an absent optional array in a kernel's push constants

// The push constants of each kernel, in the order of its shader's Push block (src/gpu/shaders/<name>.comp).
struct RmsNormPush {
  uint32_t rows, n, x_off, w_off, y_off;
  float eps;
};
struct RopePush {
  uint32_t n_tok, n_heads, head_dim, half_rot, neox, x_off, table_off;
};
struct KvStorePush {
  uint32_t n_tok, n_kv, pos0, n_ctx, k_off, v_off;
};
struct AttentionPush {
  uint32_t n_head, n_head_kv, head_dim, pos0, n_ctx, window, q_off, o_off, sinks_off;
  float scale;
};
struct GluPush {
  uint32_t n, kind, g_off, u_off, h_off;
  float alpha, limit;
};
struct AddPush {
  uint32_t rows, n, y_off, a_off, broadcast;
};
struct RoundPush {
  uint32_t n, mode, x_off, y_off;
};
struct GatherPush {
  uint32_t n_rows, n, src_off, rows_off, dst_off;
};
struct CombinePush {
  uint32_t n_tok, k, n, slots_off, table_off, out_off, accumulate;
};

}  // namespace

VulkanStep::VulkanStep(VulkanBackend& backend) : be_(backend) {
  try {
    pool_ = vk::raii::CommandPool(be_.device_.get(),
                                  vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer,
                                                            be_.device_.compute_family()));
    vk::raii::CommandBuffers bufs(be_.device_.get(),
                                  vk::CommandBufferAllocateInfo(*pool_, vk::CommandBufferLevel::ePrimary, 2));
    bufs_[0] = std::move(bufs[0]);
    bufs_[1] = std::move(bufs[1]);
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot set up the device step on {} ({})", be_.device().name, e.what());
  }
  profile_ = StepProfile::from_env(be_.device_);
  downloads_.reserve(64);
  entries_.reserve(1024);
  table_host_.reserve(4096);
}

VulkanStep::~VulkanStep() {  // the profile, if any, prints its totals
  try {
    wait_for(in_flight_);  // the command buffers must not be freed while one runs
  } catch (...) {          // a lost device: nothing left to wait for
  }
}

void VulkanStep::wait_for(uint64_t v) {
  if (v <= done_) return;
  be_.compute_done_.wait(v);
  done_ = v;
}

DevArray VulkanStep::alloc(int64_t n) {
  assert(!ready_ && n >= 0);
  // 16-byte alignment of every array: a vec4 load or a copy region never straddles two arrays' bytes.
  const DevArray a{u32(static_cast<int64_t>(floats_)), u32(n)};
  floats_ += (static_cast<uint64_t>(n) + 3) & ~uint64_t{3};
  return a;
}

DevArray VulkanStep::constant(std::span<const float> v) {
  for (const auto& [span, arr] : constants_) {
    if (span.data() == v.data() && span.size() == v.size()) return arr;
  }
  const DevArray a = alloc(static_cast<int64_t>(v.size()));
  constants_.emplace_back(v, a);
  return a;
}

int VulkanStep::kv_cache(int64_t n_ctx, int64_t n_kv) {
  assert(!ready_ && n_ctx > 0);
  if (n_kv < 2 || n_kv % 2 != 0) fail("a GPU KV cache row holds an even number of elements, not {}", n_kv);
  const uint64_t bytes = uint64_t{2} * static_cast<uint64_t>(n_ctx) * static_cast<uint64_t>(n_kv) * 2;
  if (bytes > be_.device().max_storage_buffer_range) {
    fail("a layer's KV cache of {} positions x {} elements needs {} bytes, more than the {} bytes one storage "
         "buffer of {} may span; lower the context (-c)",
         n_ctx, n_kv, bytes, be_.device().max_storage_buffer_range, be_.device().name);
  }
  Kv& kv = kv_.emplace_back();
  kv.n_ctx = n_ctx;
  kv.n_kv = n_kv;
  kv.buffer = Buffer(be_.device_, bytes, BufferKind::device_local, "a KV cache");
  return static_cast<int>(kv_.size() - 1);
}

void VulkanStep::finish_setup(int64_t staging_floats) {
  assert(!ready_);
  const uint64_t bytes = std::max<uint64_t>(floats_, 4) * sizeof(float);
  if (bytes > be_.device().max_storage_buffer_range) {
    fail("the GPU step's activations need {} bytes, more than the {} bytes one storage buffer of {} may span; "
         "lower the batch size (-b) or the context (-c)",
         bytes, be_.device().max_storage_buffer_range, be_.device().name);
  }
  uint64_t stage = staging_floats > 0 ? static_cast<uint64_t>(staging_floats) * sizeof(float) : bytes;
  for (const auto& [span, arr] : constants_) stage = std::max<uint64_t>(stage, span.size() * sizeof(float));
  try {
    arena_ = Buffer(be_.device_, bytes, BufferKind::device_local, "the GPU step's activations");
    up_stage_ = Buffer(be_.device_, std::min(stage, bytes), BufferKind::staging, "the GPU step's uploads");
    down_stage_ = Buffer(be_.device_, std::min(stage, bytes), BufferKind::readback, "the GPU step's downloads");
    arena_set_ = be_.make_set(arena_, arena_, arena_);
    for (Kv& kv : kv_) kv.set = be_.make_set(kv.buffer, arena_, arena_);
    for (auto& [host, pl] : be_.placed_) {
      for (VulkanBackend::Chunk& c : pl.chunks) c.step_set = be_.make_set(c.buffer, arena_, arena_);
    }
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot set up the GPU step on {} ({})", be_.device().name, e.what());
  }
  ready_ = true;
  // Zeroed, then the constants in place: one submission (or more, when they exceed the staging buffer).
  begin_op(false, {"setup"});
  cmd_->fillBuffer(*arena_.get(), 0, VK_WHOLE_SIZE, 0);
  for (const auto& [span, arr] : constants_) upload(span.data(), arr);
  submit();
  constants_.clear();
}

void VulkanStep::check_product(const quant::WeightView& w) const {
  placed(w);
  const int grid = activation_grid(w.type);
  const int64_t block = grid == 3 ? 32 : grid == 4 ? 256 : 1;
  if (be_.opts_.rounding == quant::ActivationRounding::match_ggml && w.cols % block != 0) {
    fail("GPU step: rows of {} activations do not divide into blocks of {}", w.cols, block);
  }
}

uint64_t VulkanStep::bytes() const {
  uint64_t b = arena_.bytes();
  for (const Kv& kv : kv_) b += kv.buffer.bytes();
  return b;
}

void VulkanStep::check(DevArray a, int64_t n, const char* what) const {
  if (n < 0 || static_cast<uint64_t>(n) > a.size || uint64_t{a.offset} + a.size > floats_) {
    fail("GPU step: {} of {} floats does not fit its array of {} at {} (arena {} floats)", what, n, a.size, a.offset,
         floats_);
  }
}

void VulkanStep::begin_op(bool is_product, StepProfile::Label label) {
  assert(ready_);
  if (!recording_) {
    wait_for(signal_of_[static_cast<size_t>(cmd_ - bufs_.data())]);  // this buffer's last run, if still running
    cmd_->reset();
    cmd_->begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
    if (profile_) profile_->begin(*cmd_);
    recording_ = true;
    bound_pipeline_ = nullptr;
    bound_set_ = nullptr;
    // A barrier's first scope reaches into the submissions before it on the queue: the running one's writes.
    if (after_async_) barrier();
    after_async_ = false;
  } else {
    if (profile_) profile_->mark(*cmd_, op_);
    // Under synchronization validation products are separated too: the layer judges a descriptor by its whole
    // bound range, so products writing disjoint parts of the arena read to it as hazards; with a barrier between
    // them every other barrier of the step is what it checks.
    if (!(is_product && last_was_product_) || be_.instance_->sync_validation()) barrier();
  }
  op_ = label;
  last_was_product_ = is_product;
}

void VulkanStep::barrier() {
  using A = vk::AccessFlagBits;
  using P = vk::PipelineStageFlagBits;
  cmd_->pipelineBarrier(P::eComputeShader | P::eTransfer, P::eComputeShader | P::eTransfer, {},
                       vk::MemoryBarrier(A::eShaderWrite | A::eTransferWrite,
                                         A::eShaderRead | A::eShaderWrite | A::eTransferRead | A::eTransferWrite),
                       {}, {});
}

void VulkanStep::use(vk::Pipeline pipeline, vk::DescriptorSet set) {
  if (pipeline != bound_pipeline_) {
    cmd_->bindPipeline(vk::PipelineBindPoint::eCompute, pipeline);
    bound_pipeline_ = pipeline;
  }
  if (set != bound_set_) {
    cmd_->bindDescriptorSets(vk::PipelineBindPoint::eCompute, *be_.pipelines_.layout(), 0, set, {});
    bound_set_ = set;
  }
}

const VulkanBackend::Placed& VulkanStep::placed(const quant::WeightView& w) const {
  const VulkanBackend::Placed* pl = be_.find(w);
  if (pl == nullptr) {
    fail("GPU step: the {}-row {} product's weights are not on the GPU", w.rows, quant::type_name(w.type));
  }
  return *pl;
}

void VulkanStep::bind(std::string_view name, vk::DescriptorSet set, const void* push, uint32_t bytes) {
  use(*be_.pipelines_.op(name), set);
  // The C entry point: Vulkan-Hpp's RAII form takes a typed array proxy, each kernel has its own struct.
  be_.device_.get().getDispatcher()->vkCmdPushConstants(static_cast<VkCommandBuffer>(**cmd_),
                                                         static_cast<VkPipelineLayout>(*be_.pipelines_.layout()),
                                                         VK_SHADER_STAGE_COMPUTE_BIT, 0, bytes, push);
}

void VulkanStep::launch(uint64_t total) {
  if (total == 0) return;
  const uint64_t groups = (total + 63) / 64;
  const auto gx = static_cast<uint32_t>(std::min<uint64_t>(groups, Pipelines::kMaxGroupsX));
  const auto gy = static_cast<uint32_t>((groups + gx - 1) / gx);
  cmd_->dispatch(gx, gy, 1);
  ++dispatches_;
}

void VulkanStep::upload(const float* src, DevArray dst) {
  check(dst, dst.size, "an upload");
  const uint64_t bytes = uint64_t{dst.size} * sizeof(float);
  if (bytes > up_stage_.bytes())
    fail("GPU step: an upload of {} bytes exceeds the {}-byte staging buffer", bytes, up_stage_.bytes());
  if (up_used_ + bytes > up_stage_.bytes()) submit();  // staging full: what is recorded runs first
  std::memcpy(up_stage_.mapped() + up_used_, src, bytes);
  begin_op(false, {"upload"});
  cmd_->copyBuffer(*up_stage_.get(), *arena_.get(), vk::BufferCopy(up_used_, uint64_t{dst.offset} * 4, bytes));
  up_used_ += (bytes + 15) & ~uint64_t{15};
}

void VulkanStep::download(DevArray src, float* dst) {
  check(src, src.size, "a download");
  const uint64_t bytes = uint64_t{src.size} * sizeof(float);
  if (bytes > down_stage_.bytes())
    fail("GPU step: a download of {} bytes exceeds the {}-byte staging buffer", bytes, down_stage_.bytes());
  if (down_used_ + bytes > down_stage_.bytes()) submit();
  begin_op(false, {"download"});
  cmd_->copyBuffer(*arena_.get(), *down_stage_.get(), vk::BufferCopy(uint64_t{src.offset} * 4, down_used_, bytes));
  downloads_.push_back({dst, down_used_, src.size});
  down_used_ += (bytes + 15) & ~uint64_t{15};
}

void VulkanStep::rms_norm(DevArray x, DevArray w, DevArray y, int64_t rows, int64_t n, float eps) {
  check(x, rows * n, "an RMSNorm input");
  check(y, rows * n, "an RMSNorm output");
  if (!w.empty()) check(w, n, "an RMSNorm gain");
  if (rows == 0) return;
  begin_op(false, {"rms_norm"});
  const RmsNormPush p{u32(rows), u32(n), x.offset, w.empty() ? kNone : w.offset, y.offset, eps};
  bind("rms_norm", *arena_set_, &p, sizeof(p));
  // One workgroup per row.
  const auto gx = static_cast<uint32_t>(std::min<int64_t>(rows, Pipelines::kMaxGroupsX));
  cmd_->dispatch(gx, static_cast<uint32_t>((rows + gx - 1) / gx), 1);
  ++dispatches_;
}

void VulkanStep::rope(DevArray x, DevArray table, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                      bool neox) {
  assert(n_rot % 2 == 0 && n_rot <= head_dim);
  check(x, n_tok * n_heads * head_dim, "a RoPE input");
  check(table, n_tok * n_rot, "a RoPE table");
  begin_op(false, {"rope"});
  const RopePush p{u32(n_tok), u32(n_heads), u32(head_dim), u32(n_rot / 2), neox ? 1u : 0u, x.offset, table.offset};
  bind("rope", *arena_set_, &p, sizeof(p));
  launch(static_cast<uint64_t>(n_tok * n_heads * (n_rot / 2)));
}

void VulkanStep::kv_store(int kv, DevArray k, DevArray v, int64_t pos0, int64_t n_tok) {
  const Kv& c = kv_.at(static_cast<size_t>(kv));
  check(k, n_tok * c.n_kv, "a KV store's keys");
  check(v, n_tok * c.n_kv, "a KV store's values");
  if (pos0 < 0 || pos0 + n_tok > c.n_ctx)
    fail("GPU step: positions {}..{} outside a KV cache of {}", pos0, pos0 + n_tok - 1, c.n_ctx);
  begin_op(false, {"kv_store"});
  const KvStorePush p{u32(n_tok), u32(c.n_kv), u32(pos0), u32(c.n_ctx), k.offset, v.offset};
  bind("kv_store", *c.set, &p, sizeof(p));
  launch(static_cast<uint64_t>(n_tok * c.n_kv));  // two halves a word, K and V
}

void VulkanStep::attention(const AttentionOp& op, DevArray q, DevArray out) {
  const Kv& c = kv_.at(static_cast<size_t>(op.kv));
  assert(op.n_head_kv > 0 && op.n_head % op.n_head_kv == 0 && op.head_dim <= 256 && op.head_dim % 2 == 0);
  assert(op.n_head_kv * op.head_dim == c.n_kv);
  check(q, op.n_tok * op.n_head * op.head_dim, "an attention's queries");
  check(out, op.n_tok * op.n_head * op.head_dim, "an attention's output");
  if (!op.sinks.empty()) check(op.sinks, op.n_head, "an attention's sinks");
  if (op.pos0 < 0 || op.pos0 + op.n_tok > c.n_ctx)
    fail("GPU step: attention positions outside a KV cache of {}", c.n_ctx);
  begin_op(false, {"attention"});
  const uint32_t window = u32(std::clamp<int64_t>(op.window, 0, c.n_ctx));  // a window past the cache: unlimited
  const AttentionPush p{u32(op.n_head), u32(op.n_head_kv), u32(op.head_dim), u32(op.pos0), u32(c.n_ctx), window,
                        q.offset, out.offset, op.sinks.empty() ? kNone : op.sinks.offset, op.scale};
  bind("attention", *c.set, &p, sizeof(p));
  cmd_->dispatch(u32(op.n_head), u32(op.n_tok), 1);  // one workgroup per (head, token)
  ++dispatches_;
}

void VulkanStep::glu(GluKind kind, float alpha, float limit, DevArray gate, DevArray up, DevArray h, int64_t n) {
  check(gate, n, "a GLU's gate");
  check(up, n, "a GLU's up");
  check(h, n, "a GLU's output");
  begin_op(false, {"glu"});
  const GluPush p{u32(n), static_cast<uint32_t>(kind), gate.offset, up.offset, h.offset, alpha, limit};
  bind("glu", *arena_set_, &p, sizeof(p));
  launch(static_cast<uint64_t>(n));
}

void VulkanStep::add(DevArray y, DevArray a, int64_t rows, int64_t n, bool broadcast) {
  check(y, rows * n, "an addition's output");
  check(a, broadcast ? n : rows * n, "an addition's input");
  begin_op(false, {"add"});
  const AddPush p{u32(rows), u32(n), y.offset, a.offset, broadcast ? 1u : 0u};
  bind("add", *arena_set_, &p, sizeof(p));
  launch(static_cast<uint64_t>(rows * n));
}

DevArray VulkanStep::round_for(quant::GgmlType t, DevArray x, DevArray dst, int64_t rows, int64_t cols) {
  if (be_.opts_.rounding != quant::ActivationRounding::match_ggml) return x;
  const auto mode = static_cast<uint32_t>(activation_grid(t));
  if (mode == 0) return x;  // F32: products read x as it is
  const int64_t block = mode == 3 ? 32 : mode == 4 ? 256 : 1;
  if (cols % block != 0) fail("GPU step: rows of {} activations do not divide into blocks of {}", cols, block);
  check(x, rows * cols, "a rounding's input");
  check(dst, rows * cols, "a rounding's output");
  begin_op(false, {"round"});
  const RoundPush p{u32(rows * cols), mode, x.offset, dst.offset};
  bind("round", *arena_set_, &p, sizeof(p));
  // Binary16 and bfloat16: one invocation per element; the 8-bit grids: a workgroup of 64 per 256 elements.
  const auto n = static_cast<uint64_t>(rows * cols);
  launch(block == 1 ? n : (n + 255) / 256 * 64);
  return dst.sub(0, rows * cols);
}

void VulkanStep::product(const quant::WeightView& w, DevArray x, DevArray y, int64_t n_tok, bool accumulate) {
  const VulkanBackend::Placed* pl = &placed(w);
  check(x, n_tok * w.cols, "a product's input");
  check(y, n_tok * w.rows, "a product's output");
  if (n_tok == 0) return;
  begin_op(true, {"product", static_cast<int>(w.type)});
  const vk::Pipeline pipeline = *be_.pipelines_.product(w.type);
  bool first = true;
  be_.for_each_piece(*pl, w, [&](const VulkanBackend::Piece& piece) {
    if (!first && be_.instance_->sync_validation()) barrier();  // as between products (begin_op)
    first = false;
    const ProductPush p{u32(piece.rows),
                        u32(w.cols),
                        u32(static_cast<int64_t>(w.row_bytes)),
                        u32(static_cast<int64_t>(piece.offset)),
                        x.offset,
                        u32(y.offset + piece.first),
                        u32(w.rows),
                        u32(n_tok),
                        kNone,
                        Pipelines::rows_per_lane(n_tok),
                        accumulate ? 1u : 0u};
    use(pipeline, *piece.chunk->step_set);
    cmd_->pushConstants<ProductPush>(*be_.pipelines_.layout(), vk::ShaderStageFlagBits::eCompute, 0, p);
    const uint32_t per_group = Pipelines::rows_per_group(u32(w.cols), p.rows_per_lane);
    const uint32_t groups = (u32(piece.rows) + per_group - 1) / per_group;
    cmd_->dispatch(std::min(groups, Pipelines::kMaxGroupsX),
                  u32((n_tok + Pipelines::kTokenTile - 1) / Pipelines::kTokenTile),
                  (groups + Pipelines::kMaxGroupsX - 1) / Pipelines::kMaxGroupsX);
    ++dispatches_;
  });
}

void VulkanStep::products_grouped(std::span<const GroupedProduct> ps, DevArray table) {
  check(table, static_cast<int64_t>(4 * ps.size()), "a grouped product's table");
  // Each product's chunk: the one that holds all its rows, or none (it straddles two: dispatched on its own).
  entries_.clear();
  for (size_t i = 0; i < ps.size(); ++i) {
    const GroupedProduct& g = ps[i];
    const VulkanBackend::Placed& pl = placed(g.w);
    check(g.x, g.n_tok * g.w.cols, "a grouped product's input");
    check(g.y, g.n_tok * g.w.rows, "a grouped product's output");
    Entry e{nullptr, i, 0};
    be_.for_each_piece(pl, g.w, [&](const VulkanBackend::Piece& piece) {
      if (piece.rows == g.w.rows) {
        e.chunk = piece.chunk;
        e.w_offset = u32(static_cast<int64_t>(piece.offset));
      }
    });
    if (g.n_tok > 0) entries_.push_back(e);
  }
  // Products of one chunk, type, shape and form run as one dispatch (workgroup z: the entry); the form is
  // matmul.comp's: one token, or tiles of tokens, as product() would choose it, so that an entry gives the bits of
  // the same product run alone. Each output element is written by one workgroup, so neither the buckets' order nor
  // the entries' changes a bit of the results.
  const auto bucket = [&](const Entry& e) {
    const GroupedProduct& g = ps[e.product];
    return std::make_tuple(reinterpret_cast<uintptr_t>(e.chunk), static_cast<int>(g.w.type), g.w.rows, g.w.cols,
                           Pipelines::rows_per_lane(g.n_tok));
  };
  std::stable_sort(entries_.begin(), entries_.end(),
                   [&](const Entry& a, const Entry& b) { return bucket(a) < bucket(b); });
  table_host_.clear();
  for (const Entry& e : entries_) {
    const GroupedProduct& g = ps[e.product];
    if (e.chunk == nullptr) continue;
    table_host_.insert(table_host_.end(), {e.w_offset, g.x.offset, g.y.offset, u32(g.n_tok)});
  }
  if (!table_host_.empty()) {
    static_assert(sizeof(uint32_t) == sizeof(float));
    upload(reinterpret_cast<const float*>(table_host_.data()), table.sub(0, static_cast<int64_t>(table_host_.size())));
  }
  size_t row = 0;  // table entry of the next bucket
  for (size_t i = 0; i < entries_.size();) {
    const Entry& e = entries_[i];
    const GroupedProduct& g = ps[e.product];
    if (e.chunk == nullptr) {
      product(g.w, g.x, g.y, g.n_tok);
      ++i;
      continue;
    }
    size_t j = i + 1;
    int64_t max_tok = g.n_tok;
    while (j < entries_.size() && bucket(entries_[j]) == bucket(e)) {
      max_tok = std::max(max_tok, ps[entries_[j].product].n_tok);
      ++j;
    }
    const auto* c = e.chunk;
    const uint32_t rl = Pipelines::rows_per_lane(max_tok);
    const uint32_t per_group = Pipelines::rows_per_group(u32(g.w.cols), rl);
    const uint32_t groups = (u32(g.w.rows) + per_group - 1) / per_group;
    if (groups > Pipelines::kMaxGroupsX) fail("GPU step: a grouped product of {} rows is too tall", g.w.rows);
    begin_op(true, {"grouped", static_cast<int>(g.w.type)});
    use(*be_.pipelines_.product(g.w.type), *c->step_set);
    ProductPush p{u32(g.w.rows), u32(g.w.cols), u32(static_cast<int64_t>(g.w.row_bytes)), 0, 0, 0, u32(g.w.rows), 0};
    p.table_off = u32(table.offset + 4 * row);
    p.rows_per_lane = rl;
    cmd_->pushConstants<ProductPush>(*be_.pipelines_.layout(), vk::ShaderStageFlagBits::eCompute, 0, p);
    cmd_->dispatch(groups, u32((max_tok + Pipelines::kTokenTile - 1) / Pipelines::kTokenTile), u32(j - i));
    ++dispatches_;
    row += j - i;
    i = j;
  }
}

void VulkanStep::gather(DevArray src, std::span<const int32_t> rows, int64_t n, DevArray dst, DevArray index) {
  check(dst, static_cast<int64_t>(rows.size()) * n, "a gather's output");
  check(index, static_cast<int64_t>(rows.size()), "a gather's row index");
  if (rows.empty()) return;
  for (const int32_t r : rows) {
    if (r < 0) fail("GPU step: a gather of row {}", r);
    check(src, (r + 1) * n, "a gather's input");
  }
  static_assert(sizeof(int32_t) == sizeof(float));
  upload(reinterpret_cast<const float*>(rows.data()), index.sub(0, static_cast<int64_t>(rows.size())));
  begin_op(false, {"gather"});
  const GatherPush p{u32(static_cast<int64_t>(rows.size())), u32(n), src.offset, index.offset, dst.offset};
  bind("gather", *arena_set_, &p, sizeof(p));
  launch(static_cast<uint64_t>(rows.size()) * static_cast<uint64_t>(n));
}

void VulkanStep::combine(DevArray slots, DevArray table, DevArray out, int64_t n_tok, int64_t k, int64_t n,
                         bool accumulate) {
  check(table, n_tok * k * 2, "a combine's table");
  check(slots, n_tok * k * n, "a combine's slots");  // the table's positions are below n_tok * k (MoeFfn)
  check(out, n_tok * n, "a combine's output");
  begin_op(false, {"combine"});
  const CombinePush p{u32(n_tok), u32(k), u32(n), slots.offset, table.offset, out.offset, accumulate ? 1u : 0u};
  bind("combine", *arena_set_, &p, sizeof(p));
  launch(static_cast<uint64_t>(n_tok * n));
}

void VulkanStep::submit() {
  if (recording_) return run(/*wait=*/true);
  if (in_flight_ == 0) return;
  // Nothing recorded since a submit_async(): wait for it and deliver its downloads.
  try {
    wait_for(in_flight_);
  } catch (...) {
    discard();
    throw;
  }
  deliver();
}

void VulkanStep::deliver() {
  in_flight_ = 0;
  for (const Download& d : downloads_) {
    std::memcpy(d.dst, down_stage_.mapped() + d.stage_offset, size_t{d.floats} * sizeof(float));
  }
  discard();
}

void VulkanStep::submit_async() {
  if (!recording_) return;
  run(/*wait=*/profile_ != nullptr);  // the profile reads each submission's timestamps after waiting for it
}

void VulkanStep::run(bool wait) {
  try {
    using A = vk::AccessFlagBits;
    using P = vk::PipelineStageFlagBits;
    if (profile_) profile_->mark(*cmd_, op_);
    cmd_->pipelineBarrier(P::eComputeShader | P::eTransfer, P::eHost, {},
                          vk::MemoryBarrier(A::eShaderWrite | A::eTransferWrite, A::eHostRead), {}, {});
    cmd_->end();
    // Ordered after every weight upload of the transfer queue, as the backend's own submissions are.
    const uint64_t signal = be_.compute_done_.next();
    const uint64_t uploaded = be_.transfer_done_.value();
    const vk::Semaphore wait_sem = *be_.transfer_done_.semaphore();
    const vk::Semaphore signal_sem = *be_.compute_done_.semaphore();
    const vk::PipelineStageFlags wait_stage = P::eTransfer | P::eComputeShader;
    vk::TimelineSemaphoreSubmitInfo ti(uploaded, signal);
    const vk::CommandBuffer cmd = **cmd_;
    vk::SubmitInfo si(wait_sem, wait_stage, cmd, signal_sem);
    si.pNext = &ti;
    if (profile_) profile_->submitted();
    be_.device_.compute_queue().submit(si);
    signal_of_[static_cast<size_t>(cmd_ - bufs_.data())] = signal;
    ++be_.counters_.submissions;
    be_.counters_.dispatches += dispatches_;
    if (wait) {
      wait_for(signal);  // a later value: every submission before it is done too (one queue, in order)
      if (profile_) profile_->finished();
    }
  } catch (const vk::SystemError& e) {
    discard();
    fail("Vulkan: a GPU step submission failed on {} ({})", be_.device().name, e.what());
  } catch (...) {
    discard();  // a timed-out or lost device (Timeline::wait): no download lands
    throw;
  }
  recording_ = false;
  dispatches_ = 0;
  last_was_product_ = false;
  if (!wait) {
    // The other buffer records on; the staging space and downloads of this one stay taken until a submit().
    in_flight_ = signal_of_[static_cast<size_t>(cmd_ - bufs_.data())];
    cmd_ = &bufs_[cmd_ == &bufs_[0] ? 1 : 0];
    after_async_ = true;
    return;
  }
  deliver();
}

void VulkanStep::discard() {
  if (in_flight_ != 0) {
    try {
      wait_for(in_flight_);  // its buffer and staging space are reused next
    } catch (...) {          // a lost device: nothing left to wait for
      done_ = in_flight_;
    }
    in_flight_ = 0;
  }
  if (recording_) {
    cmd_->reset();
    recording_ = false;
  }
  after_async_ = false;
  downloads_.clear();
  up_used_ = down_used_ = 0;
  dispatches_ = 0;
  last_was_product_ = false;
}

}  // namespace moetier::gpu::vk_impl
