#include "gpu/vulkan/vulkan_backend.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cstring>
#include <vector>

#include <sys/mman.h>

#include "gpu/vulkan/vulkan_step.h"
#include "util/error.h"

namespace moetier::gpu::vk_impl {

namespace {

constexpr uint32_t kSetsPerPool = 256;
// The io buffers hold at most this many floats each (1 GiB): a longer call runs as several submissions.
constexpr size_t kMaxIoFloats = size_t{1} << 28;

}  // namespace

VulkanBackend::VulkanBackend(const GpuOptions& o)
    : opts_(o),
      instance_(Instance::shared(o.validation)),
      errors_at_start_(instance_->validation_errors()),
      device_(*instance_, o.device),
      pipelines_(device_),
      compute_done_(device_.get(), device_.info().type != "cpu"),
      transfer_done_(device_.get(), device_.info().type != "cpu") {
  if (o.max_cols < 1 || o.max_rows < 1 || o.max_tok < 1) {
    fail("GPU backend: max_cols, max_rows and max_tok must be positive (got {}, {}, {})", o.max_cols, o.max_rows,
         o.max_tok);
  }
  const uint64_t range = device_.info().max_storage_buffer_range;
  // Whole 16-byte multiples: a buffer rounded up to 4 bytes still binds within the range (some drivers report
  // 2^32 - 1).
  if (opts_.max_buffer_bytes == 0 || opts_.max_buffer_bytes > range) opts_.max_buffer_bytes = range & ~uint64_t{15};
  // x holds a whole call's activations (one group at least); y at least one token of the widest product.
  const size_t range_floats = static_cast<size_t>(range / sizeof(float));
  x_cap_ = std::min({static_cast<size_t>(o.max_tok * o.max_cols), kMaxIoFloats, range_floats});
  y_cap_ = std::min({std::max(static_cast<size_t>(o.max_tok * o.max_cols), static_cast<size_t>(o.max_rows)),
                     kMaxIoFloats, range_floats});
  if (x_cap_ < static_cast<size_t>(o.max_cols) || y_cap_ < static_cast<size_t>(o.max_rows)) {
    fail("GPU backend: a product of {} rows and {} columns exceeds the device's storage buffer range of {} bytes",
         o.max_rows, o.max_cols, range);
  }
  try {
    x_dev_ = Buffer(device_, x_cap_ * sizeof(float), BufferKind::device_local, "the product inputs");
    y_dev_ = Buffer(device_, y_cap_ * sizeof(float), BufferKind::device_local, "the product outputs");
    x_stage_ = Buffer(device_, x_cap_ * sizeof(float), BufferKind::staging, "the product inputs");
    y_stage_ = Buffer(device_, y_cap_ * sizeof(float), BufferKind::readback, "the product outputs");
    compute_pool_ = vk::raii::CommandPool(
        device_.get(),
        vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, device_.compute_family()));
    compute_cmd_ = std::move(vk::raii::CommandBuffers(
        device_.get(), vk::CommandBufferAllocateInfo(*compute_pool_, vk::CommandBufferLevel::ePrimary, 1))[0]);
    transfer_pool_ = vk::raii::CommandPool(
        device_.get(),
        vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, device_.transfer_family()));
    uploads_ = std::make_unique<UploadRing>(device_, transfer_pool_, transfer_done_);
  } catch (const vk::SystemError& e) {
    fail("Vulkan: cannot set up the GPU backend on {} ({})", device_.info().name, e.what());
  }
  jobs_.reserve(kMaxJobs);
  reads_.reserve(kMaxJobs);
}

VulkanBackend::~VulkanBackend() {
  try {
    uploads_->wait_all();  // the weight and slot buffers (placed_, destroyed before uploads_) outlive their copies
  } catch (...) {          // a lost device: nothing left to wait for
  }
  step_.reset();
  for (const auto& [addr, size] : reservations_) munmap(addr, size);
}

