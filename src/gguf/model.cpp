// GgufModel: one GGUF file or all shards of a split model, mapped read-only and presented as one tensor list.
#include <map>

#include "gguf/gguf.h"
#include "gguf/split_name.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace moetier::gguf {

struct GgufModel::Impl {
  std::filesystem::path path;
  std::vector<MappedFile> maps;  // one per shard; empty when opened with map_data = false
  std::vector<Shard> shards;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> by_name;
};

namespace {

struct OpenedShard {
  MappedFile map;
  ParsedHeader header;
};

OpenedShard open_shard(const std::filesystem::path& path) {
  OpenedShard s{MappedFile::open(path), {}};
  s.header = parse_header(s.map.bytes(), s.map.size(), path.string());
  return s;
}

uint64_t split_key(const ParsedHeader& h, const std::filesystem::path& path, const char* key) {
  try {
    return h.metadata.get_uint(key);
  } catch (const Error& e) {
    fail("{}: {}", path.string(), e.what());
  }
}

// All shard files of the model `first` belongs to, in split.no order; `first` is moved into its slot.
std::vector<OpenedShard> open_all_shards(const std::filesystem::path& path, OpenedShard first) {
  const uint64_t count = split_key(first.header, path, kSplitCount);
  if (count == 0) fail("{}: split.count is 0, expected at least 1", path.string());
  std::vector<OpenedShard> out;
  if (count == 1) {
    out.push_back(std::move(first));
    return out;
  }
  const auto name = parse_split_name(path);
  if (!name)
    fail("{}: split.count is {} but the file name does not follow NAME-0000k-of-0000N.gguf, so the other shards "
         "cannot be located",
         path.string(), count);
  if (static_cast<uint64_t>(name->count) != count)
    fail("{}: split.count is {} but the file name says {} shards", path.string(), count, name->count);
  for (int k = 1; k <= name->count; ++k) {
    if (k == name->number) {
      out.push_back(std::move(first));
      continue;
    }
    const std::filesystem::path p = split_file_name(name->prefix, k, name->count);
    std::error_code ec;
    if (!std::filesystem::exists(p, ec))
      fail("split model {}: shard {} of {} is missing: {}", path.string(), k, name->count, p.string());
    out.push_back(open_shard(p));
  }
  return out;
}

void check_split_keys(const std::vector<OpenedShard>& shards, const std::vector<std::filesystem::path>& paths) {
  if (shards.size() == 1 && !shards[0].header.metadata.has(kSplitCount)) return;
  for (size_t i = 0; i < shards.size(); ++i) {
    const auto& h = shards[i].header;
    const uint64_t count = split_key(h, paths[i], kSplitCount);
    if (count != shards.size())
      fail("{}: split.count is {}, but the split model has {} shards", paths[i].string(), count, shards.size());
    const uint64_t no = split_key(h, paths[i], kSplitNo);
    if (no != i) fail("{}: split.no is {}, expected {} for shard {} of {}", paths[i].string(), no, i, i + 1,
                      shards.size());
  }
  size_t total = 0;
  for (const auto& s : shards) total += s.header.tensors.size();
  if (shards[0].header.metadata.has(kSplitTensorsCount)) {
    const uint64_t expected = split_key(shards[0].header, paths[0], kSplitTensorsCount);
    if (expected != total)
      fail("{}: split.tensors.count is {} but the {} shards hold {} tensors", paths[0].string(), expected,
           shards.size(), total);
  }
}

}  // namespace

GgufModel GgufModel::open(const std::filesystem::path& path, const OpenOptions& opts) {
  OpenedShard first = open_shard(path);
  std::vector<OpenedShard> opened;
  if (first.header.metadata.has(kSplitCount)) {
    opened = open_all_shards(path, std::move(first));
  } else {
    opened.push_back(std::move(first));
  }
  std::vector<std::filesystem::path> paths;
  for (const auto& s : opened) paths.push_back(s.map.path());
  check_split_keys(opened, paths);

  auto impl = std::make_unique<Impl>();
  impl->path = path;
  for (size_t si = 0; si < opened.size(); ++si) {
    OpenedShard& os = opened[si];
    Shard sh;
    sh.path = os.map.path();
    sh.file_size = os.map.size();
    sh.version = os.header.version;
    sh.alignment = os.header.alignment;
    sh.data_section_offset = os.header.data_section_offset;
    sh.metadata = std::move(os.header.metadata);
    for (TensorInfo& ti : os.header.tensors) {
      ti.shard = static_cast<uint32_t>(si);
      ti.data = opts.map_data && ti.n_bytes > 0 ? os.map.data() + ti.file_offset : nullptr;
      if (!impl->by_name.emplace(ti.name, impl->tensors.size()).second)
        fail("{}: tensor '{}' also appears in an earlier shard", sh.path.string(), ti.name);
      sh.tensor_indices.push_back(impl->tensors.size());
      impl->tensors.push_back(std::move(ti));
    }
    impl->shards.push_back(std::move(sh));
    if (opts.map_data) impl->maps.push_back(std::move(os.map));
  }
  return GgufModel(std::move(impl));
}

GgufModel::GgufModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufModel::GgufModel(GgufModel&&) noexcept = default;
GgufModel& GgufModel::operator=(GgufModel&&) noexcept = default;
GgufModel::~GgufModel() = default;

const Metadata& GgufModel::metadata() const { return impl_->shards.front().metadata; }
const std::vector<TensorInfo>& GgufModel::tensors() const { return impl_->tensors; }
const std::vector<Shard>& GgufModel::shards() const { return impl_->shards; }
const std::filesystem::path& GgufModel::path() const { return impl_->path; }

const TensorInfo* GgufModel::find(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  return it == impl_->by_name.end() ? nullptr : &impl_->tensors[it->second];
}

const TensorInfo& GgufModel::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) fail("{}: tensor '{}' not found", impl_->path.string(), name);
  return *t;
}

std::string GgufModel::architecture() const {
  const Value* v = metadata().find("general.architecture");
  if (v == nullptr) fail("{}: metadata key 'general.architecture' is missing", impl_->path.string());
  if (!v->is_string())
    fail("{}: metadata key 'general.architecture' has type {}, expected string", impl_->path.string(),
         value_type_name(v->type));
  return v->as_string();
}

}  // namespace moetier::gguf
