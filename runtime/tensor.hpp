#pragma once
// Tensors the caller owns, seen through strided views. Row-major: sizes[0] is the outermost dim;
// strides count elements. A kernel reads and writes the caller's memory through these.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>
#include "errors.hpp"
#include "half_floats.hpp"

namespace attn {

enum class dtype { f32, i32, bf16, f16 };

inline const char* dtype_name(dtype t) {
  constexpr const char* names[] = {"float32", "int32", "bfloat16", "float16"};
  return names[static_cast<int>(t)];
}
inline constexpr std::int64_t dtype_bytes(dtype t) { return t == dtype::bf16 || t == dtype::f16 ? 2 : 4; }

namespace detail {
// a * b, or shape_error when the product of sizes does not fit int64 (it would wrap silently).
inline std::int64_t checked_size_product(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw shape_error(std::string(what) + ": the product of the sizes overflows 64 bits (" + std::to_string(a) + " * " +
                      std::to_string(b) + ")");
  return r;
}
}  // namespace detail

template <class T>
constexpr dtype dtype_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>,
                "attn tensors hold float, int32_t, bfloat16 or float16");
  return std::is_same_v<T, float> ? dtype::f32 : std::is_same_v<T, std::int32_t> ? dtype::i32 : std::is_same_v<T, bfloat16> ? dtype::bf16 : dtype::f16;
}

struct tensor_view {
  static constexpr int max_rank = 5;
  void* data = nullptr;
  dtype type = dtype::f32;
  int rank = 0;
  std::array<std::int64_t, max_rank> sizes{}, strides{};

  std::int64_t size(int i) const { return sizes[static_cast<std::size_t>(i)]; }
  std::int64_t stride(int i) const { return strides[static_cast<std::size_t>(i)]; }
  std::int64_t elements() const {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n = detail::checked_size_product(n, size(i), "tensor_view");
    return n;
  }
  // Innermost stride 1 and each outer stride the product of the inner sizes.
  bool dense() const {
    std::int64_t s = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if (size(i) > 1 && stride(i) != s) return false;
      s *= size(i);
    }
    return true;
  }
};

// A view of caller memory: dense row-major, or with explicit strides (in elements).
template <class T>
tensor_view view(T* data, std::initializer_list<std::int64_t> sizes, std::initializer_list<std::int64_t> strides = {}) {
  tensor_view v;
  v.data = const_cast<std::remove_const_t<T>*>(data);
  v.type = dtype_of<std::remove_const_t<T>>();
  if (sizes.size() > static_cast<std::size_t>(tensor_view::max_rank)) throw shape_error("view: rank above 5");
  if (strides.size() != 0 && strides.size() != sizes.size()) throw shape_error("view: sizes and strides differ in rank");
  v.rank = static_cast<int>(sizes.size());
  std::copy(sizes.begin(), sizes.end(), v.sizes.begin());
  if (strides.size() != 0) {
    std::copy(strides.begin(), strides.end(), v.strides.begin());
  } else {
    std::int64_t s = 1;
    for (int i = v.rank - 1; i >= 0; --i)
      v.strides[static_cast<std::size_t>(i)] = s, s = detail::checked_size_product(s, v.sizes[static_cast<std::size_t>(i)], "view");
  }
  return v;
}

// An owning dense row-major tensor.
template <class T>
class tensor {
 public:
  tensor() = default;
  explicit tensor(std::vector<std::int64_t> sizes, T fill = T{}) : sizes_(std::move(sizes)), data_(checked_elements(sizes_), fill) {}

  const std::vector<std::int64_t>& sizes() const { return sizes_; }
  std::int64_t size(int i) const { return sizes_[static_cast<std::size_t>(i)]; }
  int rank() const { return static_cast<int>(sizes_.size()); }
  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::vector<T>& values() { return data_; }
  const std::vector<T>& values() const { return data_; }

  template <class... I>
  T& operator()(I... idx) { return data_[offset({static_cast<std::int64_t>(idx)...})]; }
  template <class... I>
  const T& operator()(I... idx) const { return data_[offset({static_cast<std::int64_t>(idx)...})]; }

