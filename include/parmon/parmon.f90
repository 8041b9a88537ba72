! parmon.f90 -- Fortran interface to libparmon over its C ABI (ISO_C_BINDING).
! Names passed to the *_register routines must be NUL-terminated: use trim(name)//c_null_char.
module parmon
  use, intrinsic :: iso_c_binding
  implicit none
  integer(c_int), parameter :: PARMON_OK = 0, PARMON_E_INACTIVE = 1, PARMON_E_TOO_LARGE = 2
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
    subroutine parmon_pause() bind(C, name="parmon_pause")
    end subroutine
    subroutine parmon_resume() bind(C, name="parmon_resume")
    end subroutine
  end interface
end module parmon
