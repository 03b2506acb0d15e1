// simt.h: run GPU-style C++ on the CPU. A block is N lanes, each lane a fiber with its own stack,
// all on one OS thread; blocks of a grid run one after another. Lanes run until they reach a
// synchronisation point (block barrier or wave collective); between those points they run in an
// order drawn from the launch seed, new for every round, so a missing barrier shows as a wrong
// result instead of passing by luck. Vendor shims (cuda_emu.h, hip_emu.h, metal_emu.h) map threadIdx,
// __syncthreads, __shfl, MFMA, simdgroup_matrix ... onto the primitives below.
//
// API for shims and hand-written kernels (namespace emu):
//   dim3 thread_idx(), block_idx(), block_dim(), grid_dim();  unsigned thread_linear();
//   unsigned lane_id(), wave_id(), wave_size();              // wave = W consecutive linear ids
//   void barrier();                                          // whole block, really waits
//   void wave_barrier();                                     // the calling lane's wave
//   const T* wave_exchange(const T& mine);                   // every live lane of the wave deposits,
//       // all wait, the result points at W values indexed by lane_id (0 for lanes that exited);
//       // valid until the caller's next wave collective. T trivially copyable, <= 64 bytes.
//   void mma_atom(const AtomTable&, const float* a, const float* b, const float* c, float* d);
//       // wave-wide D = A*B + C; each lane passes its own registers laid out as the table says;
//       // A and B must hold values of the atom's input types (bf16 and f16 are checked)
//   unsigned char* shared_mem(); size_t shared_bytes();      // the block's dynamic shared arena,
//       // filled with 0xFF bytes (NaN for floats) before every block
//   unsigned char* (*shared_arena)(size_t bytes);            // set by a shim whose kernels name their
//       // shared memory (CUDA's `extern __shared__` array): the arena is then that array
//   T atomic_add(T* addr, T v);                              // returns the old value
//   [[noreturn]] void fail(const char* fmt, ...);           // abort the launch, printf-style message
// Entry (the runner generates the call): int emu::launch(const Launch&, F body, char* err, size_t n).
#pragma once

// Only light headers: every emulated kernel parses this file, and <string>, <vector> or <mutex>
// would cost more compile time than the kernel itself.
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#if !(defined(__x86_64__) && defined(__linux__)) || defined(EMU_UCONTEXT)
#define EMU_USE_UCONTEXT 1
#include <ucontext.h>
#endif

namespace emu {

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// One matrix-instruction atom, generated from tiles/targets.py (atoms_gen.h). a/b/c are
// [lanes][regs][2] (row, col) maps: register r of lane l holds element (row, col).
struct AtomTable {
    const char* name;
    int m, n, k, lanes, regs_a, regs_b, regs_c;
    const uint16_t* a;
    const uint16_t* b;
    const uint16_t* c;
    const char* a_type;  // tiles dtype names of A and B ("bf16", "f16", "fp8e4m3", ...)
    const char* b_type;
};

// Mirrors tiles.emu.runner._Launch (ctypes); keep the two in step.
struct Launch {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t wave;
    uint32_t reserved;
    uint64_t shared_bytes;
    uint64_t seed;
    uint64_t stack_bytes;
};

struct Error {
    char msg[1024];
};

// Where a block's shared memory lives: the engine allocates it, unless a shim sets this before a launch to
// return an array of its own of at least `bytes` (CUDA kernels declare theirs: `extern __shared__ ... smem_base[]`).
inline unsigned char* (*shared_arena)(size_t bytes) = nullptr;

[[noreturn]] inline __attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
    Error e;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(e.msg, sizeof e.msg, fmt, ap);
    va_end(ap);
    throw e;
}

