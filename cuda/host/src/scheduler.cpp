// Fibers for CUDA threads (scheduler.h). Barriers count arrivals per block and per warp: a
// thread's n-th __syncthreads waits for every other thread's n-th (or its exit), its n-th warp
// operation for every lane's n-th. Shuffle values go through two slot arrays per warp used
// alternately, so a lane that runs ahead to the next exchange cannot overwrite a value another
// lane has yet to read (that lane must first arrive at the next exchange, after reading).
#include "kvtune/cuda_host/scheduler.h"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace kvtune::cuda_host {
namespace {

namespace bc = boost::context;

constexpr int kWarp = 32;
constexpr size_t kStackBytes = size_t{256} << 10;  // per fiber; kernel frames need a few KiB

// Fiber stacks with a guard page below each (an overflow faults instead of writing into the next
// stack), kept for reuse: a launch of many blocks allocates its stacks once.
class StackPool {
 public:
  StackPool() : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {}
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (void* base : free_) munmap(base, page_ + kStackBytes);
  }
  bc::stack_context allocate() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, page_ + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
      if (base == MAP_FAILED) throw std::bad_alloc();
      mprotect(base, page_, PROT_NONE);
    }
    bc::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + page_ + kStackBytes;  // stacks grow down
    return sc;
  }
  void deallocate(bc::stack_context& sc) noexcept { free_.push_back(static_cast<char*>(sc.sp) - kStackBytes - page_); }

 private:
  size_t page_;
  std::vector<void*> free_;
};

thread_local StackPool stack_pool;

// Boost.Context's StackAllocator concept over this OS thread's pool.
struct PooledStack {
  bc::stack_context allocate() { return stack_pool.allocate(); }
  void deallocate(bc::stack_context& sc) noexcept { stack_pool.deallocate(sc); }
};

enum class State : uint8_t { unstarted, running, at_block_barrier, at_warp_barrier, done };

struct Thread {
  ThreadContext ctx;
  int linear = 0;  // x + y * bx + z * bx * by
  int worker = -1;
  uint64_t block_syncs = 0, warp_syncs = 0;
  State state = State::unstarted;
};

struct Warp {
  int lanes = 0;        // lanes the warp has (the last one may be partial)
  unsigned full = 0;    // their mask
  uint64_t generation = 0;  // completed warp barriers
  int arrived = 0, exited = 0;
  uint64_t slots[2][kWarp] = {};
};

// A fiber that runs threads of the block, one after another, until one of them waits.
struct Worker {
  bc::fiber fiber;      // suspended worker (empty while it runs and once it is done)
  bc::fiber scheduler;  // where the worker yields to (valid while it runs)
};

struct Block {
  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<Worker> workers;
  int next_unstarted = 0;
  uint64_t generation = 0;  // completed __syncthreads
  int arrived = 0, exited = 0;
  std::string fault;
};

thread_local Block* block_now = nullptr;
thread_local Thread* thread_now = nullptr;
thread_local std::string fault_text;
thread_local cudaError_t launch_error = cudaSuccess;

[[noreturn]] void outside_kernel(const char* what) {
  std::fprintf(stderr, "kvtune cuda host mode: %s called outside a kernel launch\n", what);
  std::abort();
}

Block& block() {
  if (block_now == nullptr) outside_kernel("a device function");
  return *block_now;
}

Thread& self() {
  if (thread_now == nullptr) outside_kernel("a device function");
  return *thread_now;
}

