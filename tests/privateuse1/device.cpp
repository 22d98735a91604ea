// swdev runtime: the allocator (host memory), the device guard (one device, one stream, no
// events), the PrivateUse1 hooks, and the helpers of swdev.h.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "swdev.h"

namespace swdev {
namespace {

// Every allocation is followed by kRedzone bytes set to 0xFF, like guard pages after a device
// buffer: a kernel that reads up to kRedzone bytes past a buffer reads 0xFF bytes (an int64
// index of -1, which ATen rejects as out of range) instead of undefined heap contents. The
// seeded gather bug (index_ops.cpp) relies on this for a deterministic error.
constexpr size_t kAlign = 64;
constexpr size_t kRedzone = 64 * 1024;

void host_free(void* p) {
  std::free(p);
}

struct HostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* p = nullptr;
    if (nbytes > 0) {
      const size_t total = (nbytes + kRedzone + kAlign - 1) / kAlign * kAlign;
      p = std::aligned_alloc(kAlign, total);
      TORCH_CHECK(p != nullptr, "swdev: out of host memory allocating ", nbytes, " bytes");
      std::memset(static_cast<char*>(p) + nbytes, 0xFF, total - nbytes);
    }
    return {p, p, &host_free, device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &host_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

HostAllocator g_allocator;

// One device (index 0), one stream (the default one), no events: host memory needs no
// synchronisation, so event and stream calls are no-ops.
struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  static void check(c10::Device d) {
    TORCH_CHECK(d.type() == kType, "swdev: expected a PrivateUse1 device, got ", d);
    TORCH_CHECK(!d.has_index() || d.index() == 0, "swdev has one device (index 0), got ", d);
  }
  static c10::Stream stream() { return c10::Stream(c10::Stream::DEFAULT, device()); }

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check(d);
    return device();
  }
  c10::Device getDevice() const override { return device(); }
  void setDevice(c10::Device d) const override { check(d); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const override { return stream(); }
  c10::Stream getDefaultStream(c10::Device) const override { return stream(); }
  c10::Stream getNewStream(c10::Device, int) const override { return stream(); }
  c10::Stream getStreamFromGlobalPool(c10::Device, bool) const override { return stream(); }
  c10::Stream exchangeStream(c10::Stream) const override { return stream(); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  void record(void**, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex) const override {}
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::Device getDeviceFromPtr(void*) const override { return device(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    // Host memory: the CPU resize (allocate through the storage's allocator, copy, swap)
    // applies as it is.
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};

bool register_hooks() {
  static Hooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}

const bool g_hooks_registered = register_hooks();

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator)
C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

at::Tensor host_at(const at::Tensor& t, void* base, at::IntArrayRef sizes,
                   at::IntArrayRef strides) {
  auto opts = c10::TensorOptions().dtype(t.scalar_type()).device(c10::kCPU);
  return at::from_blob(base, sizes, strides, opts);
}

at::Tensor host(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kType) return t;
  char* base = static_cast<char*>(t.storage().mutable_data());
  if (base != nullptr) base += t.storage_offset() * static_cast<int64_t>(t.itemsize());
  return host_at(t, base, t.sizes(), t.strides());
}

at::Tensor to_device(const at::Tensor& cpu) {
  at::Tensor out = at::empty(cpu.sizes(), options(cpu.scalar_type()));
  host(out).copy_(cpu);
  return out;
}

bool bug_enabled(const char* name) {
  static const char* const kBugs[] = {"gather_index_contiguous", "scatter_add_offset"};
  const char* env = std::getenv("SW_TESTDEV_BUGS");
  if (env == nullptr) return true;
  const std::string value(env);
  if (value == "all") return true;
  if (value == "none") return false;
  bool found = false;
  std::stringstream list(value);
  std::string item;
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    bool known = false;
    for (const char* bug : kBugs) known = known || item == bug;
    TORCH_CHECK(known, "swdev: SW_TESTDEV_BUGS names an unknown bug '", item,
                "' (known: gather_index_contiguous, scatter_add_offset; or all, none)");
    found = found || item == name;
  }
  return found;
}

}  // namespace swdev
