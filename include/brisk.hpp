// brisk.hpp: C++17 adapters over the C API in brisk.h.
//
// Header-only; link the brisk library (libbrisk, libbrisk.a or brisk_core).
// These adapters route memory to brisk without replacing global malloc or
// operator new, so they also work in programs whose global allocator is
// someone else's (glibc, a sanitizer). To send every `new` to brisk instead,
// see brisk-new-delete.hpp.
//
//   brisk::allocator<T>        standard Allocator on brisk_malloc
//   brisk::heap                owner of an explicit heap (brisk_heap_*)
//   brisk::heap_allocator<T>   standard Allocator on one heap
//   brisk::memory_resource     std::pmr resource: global_resource(), heap_resource
//   brisk::object_pool<T>      typed fixed-size pool (brisk_pool_*)
//
// Failures throw std::bad_alloc (std::bad_array_new_length when a count
// overflows), as std::allocator does; built without exceptions they abort.
#ifndef BRISK_HPP
#define BRISK_HPP

#include <cstddef>
#include <cstdlib>
#include <limits>
#include <memory>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>

#include "brisk.h"

namespace brisk {

namespace detail {

// brisk_malloc aligns blocks of 16 bytes or more to 16, and smaller ones as
// malloc must (enough for any object of their size). Other requests, such
// as over-aligned types or a pmr request for more alignment than bytes,
// take the aligned entry points.
inline constexpr std::size_t malloc_alignment = 16;

constexpr bool malloc_aligns(std::size_t bytes, std::size_t alignment) noexcept {
  return alignment <= 1 ||
      (alignment <= malloc_alignment && (bytes >= malloc_alignment || bytes % alignment == 0));
}

[[noreturn]] inline void throw_bad_alloc() {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}

[[noreturn]] inline void throw_bad_array_new_length() {
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  throw std::bad_array_new_length();
#else
  std::abort();
#endif
}

// n * sizeof(T), refusing counts whose byte size would wrap around.
template <class T>
std::size_t array_bytes(std::size_t n) {
  if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw_bad_array_new_length();
  return n * sizeof(T);
}

// The size is only a hint to brisk; an over-aligned block is released
// unsized so the hint never has to describe alignment padding.
inline void release(void *p, std::size_t bytes, std::size_t alignment) noexcept {
  if (malloc_aligns(bytes, alignment)) brisk_free_sized(p, bytes);
  else brisk_free(p);
}

}  // namespace detail

// ---- brisk::allocator ------------------------------------------------------

/// A stateless standard Allocator on brisk's global allocator: a container
/// uses brisk even where malloc is glibc's. All instances are equal, so
/// containers move and swap buffers freely, as with std::allocator.
template <class T>
class allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::true_type;

  constexpr allocator() noexcept = default;
  template <class U>
  constexpr allocator(const allocator<U> &) noexcept {}  // rebinding

  [[nodiscard]] T *allocate(std::size_t n) {
    const std::size_t bytes = detail::array_bytes<T>(n);
    void *p = detail::malloc_aligns(bytes, alignof(T)) ? brisk_malloc(bytes)
                                                       : brisk_aligned_alloc(alignof(T), bytes);
    if (!p) detail::throw_bad_alloc();
    return static_cast<T *>(p);
  }

  void deallocate(T *p, std::size_t n) noexcept { detail::release(p, n * sizeof(T), alignof(T)); }
};

template <class T, class U>
constexpr bool operator==(const allocator<T> &, const allocator<U> &) noexcept {
  return true;
}
template <class T, class U>
constexpr bool operator!=(const allocator<T> &, const allocator<U> &) noexcept {
  return false;
}

// ---- brisk::heap -----------------------------------------------------------

/// Owns an explicit heap, so an arena cannot leak on an exception path:
/// destruction releases every block still in it. The rules of brisk.h hold:
/// only the creating thread allocates from the heap (another thread may
/// reset or destroy it while none allocates), and no block (or container)
/// from it may be used after reset() or the heap's destruction. A
/// moved-from heap owns nothing.
class heap {
 public:
  heap() : h_(brisk_heap_new()) {
    if (!h_) detail::throw_bad_alloc();
  }
  /// A heap bounded to max_bytes (see set_max_bytes).
  explicit heap(std::size_t max_bytes) : heap() { set_max_bytes(max_bytes); }
  ~heap() {
    if (h_) brisk_heap_destroy(h_);
  }