std::string coords(const uint3& v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

std::string who(const Thread& t) { return "thread " + coords(t.ctx.thread_idx) + " of block " + coords(t.ctx.block_idx); }

// Back to the scheduler until it resumes this thread (its barrier complete).
void yield() {
  Worker& w = block().workers[static_cast<size_t>(self().worker)];
  w.scheduler = std::move(w.scheduler).resume();
}

// Records the fault and gives control back for good: the scheduler stops the block and unwinds
// every fiber.
[[noreturn]] void fault(const std::string& what) {
  Block& b = block();
  if (b.fault.empty()) b.fault = what;
  yield();
  std::abort();  // never resumed
}

void complete_block_barrier_if_all_in(Block& b) {
  if (b.arrived > 0 && b.arrived + b.exited == static_cast<int>(b.threads.size())) {
    ++b.generation;
    b.arrived = 0;
  }
}

void exit_thread(Block& b, Thread& t) {
  t.state = State::done;
  ++b.exited;
  Warp& w = b.warps[static_cast<size_t>(t.linear / kWarp)];
  ++w.exited;
  if (w.arrived > 0) {
    fault(who(t) + " exited while " + std::to_string(w.arrived) + " lanes of its warp wait at a warp operation");
  }
  complete_block_barrier_if_all_in(b);
}

// The worker's body: threads in order from the first unstarted one, each to its end; a thread
// that waits suspends the worker with it.
void run_threads(Block& b, int worker, const std::function<void()>& body) {
  while (b.next_unstarted < static_cast<int>(b.threads.size())) {
    Thread& t = b.threads[static_cast<size_t>(b.next_unstarted++)];
    t.worker = worker;
    t.state = State::running;
    thread_now = &t;
    body();
    exit_thread(b, t);
  }
}

bool ready(const Block& b, const Thread& t) {
  switch (t.state) {
    case State::at_block_barrier:
      return b.generation >= t.block_syncs;
    case State::at_warp_barrier:
      return b.warps[static_cast<size_t>(t.linear / kWarp)].generation >= t.warp_syncs;
    default:
      return false;
  }
}

std::string deadlock(const Block& b) {
  int at_block = 0, at_warp = 0;
  const Thread* first_block = nullptr;
  const Thread* first_warp = nullptr;
  for (const Thread& t : b.threads) {
    if (t.state == State::at_block_barrier) {
      ++at_block;
      if (first_block == nullptr) first_block = &t;
    } else if (t.state == State::at_warp_barrier) {
      ++at_warp;
      if (first_warp == nullptr) first_warp = &t;
    }
  }
  std::string s = "deadlock: " + std::to_string(at_block) + " threads wait at __syncthreads";
  if (first_block != nullptr) s += " (first: " + who(*first_block) + ")";
  s += ", " + std::to_string(at_warp) + " at a warp operation";
  if (first_warp != nullptr) s += " (first: " + who(*first_warp) + ")";
  return s + ", " + std::to_string(b.exited) + " exited";
}

void start_worker(Block& b, const std::function<void()>& body) {
  const int id = static_cast<int>(b.workers.size());
  b.workers.emplace_back();
  bc::fiber fresh(std::allocator_arg, PooledStack{}, [&b, id, &body](bc::fiber&& scheduler) {
    b.workers[static_cast<size_t>(id)].scheduler = std::move(scheduler);
    run_threads(b, id, body);
    return std::move(b.workers[static_cast<size_t>(id)].scheduler);
  });
  // (b.workers holds capacity for one worker per thread, so the reference the lambda takes by
  // index stays valid.)
  bc::fiber suspended = std::move(fresh).resume();
  b.workers[static_cast<size_t>(id)].fiber = std::move(suspended);
}

void resume(Block& b, Thread& t) {
  thread_now = &t;
  const auto id = static_cast<size_t>(t.worker);
  bc::fiber suspended = std::move(b.workers[id].fiber).resume();
  b.workers[id].fiber = std::move(suspended);
}

// Runs one block to its end or its first fault; returns the fault ("" when none).
std::string run_block(const dim3& grid, const dim3& block_dim, const uint3& block_idx,
                      const std::function<void()>& body) {
  Block b;
  const int n = static_cast<int>(block_dim.x * block_dim.y * block_dim.z);
  b.threads.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Thread& t = b.threads[static_cast<size_t>(i)];
    t.linear = i;
    t.ctx.thread_idx = uint3{static_cast<unsigned>(i) % block_dim.x, (static_cast<unsigned>(i) / block_dim.x) % block_dim.y,
                             static_cast<unsigned>(i) / (block_dim.x * block_dim.y)};
    t.ctx.block_idx = block_idx;
    t.ctx.block_dim = block_dim;
    t.ctx.grid_dim = grid;
  }
  b.warps.resize(static_cast<size_t>((n + kWarp - 1) / kWarp));
  for (size_t w = 0; w < b.warps.size(); ++w) {
    b.warps[w].lanes = std::min(kWarp, n - static_cast<int>(w) * kWarp);
    b.warps[w].full = b.warps[w].lanes == kWarp ? 0xffffffffu : (1u << b.warps[w].lanes) - 1u;
  }
  b.workers.reserve(static_cast<size_t>(n));
  block_now = &b;
  while (b.fault.empty() && b.exited < n) {
    bool progressed = false;
    for (int i = 0; i < n && b.fault.empty(); ++i) {
      Thread& t = b.threads[static_cast<size_t>(i)];
      if (t.state == State::unstarted) {
        start_worker(b, body);
        progressed = true;
      } else if (ready(b, t)) {
        t.state = State::running;
        resume(b, t);
        progressed = true;
      }
    }
    if (!progressed && b.fault.empty()) b.fault = deadlock(b);
  }
  std::string why = std::move(b.fault);
  b.workers.clear();  // unwinds the fibers a fault left suspended
  block_now = nullptr;
  thread_now = nullptr;
  return why;
}