namespace detail {

// ---- context switch -------------------------------------------------------------------------
// Hand-rolled on x86-64 Linux: ucontext's swapcontext makes a sigprocmask syscall per switch,
// which would dominate a run (a GEMM switches lanes millions of times). Saves the callee-saved
// registers plus MXCSR and the x87 control word, as the SysV ABI requires across calls.
#ifndef EMU_USE_UCONTEXT
extern "C" void tiles_emu_switch(void** save_sp, void* load_sp);
asm(R"(
    .text
    .p2align 4
    .weak tiles_emu_switch
    .hidden tiles_emu_switch
    .type tiles_emu_switch, @function
tiles_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tiles_emu_switch, .-tiles_emu_switch
)");

struct Context {
    void* sp = nullptr;
};

inline void ctx_init(Context& c, char* stack, size_t size, void (*entry)()) {
    // Frame that tiles_emu_switch pops: [mxcsr|fpcw][r15 r14 r13 r12 rbx rbp][ret -> entry][0].
    // entry then starts with rsp = 8 mod 16, as after a call.
    auto top = (reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15);
    auto** sp = reinterpret_cast<void**>(top - 72);
    auto* fp = reinterpret_cast<uint32_t*>(sp);
    fp[0] = 0x1F80;  // default MXCSR: all exceptions masked, round to nearest
    fp[1] = 0x037F;  // default x87 control word
    for (int i = 1; i <= 6; i++) sp[i] = nullptr;
    sp[7] = reinterpret_cast<void*>(entry);
    sp[8] = nullptr;
    c.sp = sp;
}

inline void ctx_switch(Context& from, Context& to) { tiles_emu_switch(&from.sp, to.sp); }
#else
struct Context {
    ucontext_t uc;
};

inline void ctx_init(Context& c, char* stack, size_t size, void (*entry)()) {
    getcontext(&c.uc);
    c.uc.uc_stack.ss_sp = stack;
    c.uc.uc_stack.ss_size = size;
    c.uc.uc_link = nullptr;
    makecontext(&c.uc, entry, 0);
}

inline void ctx_switch(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }
#endif

// ---- the block scheduler --------------------------------------------------------------------

enum class State : uint8_t { Ready, Barrier, Wave, Done };
enum class Kind : uint8_t { None, Barrier, Exchange, Mma };

struct Lane {
    Context ctx;
    unsigned id;  // linear thread id in the block
    unsigned wave;
    dim3 tid;
    State state;
};

struct MmaArgs {
    const float *a, *b, *c;
    float* d;
};

constexpr size_t kSlot = 64;  // bytes per lane for wave_exchange

struct Wave {
    unsigned first = 0, size = 0, live = 0, arrived = 0;
    Kind kind = Kind::None;
    const void* tag = nullptr;  // exchange: sizeof(T); mma: the AtomTable; checked across lanes
    const void* deposit[64];
    alignas(64) unsigned char buf[kSlot * 64];
};

inline const char* kind_name(Kind k) {
    switch (k) {
        case Kind::Barrier: return "wave_barrier()";
        case Kind::Exchange: return "wave_exchange()";
        case Kind::Mma: return "mma_atom()";
        default: return "nothing";
    }
}

struct Fmt3 {  // "(x,y,z)" for messages
    char s[40];
    explicit Fmt3(const dim3& d) { std::snprintf(s, sizeof s, "(%u,%u,%u)", d.x, d.y, d.z); }
};

inline uint64_t splitmix(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

struct Runner;
inline Runner* current = nullptr;  // the running launch; launches of one module are serialised
inline pthread_mutex_t launch_mutex = PTHREAD_MUTEX_INITIALIZER;  // <mutex> costs compile time

struct Runner {
    Launch cfg;
    void (*body)(void*);
    void* body_ctx;
    unsigned nlanes = 0, wave_w = 0;
    Lane* lanes = nullptr;
    Wave* waves = nullptr;
    unsigned nwaves = 0;
    char* stacks = nullptr;
    size_t page = 0, stack_stride = 0, stacks_bytes = 0;
    unsigned char* shared = nullptr;
    bool own_shared = false;
    Context main;
    Lane* cur = nullptr;
    dim3 block;
    unsigned live = 0, at_barrier = 0;
    unsigned* ready = nullptr;  // lanes released for the next round
    unsigned* order = nullptr;  // this round's permutation
    unsigned nready = 0;
    uint64_t rng = 0;
    char error[1200] = "";
    double* scratch = nullptr;
    size_t scratch_n = 0;

    Runner(const Launch& c, void (*fn)(void*), void* ctx) : cfg(c), body(fn), body_ctx(ctx) {}

    // Separate from the constructor so that the destructor frees whatever was allocated when a
    // later step fails.
    void init() {
        const Launch& c = cfg;
        nlanes = c.block[0] * c.block[1] * c.block[2];
        wave_w = c.wave;
        if (nlanes == 0 || nlanes > 1024) fail("block of %u lanes: need 1..1024", nlanes);
        if (wave_w == 0 || wave_w > 64) fail("wave width %u: need 1..64", wave_w);
        if (c.grid[0] == 0 || c.grid[1] == 0 || c.grid[2] == 0) fail("empty grid");
        page = size_t(sysconf(_SC_PAGESIZE));
        size_t stack = ((c.stack_bytes > 16384 ? c.stack_bytes : 16384) + page - 1) / page * page;
        stack_stride = stack + page;  // one guard page below every stack: overflow faults
        stacks_bytes = stack_stride * nlanes;
        void* mem = mmap(nullptr, stacks_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                         -1, 0);
        if (mem == MAP_FAILED) fail("cannot map %zu bytes of lane stacks", stacks_bytes);
        stacks = static_cast<char*>(mem);
        for (unsigned i = 0; i < nlanes; i++) mprotect(stacks + i * stack_stride, page, PROT_NONE);
        own_shared = !shared_arena;
        size_t sh = (c.shared_bytes + 4096) / 4096 * 4096;
        shared = own_shared ? static_cast<unsigned char*>(std::aligned_alloc(4096, sh)) : shared_arena(c.shared_bytes);
        nwaves = (nlanes + wave_w - 1) / wave_w;
        lanes = new Lane[nlanes];
        waves = new Wave[nwaves];
        ready = new unsigned[nlanes];
        order = new unsigned[nlanes];
        if (!shared) fail("cannot allocate %llu bytes of shared memory", (unsigned long long)c.shared_bytes);
        for (unsigned w = 0; w < nwaves; w++) {
            waves[w].first = w * wave_w;
            waves[w].size = nlanes - w * wave_w < wave_w ? nlanes - w * wave_w : wave_w;
            for (auto& d : waves[w].deposit) d = nullptr;
        }
        for (unsigned i = 0; i < nlanes; i++) {
            lanes[i].id = i;
            lanes[i].wave = i / wave_w;
            lanes[i].tid = {i % c.block[0], (i / c.block[0]) % c.block[1], i / (c.block[0] * c.block[1])};
        }
    }

    ~Runner() {
        if (stacks) munmap(stacks, stacks_bytes);
        if (own_shared) std::free(shared);
        delete[] lanes;
        delete[] waves;
        delete[] ready;
        delete[] order;
        delete[] scratch;
    }

    Runner(const Runner&) = delete;
    Runner& operator=(const Runner&) = delete;

    static void fiber_main() {
        Runner& R = *current;
        try {
            R.body(R.body_ctx);
        } catch (const Error& e) {
            std::snprintf(R.error, sizeof R.error, "lane %s: %s", Fmt3(R.cur->tid).s, e.msg);
        } catch (const std::exception& e) {
            std::snprintf(R.error, sizeof R.error, "lane %s: %s", Fmt3(R.cur->tid).s, e.what());
        } catch (...) {
            std::snprintf(R.error, sizeof R.error, "lane %s: unknown exception", Fmt3(R.cur->tid).s);
        }
        Lane& L = *R.cur;
        L.state = State::Done;
        R.live--;
        R.waves[L.wave].live--;
        ctx_switch(L.ctx, R.main);
        std::abort();  // a finished lane is never resumed
    }

    void run() {
        for (unsigned z = 0; z < cfg.grid[2]; z++)
            for (unsigned y = 0; y < cfg.grid[1]; y++)
                for (unsigned x = 0; x < cfg.grid[0]; x++) run_block({x, y, z});
    }

    void run_block(dim3 b) {
        block = b;
        uint64_t linear = (uint64_t(b.z) * cfg.grid[1] + b.y) * cfg.grid[0] + b.x;
        rng = cfg.seed * 0x2545F4914F6CDD1Dull + linear;
        std::memset(shared, 0xFF, cfg.shared_bytes);
        for (unsigned w = 0; w < nwaves; w++) {
            waves[w].live = waves[w].size;
            waves[w].arrived = 0;
            waves[w].kind = Kind::None;
        }
        nready = 0;
        for (unsigned i = 0; i < nlanes; i++) {
            ctx_init(lanes[i].ctx, stacks + i * stack_stride + page, stack_stride - page, fiber_main);
            lanes[i].state = State::Ready;
            ready[nready++] = i;
        }
        live = nlanes;
        at_barrier = 0;
        while (live > 0) {
            unsigned n = nready;
            std::memcpy(order, ready, n * sizeof(unsigned));
            nready = 0;
            for (unsigned i = n; i > 1; i--) {
                unsigned j = unsigned(splitmix(rng) % i), t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
            }
            // One wave lags this round (none in one round of three): its lanes wait for the next unless no other
            // lane can run. With the mid-round releases below, the other waves may then run far ahead of it, as a
            // descheduled warp lets them on the hardware, and read what it has not written yet.
            const unsigned lag = splitmix(rng) % 3 ? unsigned(splitmix(rng) % nwaves) : nwaves;
            bool others = false;
            for (unsigned i = 0; i < n && !others; i++) others = lanes[order[i]].wave != lag;
            for (unsigned i = 0; i < n; i++) {
                if (others && lanes[order[i]].wave == lag) {
                    ready[nready++] = order[i];
                    continue;
                }
                cur = &lanes[order[i]];
                ctx_switch(main, cur->ctx);
                if (error[0]) fail("block %s %s", Fmt3(block).s, error);
                Wave& w = waves[cur->wave];
                if (w.arrived > 0 && w.arrived == w.live) n = release_now(w, order, i, n);
            }
            cur = nullptr;
            for (unsigned w = 0; w < nwaves; w++)
                if (waves[w].arrived > 0 && waves[w].arrived == waves[w].live) complete(waves[w]);
            if (nready == 0 && live > 0) {
                if (at_barrier != live) deadlock();
                for (unsigned i = 0; i < nlanes; i++)
                    if (lanes[i].state == State::Barrier) {
                        lanes[i].state = State::Ready;
                        ready[nready++] = i;
                    }
                at_barrier = 0;
            }
        }
    }

    // A wave whose collective completes mid-round goes on in this round, each lane at a random place among
    // the lanes yet to run (order[i+1..n)), not after all of them: a lane that reads, through the collective,
    // what other waves write before their next synchronization point with no barrier between (ldmatrix after
    // another warp's plain stores) then reads stale data for most orders, as on the hardware. Returns the new n.
    unsigned release_now(Wave& w, unsigned* order, unsigned& i, unsigned n) {
        const unsigned before = nready;
        complete(w);   // appends the released lanes to ready[before..nready)
        for (unsigned k = before; k < nready; k++) {
            if (n == nlanes) {   // the run part order[0..i] is spent: reuse it (the rest are distinct ready lanes)
                std::memmove(order, order + i + 1, (n - i - 1) * sizeof(unsigned));
                n -= i + 1;
                i = unsigned(-1);   // the caller's ++i makes it 0
            }
            const unsigned j = i + 1 + unsigned(splitmix(rng) % (n - i));   // a place in [i+1, n]
            order[n] = order[j];
            order[j] = ready[k];
            n++;
        }
        nready = before;
        return n;
    }

    void complete(Wave& w) {
        if (w.kind == Kind::Exchange) {
            size_t n = reinterpret_cast<uintptr_t>(w.tag);
            for (unsigned i = 0; i < w.size; i++) {
                if (w.deposit[i])
                    std::memcpy(w.buf + i * n, w.deposit[i], n);
                else
                    std::memset(w.buf + i * n, 0, n);
            }
        } else if (w.kind == Kind::Mma) {
            if (w.live != w.size) fail("block %s: mma_atom with lanes of the wave exited", Fmt3(block).s);
            mma(*static_cast<const AtomTable*>(w.tag), w);
        }
        for (unsigned i = 0; i < w.size; i++) {
            w.deposit[i] = nullptr;
            Lane& L = lanes[w.first + i];
            if (L.state == State::Wave) {
                L.state = State::Ready;
                ready[nready++] = L.id;
            }
        }
        w.arrived = 0;
        w.kind = Kind::None;
    }

    // A register that does not hold a value of the atom's input type means the shim skipped a
    // conversion the hardware does; the emulated result would then be more precise than the GPU's.
    static bool representable(float v, const char* type) {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if (!std::strcmp(type, "bf16")) return (bits & 0xFFFF) == 0 || v != v;
#ifdef __FLT16_MAX__
        if (!std::strcmp(type, "f16")) return float(_Float16(v)) == v || v != v;
#endif
        return true;  // fp8: the encoding (OCP or CDNA3's FNUZ) is the shim's to decode
    }

    static void check_inputs(const AtomTable& t, const char* which, const float* r, int n, int lane,
                             const char* type) {
        for (int i = 0; i < n; i++)
            if (!representable(r[i], type))
                fail("mma_atom %s: register %d of %s in lane %d holds %.9g, not a %s value", t.name, i, which, lane,
                     double(r[i]), type);
    }

    void mma(const AtomTable& t, const Wave& w) {
        // Products of bf16/f16/fp8 values are exact in double; the sum is rounded to f32 once,
        // which is the reference interpreter's definition of an MMA.
        size_t need = size_t(t.m) * t.k + size_t(t.k) * t.n + size_t(t.m) * t.n;
        if (scratch_n < need) {
            delete[] scratch;
            scratch = new double[need];
            scratch_n = need;
        }
        std::memset(scratch, 0, need * sizeof(double));
        double* A = scratch;
        double* B = A + t.m * t.k;
        double* C = B + t.k * t.n;
        for (int l = 0; l < t.lanes; l++) {
            auto* p = static_cast<const MmaArgs*>(w.deposit[l]);
            check_inputs(t, "A", p->a, t.regs_a, l, t.a_type);
            check_inputs(t, "B", p->b, t.regs_b, l, t.b_type);
            for (int r = 0; r < t.regs_a; r++) A[t.a[(l * t.regs_a + r) * 2] * t.k + t.a[(l * t.regs_a + r) * 2 + 1]] = p->a[r];
            for (int r = 0; r < t.regs_b; r++) B[t.b[(l * t.regs_b + r) * 2] * t.n + t.b[(l * t.regs_b + r) * 2 + 1]] = p->b[r];
            for (int r = 0; r < t.regs_c; r++) C[t.c[(l * t.regs_c + r) * 2] * t.n + t.c[(l * t.regs_c + r) * 2 + 1]] = p->c[r];
        }
        for (int i = 0; i < t.m; i++)
            for (int kk = 0; kk < t.k; kk++) {
                double a = A[i * t.k + kk];
                for (int j = 0; j < t.n; j++) C[i * t.n + j] += a * B[kk * t.n + j];
            }
        for (int l = 0; l < t.lanes; l++) {
            auto* p = static_cast<const MmaArgs*>(w.deposit[l]);
            for (int r = 0; r < t.regs_c; r++)
                p->d[r] = float(C[t.c[(l * t.regs_c + r) * 2] * t.n + t.c[(l * t.regs_c + r) * 2 + 1]]);
        }
    }

    [[noreturn]] void deadlock() const {
        char s[sizeof(Error::msg)];
        int n = std::snprintf(s, sizeof s, "deadlock in block %s: %u of %u live lanes wait at barrier()",
                              Fmt3(block).s, at_barrier, live);
        for (unsigned i = 0; i < nwaves && n < int(sizeof s); i++)
            if (waves[i].arrived)
                n += std::snprintf(s + n, sizeof s - n, "; wave %u has %u of %u live lanes at %s", i,
                                   waves[i].arrived, waves[i].live, kind_name(waves[i].kind));
        fail("%s (a barrier or collective inside divergent code?)", s);
    }

    // Called on the lane's fiber: park it until the scheduler releases it.
    void park(State s) {
        Lane& L = *cur;
        L.state = s;
        ctx_switch(L.ctx, main);
    }

    void arrive(Kind kind, const void* tag, const void* payload) {
        Lane& L = *cur;
        Wave& w = waves[L.wave];
        if (w.arrived == 0) {
            w.kind = kind;
            w.tag = tag;
        } else if (w.kind != kind || w.tag != tag) {
            fail("wave %u: lanes diverged, one at %s while others are at %s%s", L.wave, kind_name(kind),
                 kind_name(w.kind), w.kind == kind ? " with a different type or atom" : "");
        }
        w.deposit[L.id - w.first] = payload;
        w.arrived++;
        park(State::Wave);
    }
};

inline Runner& runner() {
    if (!current || !current->cur) fail("emu primitive called outside a running lane");
    return *current;
}

}  // namespace detail

// ---- the API --------------------------------------------------------------------------------

inline dim3 thread_idx() { return detail::runner().cur->tid; }
inline unsigned thread_linear() { return detail::runner().cur->id; }
inline dim3 block_idx() { return detail::runner().block; }
inline dim3 block_dim() {
    auto& c = detail::runner().cfg;
    return {c.block[0], c.block[1], c.block[2]};
}
inline dim3 grid_dim() {
    auto& c = detail::runner().cfg;
    return {c.grid[0], c.grid[1], c.grid[2]};
}
inline unsigned wave_size() { return detail::runner().wave_w; }
inline unsigned lane_id() { return detail::runner().cur->id % detail::current->wave_w; }
inline unsigned wave_id() { return detail::runner().cur->wave; }
inline unsigned char* shared_mem() { return detail::runner().shared; }
inline size_t shared_bytes() { return detail::runner().cfg.shared_bytes; }

inline void barrier() {
    auto& R = detail::runner();
    R.at_barrier++;
    R.park(detail::State::Barrier);
}

inline void wave_barrier() { detail::runner().arrive(detail::Kind::Barrier, nullptr, nullptr); }

template <class T>
const T* wave_exchange(const T& mine) {
    static_assert(std::is_trivially_copyable<T>::value, "wave_exchange needs a trivially copyable type");
    static_assert(sizeof(T) <= detail::kSlot, "wave_exchange moves at most 64 bytes per lane");
    auto& R = detail::runner();
    R.arrive(detail::Kind::Exchange, reinterpret_cast<const void*>(uintptr_t(sizeof(T))), &mine);
    return reinterpret_cast<const T*>(R.waves[R.cur->wave].buf);
}

inline void mma_atom(const AtomTable& t, const float* a, const float* b, const float* c, float* d) {
    auto& R = detail::runner();
    auto& w = R.waves[R.cur->wave];
    if (unsigned(t.lanes) != w.size)
        fail("mma_atom %s takes %d lanes, the wave has %u", t.name, t.lanes, w.size);
    detail::MmaArgs args{a, b, c, d};  // lives on this lane's stack until the wave completes
    R.arrive(detail::Kind::Mma, &t, &args);
}

// One function for every atomic add, so that a multi-threaded runner has one place to make atomic.
template <class T>
T atomic_add(T* addr, T v) {
    T old = *addr;
    *addr = old + v;
    return old;
}

template <class F>
int launch(const Launch& cfg, F& body, char* err, size_t errlen) {
    struct Lock {
        Lock() { pthread_mutex_lock(&detail::launch_mutex); }
        ~Lock() { pthread_mutex_unlock(&detail::launch_mutex); }
    } lock;
    try {
        detail::Runner R(cfg, [](void* p) { (*static_cast<F*>(p))(); }, &body);
        R.init();
        detail::current = &R;
        R.run();
        detail::current = nullptr;
        std::fflush(nullptr);  // kernel printf output must not die in a forked child's buffers
        return 0;
    } catch (const Error& e) {
        detail::current = nullptr;
        std::fflush(nullptr);
        std::snprintf(err, errlen, "%s", e.msg);
        return 1;
    } catch (const std::exception& e) {  // std::bad_alloc from new[]
        detail::current = nullptr;
        std::snprintf(err, errlen, "%s", e.what());
        return 1;
    }
}

}  // namespace emu
