! selfmon_f: the Fortran interface of parmon's self-monitoring (the parmon module, docs/selfmon.md).
! Watches itself and its whole process, computes for about 300 ms, reads, and prints
!   fortran RC FLAGS ELAPSED_NS RUNNING_NS CPU_NS PROCESS_THREADS
! RC is parmon_monitor_open's (PARMON_E_NOT_RECORDED = 5 when run plainly, then nothing more).
program selfmon_f
  use parmon
  implicit none
  type(c_ptr) :: m
  type(parmon_thread_figures) :: f(2)
  integer(c_int) :: rc, idx, n
  integer(c_int64_t) :: t0, t1, rate
  real(c_double) :: x
  integer :: i
  rc = parmon_monitor_open(m)
  if (rc /= PARMON_OK) then
    print '(a,i0)', 'fortran ', rc
    stop
  end if
  rc = parmon_monitor_watch(m, PARMON_SELF, idx)
  rc = parmon_monitor_watch(m, PARMON_PROCESS, idx)
  n = parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, 2)
  x = 0
  call system_clock(t0, rate)
  do
    do i = 1, 100000
      x = x + sqrt(real(i, c_double))
    end do
    call system_clock(t1)
    if (t1 - t0 > rate * 3 / 10) exit
  end do
  ! A sampler pass after the loop.
  call system_clock(t0)
  do
    call system_clock(t1)
    if (t1 - t0 > rate / 20) exit
  end do
  n = parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, 2)
  print '(a,i0,1x,i0,1x,i0,1x,i0,1x,i0,1x,i0,1x,f0.1)', 'fortran ', n, f(1)%flags, &
    f(1)%elapsed_ns, f(1)%states_ns(PARMON_STATE_RUNNING + 1), f(1)%cpu_ns, f(2)%threads, x * 0
  call parmon_monitor_close(m)
end program selfmon_f
