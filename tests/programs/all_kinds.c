/* all_kinds: uses every call of the public API once, in a known order, then pauses, emits events
 * that must not be recorded, and resumes. */
#include <parmon/parmon.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  parmon_process_name("all-kinds");
  parmon_thread_name("main");
  parmon_id region = parmon_region_register("outer");
  parmon_id counter = parmon_counter_register("items");
  parmon_id marker = parmon_marker_register("checkpoint");
  parmon_event_name(42, "matrix-row");
  parmon_region_enter(region);
  parmon_trace_event(42);
  double row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int rc = parmon_trace_data(42, row, sizeof row);
  parmon_counter_int(counter, -12345);
  parmon_counter_double(counter, 2.5);
  parmon_marker(marker);
  static char big[PARMON_TRACE_DATA_MAX + 1];
  int too_large = parmon_trace_data(43, big, sizeof big);
  parmon_region_leave(region);
  parmon_pause();
  for (int i = 0; i < 1000; ++i)
    parmon_trace_event(99); /* not recorded */
  parmon_resume();
  parmon_trace_event(100);
  printf("trace_data=%d too_large=%d active=%d\n", rc, too_large, parmon_is_active());
  return (rc == PARMON_OK || rc == PARMON_E_INACTIVE) && too_large == PARMON_E_TOO_LARGE ? 0 : 1;
}
