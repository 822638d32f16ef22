// A small header of our own for the extern cpp tests: a namespace, a template and an inline
// function (things a C body cannot include).
#pragma once
#include <array>

namespace mathx {

template <typename T, std::size_t N>
inline T sum(const std::array<T, N> &xs) {
    T total{};
    for (const T &x : xs) total += x;
    return total;
}

inline float blend(float a, float b, float w) { return a * w + b * (1.0f - w); }

}  // namespace mathx