  heap(const heap &) = delete;
  heap &operator=(const heap &) = delete;
  heap(heap &&other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  heap &operator=(heap &&other) noexcept {
    if (this != &other) {
      if (h_) brisk_heap_destroy(h_);
      h_ = std::exchange(other.h_, nullptr);
    }
    return *this;
  }

  /// Drops every block at once and keeps the heap for reuse.
  void reset() noexcept {
    if (h_) brisk_heap_reset(h_);
  }
  /// Past the bound, allocations fail (the adapters below then throw
  /// std::bad_alloc). 0 = unbounded.
  void set_max_bytes(std::size_t max_bytes) noexcept {
    if (h_) brisk_heap_set_max_bytes(h_, max_bytes);
  }
  std::size_t held_bytes() const noexcept { return h_ ? brisk_heap_held_bytes(h_) : 0; }
  brisk_heap_t *get() const noexcept { return h_; }

 private:
  brisk_heap_t *h_;
};

// ---- brisk::heap_allocator -------------------------------------------------

/// A standard Allocator that allocates from one heap; its blocks go back
/// with brisk_free like any brisk block. A container using it allocates only
/// on the heap's thread, but may be destroyed on any thread. As with
/// std::pmr, a container keeps the heap it was built on: copy and move
/// assignment and swap do not carry allocators across (swapping containers
/// on different heaps is undefined), so a container never ends up on a heap
/// that dies before it does.
template <class T>
class heap_allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::false_type;
  using propagate_on_container_swap = std::false_type;
  using is_always_equal = std::false_type;

  explicit heap_allocator(brisk_heap_t *h) noexcept : h_(h) {}
  heap_allocator(heap &h) noexcept : h_(h.get()) {}  // implicit, as pmr's from a resource
  template <class U>
  heap_allocator(const heap_allocator<U> &other) noexcept : h_(other.get()) {}  // rebinding

  [[nodiscard]] T *allocate(std::size_t n) {
    const std::size_t bytes = detail::array_bytes<T>(n);
    void *p = detail::malloc_aligns(bytes, alignof(T)) ? brisk_heap_malloc(h_, bytes)
                                                       : brisk_heap_aligned_alloc(h_, alignof(T), bytes);
    if (!p) detail::throw_bad_alloc();
    return static_cast<T *>(p);
  }

  void deallocate(T *p, std::size_t n) noexcept { detail::release(p, n * sizeof(T), alignof(T)); }

  brisk_heap_t *get() const noexcept { return h_; }

 private:
  brisk_heap_t *h_;
};

template <class T, class U>
bool operator==(const heap_allocator<T> &a, const heap_allocator<U> &b) noexcept {
  return a.get() == b.get();
}
template <class T, class U>
bool operator!=(const heap_allocator<T> &a, const heap_allocator<U> &b) noexcept {
  return a.get() != b.get();
}

// ---- std::pmr resources ----------------------------------------------------

/// A std::pmr::memory_resource on brisk. Default-constructed it uses the
/// global allocator (global_resource() is a ready-made instance); a
/// heap_resource uses one heap. Two brisk resources compare equal when they
/// use the same heap (or both the global allocator), which lets pmr
/// containers hand buffers to each other without copying, but never across
/// heaps with different lifetimes.
class memory_resource : public std::pmr::memory_resource {
 public:
  memory_resource() noexcept = default;
  /// The heap allocated from; nullptr for the global allocator.
  brisk_heap_t *heap_handle() const noexcept { return h_; }

 protected:
  explicit memory_resource(brisk_heap_t *h) noexcept : h_(h) {}

  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    const bool plain = detail::malloc_aligns(bytes, alignment);
    void *p;
    if (h_) p = plain ? brisk_heap_malloc(h_, bytes) : brisk_heap_aligned_alloc(h_, alignment, bytes);
    else p = plain ? brisk_malloc(bytes) : brisk_aligned_alloc(alignment, bytes);
    if (!p) detail::throw_bad_alloc();
    return p;
  }

  void do_deallocate(void *p, std::size_t bytes, std::size_t alignment) override {
    detail::release(p, bytes, alignment);
  }

  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    if (this == &other) return true;
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
    const auto *b = dynamic_cast<const memory_resource *>(&other);
    return b && b->h_ == h_;
