! matrix_api_f: the Fortran module's parmon_matrix_record on 2-D arrays, column-major:
! a(3, 4) int32, a(i, j) = 10 i + j; r(2, 3) real64, r(i, j) = i + 0.5 j. Prints "rc A R".
program matrix_api_f
  use parmon
  implicit none
  integer(c_int32_t) :: a(3, 4), ma, mr
  real(c_double) :: r(2, 3)
  integer :: i, j
  integer(c_int) :: rca, rcr
  do j = 1, 4
    do i = 1, 3
      a(i, j) = 10 * i + j
    end do
  end do
  do j = 1, 3
    do i = 1, 2
      r(i, j) = i + 0.5d0 * j
    end do
  end do
  ma = parmon_matrix_register("fa"//c_null_char)
  mr = parmon_matrix_register("fr"//c_null_char)
  rca = parmon_matrix_record(ma, a)
  rcr = parmon_matrix_record(mr, r)
  print '(a, i0, a, i0)', 'rc ', rca, ' ', rcr
end program
