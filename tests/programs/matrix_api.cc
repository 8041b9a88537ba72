// matrix_api: every way to record a matrix (parmon.h, parmon.hpp), with values known by
// construction, and the bad calls; prints each call's return code on one line:
//   rc d0 d1 f i32 i64 big bad_type zero_rows null too_large vector_size
// d: 3 x 5 doubles, element (r, c) = 0.5 (5 r + c) - 3, then + 100 (steps 0 and 1);
// f: 2 x 2 floats column-major, (r, c) = r - 2 c; i32: 4 x 3 int32 (std::vector, parmon::Matrix),
// (r, c) = -(3 r + c); i64: 1 x 2 int64 (the global template), {2^40, -7};
// big: 300 x 300 doubles, element i = i (22 parts of 32 KiB).
#include <parmon/parmon.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
  const parmon_id d = parmon_matrix_register("d"), f = parmon_matrix_register("f"),
                  i64 = parmon_matrix_register("i64"), big = parmon_matrix_register("big");
  static const parmon::Matrix i32("i32");
  double dv[15];
  for (int k = 0; k < 15; ++k)
    dv[k] = 0.5 * k - 3;
  const int d0 = parmon_matrix(d, PARMON_DOUBLE, 3, 5, dv);
  for (double& x : dv)
    x += 100;
  const int d1 = parmon_matrix(d, PARMON_DOUBLE, 3, 5, dv);
  const float fv[4] = {0, 1, -2, -1};  // column-major: (0,0) (1,0) (0,1) (1,1)
  const int fr = parmon_matrix_colmajor(f, PARMON_FLOAT, 2, 2, fv);
  std::vector<int32_t> iv(12);
  for (int k = 0; k < 12; ++k)
    iv[k] = -k;
  const int ir = i32.Record(iv, 4, 3);
  const int64_t lv[2] = {int64_t{1} << 40, -7};
  const int lr = parmon_matrix(i64, 1, 2, lv);
  std::vector<double> bv(300 * 300);
  for (size_t k = 0; k < bv.size(); ++k)
    bv[k] = static_cast<double>(k);
  const int br = parmon_matrix(big, PARMON_DOUBLE, 300, 300, bv.data());
  const int bad_type = parmon_matrix(d, static_cast<parmon_elem_type>(7), 3, 5, dv);
  const int zero_rows = parmon_matrix(d, PARMON_DOUBLE, 0, 5, dv);
  const int null_data = parmon_matrix(d, PARMON_DOUBLE, 3, 5, nullptr);
  const int too_large = parmon_matrix(d, PARMON_DOUBLE, 65536, 65536, dv);  // 32 GiB: not read
  const int vector_size = i32.Record(iv, 5, 3);
  printf("rc %d %d %d %d %d %d %d %d %d %d %d\n", d0, d1, fr, ir, lr, br, bad_type, zero_rows,
         null_data, too_large, vector_size);
  return 0;
}