void VulkanBackend::place(const quant::WeightView& w) {
  assert(w.memory == quant::Memory::host && !w.empty());
  if (find(w) != nullptr) return;  // already placed (the output head tied to the token embeddings)
  if (step_ != nullptr) fail("GPU backend: weights placed after the device step was made");
  pipelines_.product(w.type);
  const auto rows_per_chunk = static_cast<int64_t>(opts_.max_buffer_bytes / w.row_bytes);
  if (rows_per_chunk < 1) {
    fail("a {}-column {} row ({} bytes) exceeds the GPU's storage buffer range of {} bytes", w.cols,
         quant::type_name(w.type), w.row_bytes, opts_.max_buffer_bytes);
  }
  Placed pl;
  pl.host = w.data;
  pl.type = w.type;
  pl.rows = w.rows;
  pl.cols = w.cols;
  pl.row_bytes = w.row_bytes;
  pl.chunks.reserve(static_cast<size_t>((w.rows + rows_per_chunk - 1) / rows_per_chunk));
  uint64_t placed = 0;  // counted once the whole matrix is placed: a failed place() holds nothing
  try {
    for (int64_t r0 = 0; r0 < w.rows; r0 += rows_per_chunk) {
      Chunk c;
      c.row0 = r0;
      c.rows = std::min(rows_per_chunk, w.rows - r0);
      const uint64_t bytes = static_cast<uint64_t>(c.rows) * w.row_bytes;
      c.buffer = Buffer(device_, bytes, BufferKind::device_local, "weights");
      bind_chunk(c);
      pl.chunks.push_back(std::move(c));  // owned by pl before a copy into it is queued
      upload(w.row(r0), bytes, pl.chunks.back().buffer);
      placed += bytes;
    }
  } catch (...) {
    // A chunk that does not fit, or a failed copy: the copies queued into pl's chunks land before they go (a
    // copy that failed part way left its earlier pieces queued).
    try {
      uploads_->wait_all();
    } catch (...) {  // a lost device: nothing left to wait for
    }
    throw;
  }
  placed_bytes_ += placed;
  placed_.emplace(w.data, std::move(pl));
}

const uint8_t* VulkanBackend::reserve_slots(uint64_t slot_bytes, int64_t n_slots,
                                            std::span<const quant::GgmlType> types) {
  if (step_ != nullptr) fail("GPU backend: expert slots reserved after the device step was made");
  if (slot_bytes == 0 || slot_bytes % 256 != 0 || n_slots < 1)
    fail("GPU backend: {} expert slots of {} bytes (a positive multiple of 256)", n_slots, slot_bytes);
  for (const quant::GgmlType t : types) pipelines_.product(t);
  const auto per_chunk = static_cast<int64_t>(opts_.max_buffer_bytes / slot_bytes);
  if (per_chunk < 1) {
    fail("an expert slot of {} bytes exceeds the GPU's storage buffer range of {} bytes", slot_bytes,
         opts_.max_buffer_bytes);
  }
  // Addresses only: PROT_NONE and no reserve, so the range costs no memory, and no other mapping (a model file)
  // can take them.
  const size_t span = static_cast<size_t>(slot_bytes) * static_cast<size_t>(n_slots);
  void* base = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) fail("GPU backend: cannot reserve {} bytes of addresses for the expert slots", span);
  reservations_.emplace_back(base, span);
  Placed pl;
  pl.host = static_cast<const uint8_t*>(base);
  pl.rows = n_slots;
  pl.row_bytes = slot_bytes;
  pl.slots = true;
  pl.types.assign(types.begin(), types.end());
  for (int64_t s0 = 0; s0 < n_slots; s0 += per_chunk) {
    Chunk c;
    c.row0 = s0;
    c.rows = std::min(per_chunk, n_slots - s0);
    const uint64_t bytes = static_cast<uint64_t>(c.rows) * slot_bytes;
    c.buffer = Buffer(device_, bytes, BufferKind::device_local, "the expert slots");
    bind_chunk(c);
    slot_bytes_ += bytes;
    pl.chunks.push_back(std::move(c));
  }
  placed_.emplace(pl.host, std::move(pl));
  return static_cast<const uint8_t*>(base);
}

