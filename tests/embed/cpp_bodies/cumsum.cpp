// The body of test_cpp_kernels.py's `cumsum` (@kernel(cpp_body_path=...)): each row's running
// sum, with std::partial_sum from <numeric> (the kernel's cpp_includes).
for (int64_t r = 0; r < x.rows; r++) {
    const float *in = x.data + r * x.stride;
    std::partial_sum(in, in + x.cols, y.data + r * y.stride);
}
