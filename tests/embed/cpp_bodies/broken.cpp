// The body of test_cpp_kernels.py's `broken` (@kernel(cpp_body_path=...)): line 4 calls a
// function no header declares, so the C++ compiler's error must be reported at line 4 of
// this file.
for (int64_t c = 0; c < x.cols; c++) y.data[c] = no_such_function(x.data[c]);