bool valid_shape(const dim3& grid, const dim3& block) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64) return false;
  return grid.x >= 1 && grid.x <= 0x7fffffffu && grid.y >= 1 && grid.y <= 65535 && grid.z >= 1 && grid.z <= 65535;
}

}  // namespace

const ThreadContext& current_thread() { return self().ctx; }

int lane_id() { return self().linear % kWarp; }

void sync_block() {
  Block& b = block();
  Thread& t = self();
  ++t.block_syncs;
  ++b.arrived;
  complete_block_barrier_if_all_in(b);
  if (b.generation >= t.block_syncs) return;  // the last to arrive goes on
  t.state = State::at_block_barrier;
  yield();
}

uint64_t exchange(unsigned mask, uint64_t bits, int src) {
  Block& b = block();
  Thread& t = self();
  Warp& w = b.warps[static_cast<size_t>(t.linear / kWarp)];
  if (mask != w.full) {
    char text[96];
    std::snprintf(text, sizeof text, " uses mask 0x%08x; the host mode emulates full-warp masks only (0x%08x)", mask,
                  w.full);
    fault(who(t) + text);
  }
  if (w.exited > 0) fault(who(t) + " reached a warp operation after a lane of its warp exited");
  const int lane = t.linear % kWarp;
  const auto parity = static_cast<size_t>(t.warp_syncs & 1u);
  ++t.warp_syncs;
  w.slots[parity][lane] = bits;
  if (++w.arrived == w.lanes) {
    ++w.generation;
    w.arrived = 0;
  } else {
    t.state = State::at_warp_barrier;
    yield();
  }
  if (src < 0 || src >= w.lanes) fault(who(t) + " reads lane " + std::to_string(src) + ", which its warp lacks");
  return w.slots[parity][static_cast<size_t>(src)];
}

void sync_warp(unsigned mask) { exchange(mask, 0, lane_id()); }

cudaError_t run_grid(dim3 grid, dim3 block_dim, const std::function<void()>& thread) {
  if (block_now != nullptr) outside_kernel("a kernel launch from device code (dynamic parallelism)");
  if (!valid_shape(grid, block_dim)) {
    set_launch_error(cudaErrorInvalidConfiguration);
    return cudaErrorInvalidConfiguration;
  }
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        std::string why = run_block(grid, block_dim, uint3{x, y, z}, thread);
        if (!why.empty()) {
          fault_text = std::move(why);
          std::fprintf(stderr, "kvtune cuda host mode: kernel fault: %s\n", fault_text.c_str());
          set_launch_error(cudaErrorLaunchFailure);
          return cudaErrorLaunchFailure;
        }
      }
    }
  }
  return cudaSuccess;
}

const std::string& last_fault() { return fault_text; }

cudaError_t take_launch_error(bool clear) {
  const cudaError_t err = launch_error;
  if (clear) launch_error = cudaSuccess;
  return err;
}

void set_launch_error(cudaError_t err) {
  if (launch_error == cudaSuccess) launch_error = err;
}

}  // namespace kvtune::cuda_host
