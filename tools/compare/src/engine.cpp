#include "engine.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <thread>

#include "errors.h"

namespace swc {
namespace {

struct Task {
  size_t job;
  uint64_t begin, count;
};

void byteswap(void* data, uint64_t n, size_t esize) {
  auto* p = static_cast<unsigned char*>(data);
  for (uint64_t i = 0; i < n; ++i, p += esize) std::reverse(p, p + esize);
}

// A read-only mapping, used only to gather a Fortran-ordered tensor in C order when the other
// side is C-ordered (the one path whose memory is not bounded by the chunk size: the kernel keeps
// touched pages of the file cache mapped).
class Mapping {
 public:
  explicit Mapping(const FileReader& r) : len_(r.size()) {
    if (len_ == 0) return;
    const int fd = ::open(r.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      throw Error(r.path(), "cannot open for mapping: " + std::string(std::strerror(errno)));
    p_ = ::mmap(nullptr, len_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p_ == MAP_FAILED) {
      p_ = nullptr;
      throw Error(r.path(), "mmap failed: " + std::string(std::strerror(errno)));
    }
  }
  ~Mapping() {
    if (p_) ::munmap(p_, len_);
  }
  const unsigned char* data() const { return static_cast<const unsigned char*>(p_); }

 private:
  void* p_ = nullptr;
  uint64_t len_;
};

struct Side {
  std::shared_ptr<FileReader> reader;
  std::shared_ptr<Mapping> map;  // set when this side must be gathered from Fortran order
};

void read_side(const TensorRef& t, const Side& s, uint64_t begin, uint64_t count, void* dst) {
  const size_t es = dtype_size(*t.dtype);
  if (!s.map) {
    s.reader->read_at(t.offset + begin * es, dst, count * es);
  } else {
    // C-order index -> Fortran-order element offset, advanced incrementally.
    const size_t nd = t.shape.size();
    std::vector<uint64_t> idx(nd), fs(nd);
    uint64_t stride = 1, rem = begin, off = 0;
    for (size_t k = 0; k < nd; ++k) {
      fs[k] = stride;
      stride *= t.shape[k];
    }
    for (size_t k = nd; k-- > 0;) {
      idx[k] = rem % t.shape[k];
      rem /= t.shape[k];
      off += idx[k] * fs[k];
    }
    const unsigned char* base = s.map->data() + t.offset;
    auto* out = static_cast<unsigned char*>(dst);
    for (uint64_t i = 0; i < count; ++i) {
      std::memcpy(out + i * es, base + off * es, es);
      size_t k = nd - 1;
      ++idx[k];
      off += fs[k];
      while (idx[k] == t.shape[k] && k > 0) {
        off -= fs[k] * t.shape[k];
        idx[k] = 0;
        --k;
        ++idx[k];
        off += fs[k];
      }
    }
  }
  if (t.big_endian && es > 1) byteswap(dst, count, es);
}

}  // namespace

EngineStats run_jobs(std::vector<Job>& jobs, FileCache& files, const EngineOptions& opt) {
  EngineStats st;
  const auto t0 = std::chrono::steady_clock::now();
  unsigned threads = opt.threads ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  st.threads = threads;
  const uint64_t chunk_bytes = std::max<uint64_t>(opt.chunk_bytes, 64);

  // Open files up front; a failure marks the job, not the run.
  std::vector<Side> sa(jobs.size()), sb(jobs.size());
  std::vector<uint64_t> chunk_elems(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    Job& job = jobs[j];
    const size_t ea = dtype_size(*job.a.dtype), eb = dtype_size(*job.b.dtype);
    chunk_elems[j] = std::max<uint64_t>(1, chunk_bytes / std::max(ea, eb));
    try {
      sa[j].reader = files.get(job.a.path);
      sb[j].reader = files.get(job.b.path);
      const bool nd_gt1 = job.a.shape.size() > 1;
      if (nd_gt1 && job.a.fortran_order != job.b.fortran_order) {
        Side& f = job.a.fortran_order ? sa[j] : sb[j];
        f.map = std::make_shared<Mapping>(*f.reader);
      }
    } catch (const Error& e) {
      job.error = e.what();
    }
  }

  size_t next_job = 0;
  uint64_t next_pos = 0;
  std::vector<Task> window;
  std::vector<Partial> partials;
  std::vector<std::string> errors;
  const size_t wmax = std::max<uint64_t>(1, opt.window_tasks);
  while (true) {
    window.clear();
    while (window.size() < wmax && next_job < jobs.size()) {
      Job& job = jobs[next_job];
      const uint64_t n = job.a.numel();
      if (!job.error.empty() || next_pos >= n) {
        ++next_job;
        next_pos = 0;
        continue;
      }
      const uint64_t c = std::min(chunk_elems[next_job], n - next_pos);
      window.push_back({next_job, next_pos, c});
      next_pos += c;
    }
    if (window.empty()) break;
    partials.assign(window.size(), Partial{});
    errors.assign(window.size(), std::string());
    std::atomic<size_t> next{0};
    auto worker = [&]() {
      std::vector<uint64_t> bufa((chunk_bytes + 7) / 8 + 1), bufb((chunk_bytes + 7) / 8 + 1);
      std::vector<double> da, db;
      for (size_t k; (k = next.fetch_add(1)) < window.size();) {
        const Task& t = window[k];
        Job& job = jobs[t.job];
        try {
          read_side(job.a, sa[t.job], t.begin, t.count, bufa.data());
          read_side(job.b, sb[t.job], t.begin, t.count, bufb.data());
          if (*job.a.dtype != *job.b.dtype && da.size() < t.count) {
            da.resize(t.count);
            db.resize(t.count);
          }
          accumulate(*job.a.dtype, bufa.data(), *job.b.dtype, bufb.data(), t.count, t.begin,
                     job.tol, &partials[k], da.data(), db.data());
        } catch (const Error& e) {
          errors[k] = e.what();
        } catch (const std::exception& e) {
          errors[k] = job.a.path + " / " + job.b.path + ": " + e.what();
        }
      }
    };
    const unsigned nthreads = static_cast<unsigned>(std::min<size_t>(threads, window.size()));
    std::vector<std::thread> pool;
    for (unsigned i = 1; i < nthreads; ++i) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
    for (size_t k = 0; k < window.size(); ++k) {
      Job& job = jobs[window[k].job];
      if (!errors[k].empty()) {
        if (job.error.empty()) job.error = errors[k];
        continue;
      }
      if (!job.error.empty()) continue;
      job.total.merge(partials[k]);
      st.bytes_a += window[k].count * dtype_size(*job.a.dtype);
      st.bytes_b += window[k].count * dtype_size(*job.b.dtype);
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

uint64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

}  // namespace swc