void VulkanBackend::write_slots(std::span<const SlotWrite> writes, bool wait) {
  // Where each write lands, every one checked before any is queued: a refused write queues none of the call's.
  const auto target = [&](const SlotWrite& w) {
    auto it = placed_.upper_bound(w.dst);
    const Placed* pl = it == placed_.begin() ? nullptr : &(--it)->second;
    const auto off = pl != nullptr ? static_cast<uint64_t>(w.dst - pl->host) : 0;
    const auto slot = pl != nullptr ? static_cast<int64_t>(off / pl->row_bytes) : 0;
    if (pl == nullptr || !pl->slots || slot >= pl->rows || off % 4 != 0 ||
        off + w.bytes > static_cast<uint64_t>(slot + 1) * pl->row_bytes) {
      fail("GPU backend: a write of {} bytes outside the expert slots", w.bytes);
    }
    const Chunk* chunk = nullptr;
    for (const Chunk& c : pl->chunks) {
      if (slot >= c.row0 && slot < c.row0 + c.rows) chunk = &c;
    }
    return std::pair{chunk, off - static_cast<uint64_t>(chunk->row0) * pl->row_bytes};
  };
  for (const SlotWrite& w : writes) target(w);
  try {
    for (const SlotWrite& w : writes) {
      // Rounded up to whole words (UploadRing::copy): a slot ends on a multiple of 256 bytes, so the padding stays
      // in the slot.
      const auto [chunk, at] = target(w);
      uploads_->copy(w.src, w.bytes, *chunk->buffer.get(), at);
    }
    if (wait) {
      uploads_->wait_all();
    } else {
      uploads_->submit();
    }
  } catch (const vk::SystemError& e) {
    fail("Vulkan: copying experts into their GPU slots failed on {} ({})", device_.info().name, e.what());
  }
}

void VulkanBackend::upload(const uint8_t* src, uint64_t bytes, const Buffer& dst) {
  // Buffer sizes are rounded up to 4 bytes (shaders read whole words): the copy's last word may take up to 3
  // staging bytes past the weights' end into that padding. Waited for, tensor by tensor (setup only; a tensor's
  // pieces still overlap memcpy and transfer). Leaving hundreds of tensors' copies queued unwaited gained only load
  // time, and coincided with the one crash seen in Mesa 22.3's lavapipe (a hybrid GPU oracle test, once in three CI
  // runs; not reproduced in ~35 more runs of it): a pattern its queue had not run before.
  try {
    uploads_->copy(src, bytes, *dst.get(), 0);
    uploads_->wait_all();
  } catch (const vk::SystemError& e) {
    fail("Vulkan: copying weights to {} failed ({})", device_.info().name, e.what());
  }
}

uint64_t VulkanBackend::submit_and_wait(const vk::raii::Queue& queue, const vk::raii::CommandBuffer& cb,
                                        Timeline& done) {
  const uint64_t signal = done.next();
  const vk::Semaphore sem = *done.semaphore();
  vk::TimelineSemaphoreSubmitInfo ti({}, signal);
  const vk::CommandBuffer cmd = *cb;
  vk::SubmitInfo si({}, {}, cmd, sem);
  si.pNext = &ti;
  queue.submit(si);
  done.wait(signal);
  return signal;
}

void VulkanBackend::bind_chunk(Chunk& c) {
  if (step_ != nullptr) fail("GPU backend: weights placed after the device step was made");
  c.set = make_set(c.buffer, x_dev_, y_dev_);
}

void VulkanBackend::release_step() { step_.reset(); }

DeviceStep& VulkanBackend::step() {
  if (step_ == nullptr) step_ = std::make_unique<VulkanStep>(*this);
  return *step_;
}