#else
    return false;
#endif
  }

 private:
  brisk_heap_t *h_ = nullptr;
};

/// A pmr resource on one heap. It does not own the heap: the heap must
/// outlive every container that uses the resource.
class heap_resource : public memory_resource {
 public:
  explicit heap_resource(brisk_heap_t *h) noexcept : memory_resource(h) {}
  explicit heap_resource(brisk::heap &h) noexcept : memory_resource(h.get()) {}
};

/// The process-wide resource on brisk's global allocator. It is never
/// destroyed, so static objects may use it until the very end of the
/// program (as with std::pmr::new_delete_resource()).
inline memory_resource *global_resource() noexcept {
  alignas(memory_resource) static unsigned char storage[sizeof(memory_resource)];
  static memory_resource *const r = ::new (static_cast<void *>(storage)) memory_resource();
  return r;
}

// ---- brisk::object_pool ----------------------------------------------------

/// A typed pool: brisk_pool_* plus construction and destruction of T.
/// Objects may be created and destroyed from any thread. Destroying the
/// pool frees its memory but runs no destructors, so destroy (or reset the
/// unique_ptrs of) every live object first. A moved-from pool may only be
/// destroyed or assigned to.
template <class T>
class object_pool {
  static_assert(std::is_object_v<T> && !std::is_array_v<T> && !std::is_const_v<T>,
                "object_pool<T>: T must be a non-const, non-array object type");

 public:
  /// Returns an object to the pool it came from; carries the pool, so a
  /// unique_ptr needs nothing else.
  struct deleter {
    brisk_pool_t *pool = nullptr;
    void operator()(T *p) const noexcept {
      if (!p) return;
      p->~T();
      brisk_pool_free(pool, p);
    }
  };
  using unique_ptr = std::unique_ptr<T, deleter>;

  /// max_objects > 0 bounds the live objects; create() then throws
  /// std::bad_alloc until some are destroyed.
  explicit object_pool(std::size_t max_objects = 0) : pool_(brisk_pool_new(sizeof(T), alignof(T), max_objects)) {
    if (!pool_) detail::throw_bad_alloc();
  }
  ~object_pool() {
    if (pool_) brisk_pool_destroy(pool_);
  }

  object_pool(const object_pool &) = delete;
  object_pool &operator=(const object_pool &) = delete;
  // Moving keeps objects and unique_ptrs valid: they name the C pool.
  object_pool(object_pool &&other) noexcept : pool_(std::exchange(other.pool_, nullptr)) {}
  object_pool &operator=(object_pool &&other) noexcept {
    if (this != &other) {
      if (pool_) brisk_pool_destroy(pool_);
      pool_ = std::exchange(other.pool_, nullptr);
    }
    return *this;
  }

  /// Constructs a T from args (braces for aggregates). The slot goes back
  /// to the pool if the constructor throws.
  template <class... Args>
  [[nodiscard]] T *create(Args &&...args) {
    void *slot = brisk_pool_alloc(pool_);
    if (!slot) detail::throw_bad_alloc();
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
    try {
      return construct(slot, std::forward<Args>(args)...);
    } catch (...) {
      brisk_pool_free(pool_, slot);
      throw;
    }
#else
    return construct(slot, std::forward<Args>(args)...);
#endif
  }

  /// Runs ~T and returns the slot. p must come from this pool; nullptr is
  /// ignored.
  void destroy(T *p) noexcept { deleter{pool_}(p); }

  template <class... Args>
  [[nodiscard]] unique_ptr make_unique(Args &&...args) {
    return unique_ptr(create(std::forward<Args>(args)...), deleter{pool_});
  }

  brisk_pool_stats_t stats() const noexcept {
    brisk_pool_stats_t s{};
    if (pool_) brisk_pool_stats(pool_, &s);
    return s;
  }
  brisk_pool_t *get() const noexcept { return pool_; }

 private:
  template <class... Args>
  static T *construct(void *slot, Args &&...args) {
    if constexpr (std::is_constructible_v<T, Args...>) return ::new (slot) T(std::forward<Args>(args)...);
    else return ::new (slot) T{std::forward<Args>(args)...};
  }

  brisk_pool_t *pool_;
};

}  // namespace brisk

#endif  // BRISK_HPP
