! parmon.f90 -- Fortran interface to libparmon over its C ABI (ISO_C_BINDING).
! Names passed to the *_register routines must be NUL-terminated: use trim(name)//c_null_char.
! Matrices: m = parmon_matrix_register("u"//c_null_char), then rc = parmon_matrix_record(m, a)
! for a 2-D array a(rows, cols) of real(c_double), real(c_float), integer(c_int32_t) or
! integer(c_int64_t): recorded column-major as Fortran stores it and shown with a(1,1) at the
! top left, row i of the view being a(i, :) (parmon.h, parmon_matrix_colmajor).
module parmon
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int), parameter :: PARMON_OK = 0, PARMON_E_INACTIVE = 1, PARMON_E_TOO_LARGE = 2
  integer(c_int), parameter :: PARMON_E_DROPPED = 3, PARMON_E_INVALID = 4
  integer(c_int), parameter :: PARMON_E_NOT_RECORDED = 5, PARMON_E_FULL = 6
  ! Self-monitoring (docs/selfmon.md): states_ns(PARMON_STATE_RUNNING + 1) is the running time.
  integer(c_int), parameter :: PARMON_STATE_RUNNING = 0, PARMON_STATE_QUEUED = 1, &
    PARMON_STATE_COMM = 2, PARMON_STATE_LOCK = 3, PARMON_STATE_TIMER = 4, PARMON_STATE_IO = 5, &
    PARMON_STATE_OTHER = 6, PARMON_STATE_COUNT = 7
  integer(c_int32_t), parameter :: PARMON_SELF = 0, PARMON_PROCESS = -1
  integer(c_int), parameter :: PARMON_SINCE_LAST_READ = 0, PARMON_LAST_INTERVAL = 1
  integer(c_int32_t), parameter :: PARMON_FIGURES_NONE = 1, PARMON_FIGURES_EXITED = 2
  integer(c_int), parameter :: PARMON_INT32 = 1, PARMON_INT64 = 2, PARMON_FLOAT = 3, &
    PARMON_DOUBLE = 4
  ! The C struct parmon_thread_figures (unsigned fields as signed integers of the same size).
  type, bind(C) :: parmon_thread_figures
    integer(c_int32_t) :: tid, cpu, flags, threads
    integer(c_int64_t) :: start_ns, end_ns, elapsed_ns
    integer(c_int64_t) :: states_ns(7)
    integer(c_int64_t) :: cpu_ns
    real(c_double) :: utilisation, cpu_busy
  end type
  interface
    integer(c_int) function parmon_is_active() bind(C, name="parmon_is_active")
      import :: c_int
    end function
    integer(c_int32_t) function parmon_region_register(name) bind(C, name="parmon_region_register")
      import :: c_int32_t, c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end function
    subroutine parmon_region_enter(id) bind(C, name="parmon_region_enter")
      import :: c_int32_t
      integer(c_int32_t), value :: id
    end subroutine
    subroutine parmon_region_leave(id) bind(C, name="parmon_region_leave")
      import :: c_int32_t
      integer(c_int32_t), value :: id
    end subroutine
    subroutine parmon_trace_event(id) bind(C, name="parmon_trace_event")
      import :: c_int32_t
      integer(c_int32_t), value :: id
    end subroutine
    integer(c_int) function parmon_trace_data(id, data, size) bind(C, name="parmon_trace_data")
      import :: c_int, c_int32_t, c_ptr, c_size_t
      integer(c_int32_t), value :: id
      type(c_ptr), value :: data
      integer(c_size_t), value :: size
    end function
    integer(c_int32_t) function parmon_counter_register(name) bind(C, name="parmon_counter_register")
      import :: c_int32_t, c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end function
    subroutine parmon_counter_double(id, value) bind(C, name="parmon_counter_double")
      import :: c_int32_t, c_double
      integer(c_int32_t), value :: id
      real(c_double), value :: value
    end subroutine
    integer(c_int32_t) function parmon_matrix_register(name) bind(C, name="parmon_matrix_register")
      import :: c_int32_t, c_char
      character(kind=c_char), dimension(*), intent(in) :: name
    end function
    integer(c_int) function parmon_matrix_colmajor(id, type, rows, cols, data) &
        bind(C, name="parmon_matrix_colmajor")
      import :: c_int, c_int32_t, c_ptr
      integer(c_int32_t), value :: id
      integer(c_int), value :: type
      integer(c_int32_t), value :: rows, cols
      type(c_ptr), value :: data
    end function
    subroutine parmon_pause() bind(C, name="parmon_pause")
    end subroutine
    subroutine parmon_resume() bind(C, name="parmon_resume")
    end subroutine
    ! Self-monitoring: monitor is a type(c_ptr) handle.
    integer(c_int32_t) function parmon_thread_id() bind(C, name="parmon_thread_id")
      import :: c_int32_t
    end function
    integer(c_int) function parmon_monitor_open(monitor) bind(C, name="parmon_monitor_open")
      import :: c_int, c_ptr
      type(c_ptr), intent(out) :: monitor
    end function
    integer(c_int) function parmon_monitor_watch(monitor, tid, index) &
        bind(C, name="parmon_monitor_watch")
      import :: c_int, c_int32_t, c_ptr
      type(c_ptr), value :: monitor
      integer(c_int32_t), value :: tid
      integer(c_int), intent(out) :: index
    end function
    integer(c_int) function parmon_monitor_watch_pid(monitor, pid, tid, index) &
        bind(C, name="parmon_monitor_watch_pid")
      import :: c_int, c_int32_t, c_ptr
      type(c_ptr), value :: monitor
      integer(c_int32_t), value :: pid, tid
      integer(c_int), intent(out) :: index
    end function
    integer(c_int) function parmon_monitor_read(monitor, what, figures, n) &
        bind(C, name="parmon_monitor_read")
      import :: c_int, c_ptr, parmon_thread_figures
      type(c_ptr), value :: monitor
      integer(c_int), value :: what, n
      type(parmon_thread_figures), intent(out) :: figures(*)
    end function
    subroutine parmon_monitor_close(monitor) bind(C, name="parmon_monitor_close")
      import :: c_ptr
      type(c_ptr), value :: monitor
    end subroutine
  end interface
  interface parmon_matrix_record
    module procedure parmon_matrix_record_r8, parmon_matrix_record_r4, &
      parmon_matrix_record_i4, parmon_matrix_record_i8
  end interface