vk::raii::DescriptorSet VulkanBackend::make_set(const Buffer& b0, const Buffer& b1, const Buffer& b2) {
  if (sets_left_ == 0) {
    const vk::DescriptorPoolSize size(vk::DescriptorType::eStorageBuffer, 3 * kSetsPerPool);
    descriptor_pools_.emplace_back(
        device_.get(),
        vk::DescriptorPoolCreateInfo(vk::DescriptorPoolCreateFlagBits::eFreeDescriptorSet, kSetsPerPool, size));
    sets_left_ = kSetsPerPool;
  }
  const vk::DescriptorSetLayout layout = *pipelines_.set_layout();
  vk::raii::DescriptorSet set = std::move(
      vk::raii::DescriptorSets(device_.get(), vk::DescriptorSetAllocateInfo(*descriptor_pools_.back(), layout))[0]);
  --sets_left_;
  const vk::DescriptorBufferInfo infos[3] = {
      {*b0.get(), 0, VK_WHOLE_SIZE}, {*b1.get(), 0, VK_WHOLE_SIZE}, {*b2.get(), 0, VK_WHOLE_SIZE}};
  vk::WriteDescriptorSet writes[3];
  for (uint32_t i = 0; i < 3; ++i) writes[i] = vk::WriteDescriptorSet(*set, i, 0, vk::DescriptorType::eStorageBuffer, {}, infos[i]);
  device_.get().updateDescriptorSets(writes, {});
  return set;
}

double VulkanBackend::read_bandwidth(uint64_t bytes) {
  constexpr uint32_t kGroups = 1024;  // a few per compute unit of any GPU; each invocation strides the buffer
  constexpr int kPasses = 10;
  bytes = std::min(bytes, device_.info().max_storage_buffer_range) & ~uint64_t{15};
  if (bytes == 0) fail("GPU read bandwidth: no bytes to read");
  const uint32_t words = u32(static_cast<int64_t>(bytes / 16));
  try {
    Buffer src(device_, bytes, BufferKind::device_local, "the bandwidth test");
    Buffer dst(device_, uint64_t{kGroups} * Pipelines::kReadGroupSize * sizeof(uint32_t), BufferKind::device_local,
               "the bandwidth test");
    const vk::raii::DescriptorSet set = make_set(src, x_dev_, dst);
    const vk::Pipeline pipeline = *pipelines_.read();
    ProductPush push;
    push.rows = words;
    const auto run = [&](int passes) {
      auto& cb = compute_cmd_;
      cb.reset();
      cb.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
      using A = vk::AccessFlagBits;
      using P = vk::PipelineStageFlagBits;
      cb.fillBuffer(*src.get(), 0, VK_WHOLE_SIZE, 0x5a5a5a5au);
      cb.pipelineBarrier(P::eTransfer, P::eComputeShader, {}, vk::MemoryBarrier(A::eTransferWrite, A::eShaderRead),
                         {}, {});
      cb.bindPipeline(vk::PipelineBindPoint::eCompute, pipeline);
      cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, *pipelines_.layout(), 0, *set, {});
      cb.pushConstants<ProductPush>(*pipelines_.layout(), vk::ShaderStageFlagBits::eCompute, 0, push);
      for (int i = 0; i < passes; ++i) {
        // Each pass rewrites dst: order the writes (a write-after-write hazard otherwise).
        if (i > 0) {
          cb.pipelineBarrier(P::eComputeShader, P::eComputeShader, {},
                             vk::MemoryBarrier(A::eShaderWrite, A::eShaderWrite), {}, {});
        }
        cb.dispatch(kGroups, 1, 1);
      }
      cb.end();
      const auto t0 = std::chrono::steady_clock::now();
      submit_and_wait(device_.compute_queue(), cb, compute_done_);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    run(1);  // first use: pipeline and memory warm
    const double with_fill = run(kPasses);
    const double fill_only = run(0);
    const double seconds = std::max(with_fill - fill_only, 1e-9);
    return static_cast<double>(bytes) * kPasses / seconds / 1e9;
  } catch (const vk::SystemError& e) {
    fail("Vulkan: the read-bandwidth test failed on {} ({})", device_.info().name, e.what());
  }
}