  tensor_view view() const {
    tensor_view v;
    v.data = const_cast<T*>(data_.data());
    v.type = dtype_of<T>();
    v.rank = rank();
    std::int64_t s = 1;
    for (int i = v.rank - 1; i >= 0; --i) {
      v.sizes[static_cast<std::size_t>(i)] = sizes_[static_cast<std::size_t>(i)];
      v.strides[static_cast<std::size_t>(i)] = s;
      s *= sizes_[static_cast<std::size_t>(i)];
    }
    return v;
  }
  operator tensor_view() const { return view(); }

 private:
  // The element count, or shape_error for a negative size or a product that overflows.
  static std::size_t checked_elements(const std::vector<std::int64_t>& sizes) {
    std::int64_t n = 1;
    for (std::int64_t s : sizes) {
      if (s < 0) throw shape_error("tensor: negative size " + std::to_string(s));
      n = detail::checked_size_product(n, s, "tensor");
    }
    return static_cast<std::size_t>(n);
  }
  std::size_t offset(std::initializer_list<std::int64_t> idx) const {
    std::int64_t o = 0;
    std::size_t d = 0;
    for (std::int64_t i : idx) o = o * sizes_[d++] + i;
    return static_cast<std::size_t>(o);
  }
  std::vector<std::int64_t> sizes_;
  std::vector<T> data_;
};

// An owned dense row-major tensor whose element type is known only at run time: a kernel's
// results where the caller does not name their types (gradients, the tuner's outputs, a saved
// forward output), copies of strided views.
class any_tensor {
 public:
  any_tensor(dtype type, std::vector<std::int64_t> sizes) : v_(make(type, std::move(sizes))) {}  // zero-filled
  // Float values stored as `type`, each rounded to nearest even.
  any_tensor(dtype type, std::vector<std::int64_t> sizes, const std::vector<float>& values) : any_tensor(type, std::move(sizes)) {
    std::visit([&](auto& t) {
      using T = std::remove_reference_t<decltype(t.values().front())>;
      for (std::size_t i = 0; i < values.size() && i < t.values().size(); ++i) t.values()[i] = T(values[i]);
    }, v_);
  }

  dtype type() const { return static_cast<dtype>(v_.index()); }
  const std::vector<std::int64_t>& sizes() const {
    return std::visit([](const auto& t) -> const std::vector<std::int64_t>& { return t.sizes(); }, v_);
  }
  tensor_view view() const {
    return std::visit([](const auto& t) { return t.view(); }, v_);
  }
  operator tensor_view() const { return view(); }

  // The tensor as its own element type T; another T is a dtype_error naming both.
  template <class T>
  const tensor<T>& as() const {
    if (const tensor<T>* t = std::get_if<tensor<T>>(&v_)) return *t;
    throw dtype_error(std::string("tensor of ") + dtype_name(type()) + " elements read as " + dtype_name(dtype_of<T>()));
  }
  template <class T>
  tensor<T>& as() {
    return const_cast<tensor<T>&>(std::as_const(*this).as<T>());
  }
  // Every element as a float (exact for the 16-bit types).
  std::vector<float> floats() const {
    return std::visit([](const auto& t) {
      std::vector<float> f;
      f.reserve(t.values().size());
      for (const auto& x : t.values()) f.push_back(static_cast<float>(x));
      return f;
    }, v_);
  }

 private:
  // Alternatives in dtype's order: type() is the index.
  using alternatives = std::variant<tensor<float>, tensor<std::int32_t>, tensor<bfloat16>, tensor<float16>>;
  static alternatives make(dtype type, std::vector<std::int64_t> sizes) {
    switch (type) {
      case dtype::i32: return tensor<std::int32_t>(std::move(sizes));
      case dtype::bf16: return tensor<bfloat16>(std::move(sizes));
      case dtype::f16: return tensor<float16>(std::move(sizes));
      case dtype::f32: break;
    }
    return tensor<float>(std::move(sizes));
  }
  alternatives v_;
};

}  // namespace attn