contains
  integer(c_int) function parmon_matrix_record_r8(id, a) result(rc)
    integer(c_int32_t), intent(in) :: id
    real(c_double), intent(in), target, contiguous :: a(:, :)
    rc = parmon_matrix_colmajor(id, PARMON_DOUBLE, int(size(a, 1), c_int32_t), &
      int(size(a, 2), c_int32_t), c_loc(a))
  end function
  integer(c_int) function parmon_matrix_record_r4(id, a) result(rc)
    integer(c_int32_t), intent(in) :: id
    real(c_float), intent(in), target, contiguous :: a(:, :)
    rc = parmon_matrix_colmajor(id, PARMON_FLOAT, int(size(a, 1), c_int32_t), &
      int(size(a, 2), c_int32_t), c_loc(a))
  end function
  integer(c_int) function parmon_matrix_record_i4(id, a) result(rc)
    integer(c_int32_t), intent(in) :: id
    integer(c_int32_t), intent(in), target, contiguous :: a(:, :)
    rc = parmon_matrix_colmajor(id, PARMON_INT32, int(size(a, 1), c_int32_t), &
      int(size(a, 2), c_int32_t), c_loc(a))
  end function
  integer(c_int) function parmon_matrix_record_i8(id, a) result(rc)
    integer(c_int32_t), intent(in) :: id
    integer(c_int64_t), intent(in), target, contiguous :: a(:, :)
    rc = parmon_matrix_colmajor(id, PARMON_INT64, int(size(a, 1), c_int32_t), &
      int(size(a, 2), c_int32_t), c_loc(a))
  end function
end module parmon