double VulkanBackend::submit_latency_us(int n) {
  if (n < 1) fail("GPU submission latency: {} round trips asked for", n);
  try {
    // read.comp over no words: one workgroup that only writes its zero sums, so the GPU's own time is ~nothing.
    Buffer src(device_, 16, BufferKind::device_local, "the latency test");
    Buffer dst(device_, Pipelines::kReadGroupSize * sizeof(uint32_t), BufferKind::device_local, "the latency test");
    const vk::raii::DescriptorSet set = make_set(src, x_dev_, dst);
    auto& cb = compute_cmd_;
    cb.reset();
    cb.begin(vk::CommandBufferBeginInfo{});  // recorded once, submitted n + 1 times
    // Orders this submission's writes of dst after the previous one's (a barrier's first scope reaches into the
    // submissions before it on the queue).
    using A = vk::AccessFlagBits;
    using P = vk::PipelineStageFlagBits;
    cb.pipelineBarrier(P::eComputeShader, P::eComputeShader, {}, vk::MemoryBarrier(A::eShaderWrite, A::eShaderWrite),
                       {}, {});
    cb.bindPipeline(vk::PipelineBindPoint::eCompute, *pipelines_.read());
    cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, *pipelines_.layout(), 0, *set, {});
    cb.pushConstants<ProductPush>(*pipelines_.layout(), vk::ShaderStageFlagBits::eCompute, 0, ProductPush{});
    cb.dispatch(1, 1, 1);
    cb.end();
    std::vector<double> us(static_cast<size_t>(n));
    for (int i = -1; i < n; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      submit_and_wait(device_.compute_queue(), cb, compute_done_);
      if (i >= 0) us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(
                                                   std::chrono::steady_clock::now() - t0).count();
    }
    std::nth_element(us.begin(), us.begin() + n / 2, us.end());
    return us[static_cast<size_t>(n / 2)];
  } catch (const vk::SystemError& e) {
    fail("Vulkan: the submission-latency test failed on {} ({})", device_.info().name, e.what());
  }
}

const VulkanBackend::Placed* VulkanBackend::find(const quant::WeightView& w) const {
  if (w.memory != quant::Memory::host || w.empty() || placed_.empty()) return nullptr;
  auto it = placed_.upper_bound(w.data);
  if (it == placed_.begin()) return nullptr;
  const Placed& pl = (--it)->second;
  const auto offset = static_cast<size_t>(w.data - pl.host);
  if (pl.slots) {
    const size_t slot = offset / pl.row_bytes;
    return std::find(pl.types.begin(), pl.types.end(), w.type) != pl.types.end() && offset % 16 == 0 &&
                   static_cast<int64_t>(slot) < pl.rows &&
                   offset + static_cast<size_t>(w.rows) * w.row_bytes <= (slot + 1) * pl.row_bytes
               ? &pl
               : nullptr;
  }
  const bool inside = w.type == pl.type && w.cols == pl.cols && w.row_bytes == pl.row_bytes &&
                      offset % pl.row_bytes == 0 &&
                      static_cast<int64_t>(offset / pl.row_bytes) + w.rows <= pl.rows;
  return inside ? &pl : nullptr;
}

bool VulkanBackend::fits(size_t n_x, size_t n_y) const {
  return x_used_ + n_x <= x_cap_ && y_used_ + n_y <= y_cap_ && jobs_.size() + 64 <= kMaxJobs;
}

uint32_t VulkanBackend::stage_x(const float* x, int64_t n_tok, int64_t cols, quant::GgmlType t) {
  const auto n = static_cast<size_t>(n_tok * cols);
  if (n > x_cap_) {
    fail("GPU backend: a product input of {} x {} floats exceeds the {} floats of the input buffer", n_tok, cols,
         x_cap_);
  }
  if (x_used_ + n > x_cap_) flush();
  float* dst = reinterpret_cast<float*>(x_stage_.mapped()) + x_used_;
  std::memcpy(dst, x, n * sizeof(float));
  if (opts_.rounding == quant::ActivationRounding::match_ggml) {
    for (int64_t tok = 0; tok < n_tok; ++tok) quant::round_activations_like_ggml(t, dst + tok * cols, cols);
  }
  const auto off = static_cast<uint32_t>(x_used_);
  x_used_ += n;
  return off;
}

void VulkanBackend::queue_product(const Placed& pl, const quant::WeightView& w, uint32_t x_offset, int64_t n_tok,
                                  float* y) {
  const auto y_offset = static_cast<uint32_t>(y_used_);
  const vk::Pipeline pipeline = *pipelines_.product(w.type);
  for_each_piece(pl, w, [&](const Piece& piece) {
    Job j;
    j.pipeline = pipeline;
    j.set = *piece.chunk->set;
    j.push = {u32(piece.rows),
              u32(w.cols),
              u32(static_cast<int64_t>(w.row_bytes)),
              u32(static_cast<int64_t>(piece.offset)),
              x_offset,
              u32(y_offset + piece.first),
              u32(w.rows),
              u32(n_tok),
              0xffffffffu,
              Pipelines::rows_per_lane(n_tok)};
    const uint32_t per_group = Pipelines::rows_per_group(u32(w.cols), j.push.rows_per_lane);
    const uint32_t groups = (u32(piece.rows) + per_group - 1) / per_group;
    j.groups_x = std::min(groups, Pipelines::kMaxGroupsX);
    j.groups_y = u32((n_tok + Pipelines::kTokenTile - 1) / Pipelines::kTokenTile);
    j.groups_z = (groups + Pipelines::kMaxGroupsX - 1) / Pipelines::kMaxGroupsX;
    jobs_.push_back(j);
  });
  reads_.push_back({y, y_offset, u32(n_tok * w.rows)});
  y_used_ += static_cast<size_t>(n_tok * w.rows);
}

void VulkanBackend::sliced_product(const Placed& pl, const quant::Product& p, const float* x, int64_t n_tok) {
  // A slice's inputs must fit x as its outputs fit y (x_cap_ is clamped to the storage buffer range).
  const int64_t per_slice = std::max<int64_t>(
      1, std::min(static_cast<int64_t>(y_cap_) / p.w.rows, static_cast<int64_t>(x_cap_) / p.w.cols));
  for (int64_t t0 = 0; t0 < n_tok; t0 += per_slice) {
    const int64_t nt = std::min(per_slice, n_tok - t0);
    flush();
    const uint32_t xo = stage_x(x + t0 * p.w.cols, nt, p.w.cols, p.w.type);
    queue_product(pl, p.w, xo, nt, p.y + t0 * p.w.rows);
  }
  flush();
}

void VulkanBackend::matmul(const quant::WeightView& w, const float* x, float* y, int64_t n_tok) {
  const quant::Product p{w, y};
  matmul_shared_x({&p, 1}, x, n_tok);
}

void VulkanBackend::matmul_shared_x(std::span<const quant::Product> products, const float* x, int64_t n_tok) {
  const quant::ProductGroup g{products, x, n_tok, false};
  matmul_groups({&g, 1});
}

void VulkanBackend::matmul_groups(std::span<const quant::ProductGroup> groups) {
  for (const quant::ProductGroup& g : groups) {
    if (g.products.empty() || g.n_tok == 0) continue;
    const int64_t cols = g.products[0].w.cols;
    // x is staged once per weight type of the group (Q, K and V of a K-quant mix may differ), each rounded for it.
    std::array<quant::GgmlType, 4> types{};
    size_t n_types = 0;
    bool few_types = true;
    size_t n_y = 0;
    for (const auto& p : g.products) {
      n_y += static_cast<size_t>(g.n_tok * p.w.rows);
      if (std::find(types.begin(), types.begin() + n_types, p.w.type) != types.begin() + n_types) continue;
      if (n_types == types.size()) {
        few_types = false;
      } else {
        types[n_types++] = p.w.type;
      }
    }
    const auto n_x = static_cast<size_t>(g.n_tok * cols) * n_types;
    if (!few_types || n_x > x_cap_ || n_y > y_cap_) {
      // Too big for one submission: each product on its own, in token slices.
      for (const auto& p : g.products) {
        const Placed* pl = find(p.w);
        assert(pl != nullptr);
        sliced_product(*pl, p, g.x, g.n_tok);
      }
      continue;
    }
    if (!fits(n_x, n_y)) flush();
    std::array<uint32_t, 4> offsets{};
    for (size_t i = 0; i < n_types; ++i) offsets[i] = stage_x(g.x, g.n_tok, cols, types[i]);
    for (const auto& p : g.products) {
      assert(p.w.cols == cols);
      const Placed* pl = find(p.w);
      assert(pl != nullptr);  // the caller routes only held products here (compute::HybridBackend)
      const size_t i = static_cast<size_t>(std::find(types.begin(), types.begin() + n_types, p.w.type) - types.begin());
      queue_product(*pl, p.w, offsets[i], g.n_tok, p.y);
    }
  }
  flush();
}

void VulkanBackend::flush() {
  if (jobs_.empty()) {
    x_used_ = y_used_ = 0;
    reads_.clear();
    return;
  }
  try {
    auto& cb = compute_cmd_;
    cb.reset();
    cb.begin(vk::CommandBufferBeginInfo(vk::CommandBufferUsageFlagBits::eOneTimeSubmit));
    cb.copyBuffer(*x_stage_.get(), *x_dev_.get(), vk::BufferCopy(0, 0, x_used_ * sizeof(float)));
    using A = vk::AccessFlagBits;
    using P = vk::PipelineStageFlagBits;
    cb.pipelineBarrier(P::eTransfer, P::eComputeShader, {}, vk::MemoryBarrier(A::eTransferWrite, A::eShaderRead), {},
                       {});
    vk::Pipeline bound = nullptr;
    for (const Job& j : jobs_) {
      if (j.pipeline != bound) {
        cb.bindPipeline(vk::PipelineBindPoint::eCompute, j.pipeline);
        bound = j.pipeline;
      }
      cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, *pipelines_.layout(), 0, j.set, {});
      cb.pushConstants<ProductPush>(*pipelines_.layout(), vk::ShaderStageFlagBits::eCompute, 0, j.push);
      cb.dispatch(j.groups_x, j.groups_y, j.groups_z);
    }
    cb.pipelineBarrier(P::eComputeShader, P::eTransfer, {}, vk::MemoryBarrier(A::eShaderWrite, A::eTransferRead), {},
                       {});
    cb.copyBuffer(*y_dev_.get(), *y_stage_.get(), vk::BufferCopy(0, 0, y_used_ * sizeof(float)));
    cb.pipelineBarrier(P::eTransfer, P::eHost, {}, vk::MemoryBarrier(A::eTransferWrite, A::eHostRead), {}, {});
    cb.end();
    // Waiting on the uploads' timeline orders this submission after every weight copy of the transfer queue.
    const uint64_t signal = compute_done_.next();
    const uint64_t uploaded = transfer_done_.value();
    const vk::Semaphore wait_sem = *transfer_done_.semaphore();
    const vk::Semaphore signal_sem = *compute_done_.semaphore();
    // The uploads are waited for before this submission's copies and shaders (the weights' first readers).
    const vk::PipelineStageFlags wait_stage = P::eTransfer | P::eComputeShader;
    vk::TimelineSemaphoreSubmitInfo ti(uploaded, signal);
    const vk::CommandBuffer cmd = *cb;
    vk::SubmitInfo si(wait_sem, wait_stage, cmd, signal_sem);
    si.pNext = &ti;
    device_.compute_queue().submit(si);
    ++counters_.submissions;
    counters_.dispatches += jobs_.size();
    compute_done_.wait(signal);
  } catch (const vk::SystemError& e) {
    fail("Vulkan: a product submission failed on {} ({})", device_.info().name, e.what());
  }
  for (const Readback& r : reads_) {
    std::memcpy(r.dst, y_stage_.mapped() + size_t{r.y_offset} * sizeof(float), size_t{r.floats} * sizeof(float));
  }
  jobs_.clear();
  reads_.clear();
  x_used_ = y_used_ = 0;
}

}  // namespace moetier::gpu::vk_impl
