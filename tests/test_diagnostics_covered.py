"""Every diagnostic message wspc can emit is triggered by at least one test, so no rule of the
checkers (or of the command line, the bindings, the run-time checks) can go untested.

The messages are read from the source by tests/diagnostic_messages.py: each text argument of
a call that makes a user error or a warning, f-string holes as wildcards. Each message must be

- produced by an error file: the diagnostics of tests/errors/*.wsp (tests/frontend/
  test_errors.py checks each file states them exactly) are collected here and matched against
  the patterns; or
- in ELSEWHERE, which names the test that triggers it (a command line, a binding, a run, a
  compile for a target: what a `.wsp` file checked on its own cannot show). The test must
  exist and quote the message (a distinctive clause of it, `Pattern.quoted_in`: a test that
  only happens to trigger a message does not test it); or
- in UNREACHABLE, with the reason no user input can produce it.

A message added to the source without a test fails here; so does an entry of either list that
no longer names a message of the source (a message reworded or removed), or an UNREACHABLE
entry an error file covers after all.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_file
from tests.diagnostic_messages import ROOT, WILD, Pattern, collect

ERRORS = Path(__file__).resolve().parent / "errors"

# message pattern (as collect() spells it) -> "tests/path.py::test_name"
ELSEWHERE: dict[str, str] = {
    # issue 22: the timeline report (wspc report, wspc run --report)
    '--report needs --target cpu_sim ({*} records no trace to draw)':
        'tests/test_report.py::test_report_needs_a_target_with_a_trace',
    'cannot read the trace: {*}':
        'tests/test_report.py::test_a_trace_that_is_missing_or_not_json_is_an_error_at_the_file',
    'is not JSON: {*}':
        'tests/test_report.py::test_a_trace_that_is_missing_or_not_json_is_an_error_at_the_file',
    'is larger than {*} bytes: not a trace wspc wrote':
        'tests/test_report.py::test_a_trace_larger_than_the_limit_is_refused_unread',
    # issue 22: wspc tune
    'give --budget or --seconds, not both':
        'tests/test_tune.py::test_bad_options_are_diagnostics',
    'the budget must be at least 1 candidate (the given schedule)':
        'tests/test_tune.py::test_bad_options_are_diagnostics',
    'the time budget must be a positive number of seconds':
        'tests/test_tune.py::test_bad_options_are_diagnostics',
    'module `{*}` already has {*} {*} named `{*}`, and --apply would add a schedule `{*}`':
        'tests/test_tune.py::test_apply_writes_a_schedule_that_checks_with_the_printed_cycles',
    # issue 22: wspc fmt (the files it reads and writes)
    'no `.wsp` file below this directory':
        'tests/test_fmt.py::test_a_directory_formats_every_wsp_file_below_it',
    'cannot write the file: {*}':
        'tests/test_fmt.py::test_a_file_that_cannot_be_written_is_an_error_and_stays_as_it_was',
    'not UTF-8 text':
        'tests/test_fmt.py::test_standard_input_that_is_not_utf8',
    'larger than {*} MiB, the limit for a source file':
        'tests/test_fmt.py::test_standard_input_over_the_size_limit',
    # issue 20: wspc run --launcher mpi
    '--launcher mpi needs MPI, and the mpi4py and mpich wheels are not installed':
        'tests/test_mesh_mpi.py::test_the_launcher_without_mpi_says_how_to_install_it',
    '--target {*} cannot run on MPI (its runs have no transport between processes)':
        'tests/test_mesh_mpi.py::test_a_target_without_a_transport_cannot_run_on_mpi',
    'cannot start {*}: {*}':
        'tests/test_mesh_mpi.py::test_an_mpiexec_that_cannot_start_is_named',
    # issue 20: meshes of several devices (ir/devices.py, --mesh, --check-replicas)
    'inout `{*}` is partial over {*}: the ascend_npu target does not sum its addends for the caller yet':
        'tests/test_mesh_run.py::test_a_partial_inout_is_refused_for_ascend_npu',
    '--mesh sizes a mesh when a module is compiled; an artifact directory keeps the sizes it was compiled with':
        'tests/test_mesh_run.py::test_mesh_on_the_command_line',
    '{*}={*}: not an integer':
        'tests/test_mesh_run.py::test_mesh_on_the_command_line',
    '`{*}` has no device to run on: `{*}` and `{*}` are on different coordinates of {*}; take views of the same shard, or move the data with a collective':
        'tests/test_mesh_run.py::test_placement_errors_the_mesh_size_decides_at_compile_time',
    '`{*}` has no device to run on: `{*}` and `{*}` are on different coordinates of {*}; take views of the same shard, or move the data with a collective{*}':
        'tests/test_mesh_run.py::test_placement_errors_the_mesh_size_decides_at_compile_time',
    '`{*}` shards its `{*}` {*} over {*} = {*}: `{*}` must be a multiple of {*}{*}':
        'tests/test_mesh_run.py::test_uneven_shards_are_refused',
    "`{*}` spans more than one shard of {*} ({*} {*} each): a task reads one device's data; split the view at shard boundaries, or `allgather` `{*}`":
        'tests/test_mesh_run.py::test_placement_errors_the_mesh_size_decides_at_compile_time',
    "`{*}` spans more than one shard of {*} ({*} {*} each): a task reads one device's data; split the view at shard boundaries, or `allgather` `{*}`{*}":
        'tests/test_mesh_run.py::test_a_view_crossing_a_shard_at_run_time_is_reported_at_the_view',
    # issue 20: channels, pipes and events on a mesh (ir/devices.py's device regions)
    '`send({*}, {*}(...))` runs only on {*} = {*} (`{*}` is sharded over {*}), but each device runs its own instance of the pipe and of `{*}`, whose item the other devices would never get: a channel does not carry items between devices':
        'tests/test_mesh_csp.py::test_a_send_whose_task_one_device_holds_is_refused_at_the_view',
    '`slot_set` inside a pipe: on a mesh of several devices each device runs its own instance of a pipe, which would set the slot once per device':
        'tests/test_mesh_csp.py::test_a_collective_or_a_slot_set_in_a_pipe_is_refused',
    '`{*}` inside a pipe: on a mesh of several devices each device runs its own instance of a pipe, and a collective needs every device at once':
        'tests/test_mesh_csp.py::test_a_collective_or_a_slot_set_in_a_pipe_is_refused',
    '`{*}` is used inside a pipe and outside it: on a mesh of several devices each device runs its own instance of the pipe, with its own `{*}`, which the statements outside it would see only for the last device':
        'tests/test_mesh_csp.py::test_an_event_used_inside_and_outside_a_pipe_is_refused',
    "`{*}` is waited for in a pipe inside a loop: on a mesh of several devices each device runs its own instance of the pipe, and the next iteration's would wait for the last device's record, not its own":
        'tests/test_mesh_csp.py::test_an_event_waited_for_in_a_pipe_inside_a_loop_is_refused',
    "the pipe reads an element of `{*}`, which a task of the same pipe writes: on a mesh of several devices each device runs its own instance of the pipe, and under MPI a device's copy is written only in its own instance, after the instances before it have read it":
        'tests/test_mesh_csp.py::test_a_pipe_reading_an_element_it_writes_is_refused_and_a_seq_loop_keeps_one_order',
    'the ascend_npu target does not run pipes, channels or events on a mesh of several devices yet':
        'tests/test_mesh_csp.py::test_ascend_npu_refuses_a_pipe_on_a_mesh_of_several_devices',
    "`{*}` gathers {*}{*} of `{*}` from more than one shard of {*} ({*} {*} each): a task reads one device's data; `allgather` `{*}` over {*} into a tensor replicated over it and gather from that{*}":
        'tests/test_mesh_run.py::test_a_gather_view_across_shards_is_an_error_naming_the_row_and_its_device',
    'in `{*}`, `{*}` gathers rows of `{*}`, whose rows are sharded over the mesh, which the ascend_npu target does not run yet':
        'tests/test_mesh_run.py::test_a_gather_view_across_shards_is_an_error_naming_the_row_and_its_device',
    "mesh axis `{*}` is sized by `{*}`, which is not bound: the mesh's size is fixed when the module is compiled":
        'tests/test_mesh_language.py::test_a_mesh_sized_by_an_unbound_sym_is_an_error_at_its_declaration',
    'mesh axis `{*}` needs at least 1 device, but {*} makes it {*}':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    'mesh axis `{*}` needs at least 1 device, not {*}':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    'module `{*}` has no mesh, so there are no axes to size':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    'the mesh of `{*}` has no axis `{*}`':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    'the mesh was compiled with `{*}` = {*}{*}':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    'the replicas of `{*}` disagree: at {*}, device {*} ({*}) has {*} and device {*} ({*}) has {*}':
        'tests/test_mesh_run.py::test_replicas_that_disagree_are_reported',
    '{*} and --bind {*}={*} disagree: axis `{*}` is sized by `{*}`':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    '{*} and {*} disagree: both axes are sized by `{*}`':
        'tests/test_mesh_run.py::test_mesh_sizing_errors',
    # issue 19: the task-graph knobs
    '`.task_graph({*})` is not honoured on ascend_npu: the expander issues each wave\'s tasks at once, waits on the exact dependencies and keeps no trace':
        'tests/ascend/test_project.py::test_task_graph_knobs_are_named_in_one_warning',
    '`deps = explicit` cannot check a workload that uses CSP (processes order their tasks through channels, not declared steps)':
        'tests/test_task_graph.py::test_explicit_refuses_csp',
    '`deps = explicit`: `{*}` at [{*}] depends on `{*}` at [{*}] through `{*}`, and the schedule does not declare that order':
        'tests/test_task_graph.py::test_explicit_reports_a_dependency_the_schedule_does_not_declare',
    'inout `{*}` is updated in place (inplace=True), so its array must be a writeable '
    'C-contiguous NumPy array':
        'tests/test_run_inplace.py::test_an_array_that_cannot_be_updated_in_place_is_an_error',
    'in `{*}`, `{*}` is a gather view of `{*}` by `{*}`, which the ascend_npu target does not pass to the extern kernel `{*}`':
        'tests/backends/test_gather_views.py::test_ascend_refuses_a_gather_view_into_an_extern_kernel',
    # strided views (language.md section 6, "Strided views")
    'in `{*}`, the columns of `{*}` are a strided view of `{*}` (step {*}), which the ascend_npu target does not pass to the extern kernel `{*}`':
        'tests/ascend/test_strided_views.py::test_a_column_strided_view_into_an_extern_kernel_is_refused',
    'in `{*}`, `{*}` is a transposed view of `{*}`, which the ascend_npu target does not run':
        'tests/backends/test_transposed_views.py::test_ascend_refuses_a_transposed_view',
    # issue 17: the command line's values and files, memory and int64 limits, nesting
    '`{*}` (in {*}) is not a tensor of module `{*}`':
        'tests/test_cli_inputs.py::test_npz_naming_an_unknown_tensor',
    '`{*}` cannot be named in a Makefile rule (a line break in a file name)':
        'tests/frontend/test_imports.py::test_a_depfile_cannot_name_a_file_with_a_line_break',
    '`{*}` is also in {*}':
        'tests/test_cli_inputs.py::test_a_tensor_given_twice_by_inputs_and_input',
    '`{*}` is given twice ({*} {*} and {*} {*})':
        'tests/test_cli_inputs.py::test_bad_command_line_values_are_usage_errors',
    '`{*}` is {*}, not an output':
        'tests/test_user_errors.py::test_an_output_file_for_an_input_or_an_unknown_tensor',
    '`{*}` is {*}; it takes no input array':
        'tests/test_cli_inputs.py::test_an_input_for_an_output_is_refused',
    'an empty file name':
        'tests/test_cli_inputs.py::test_bad_command_line_values_are_usage_errors',
    'blocks nested more than {*} deep':
        'tests/frontend/test_long_programs.py::test_blocks_nest_at_most_max_blocks_deep',
    'expression nested more than {*} levels deep':
        'tests/frontend/test_long_programs.py::test_an_expression_past_the_depth_limit_is_reported_where_it_passes_it',
    'sym `{*}` is bound to {*}, more than a sym can be (2^63 - 1: the runtime computes in int64)':
        'tests/test_api_limits.py::test_a_sym_past_int64',
    'the run ran out of memory (its tensors fit in {*}, but the machine has less free)':
        'tests/test_api_limits.py::test_memory_taken_by_others_during_the_run_is_an_error_not_a_crash',
    '`{*}` overflows int64 with {*}{*}':
        'tests/backends/test_scalar_overflow.py::test_a_value_past_int64_is_an_error_at_the_expression',
    'the tensors need {*} of memory{*} ({*}), more than {*}':
        'tests/test_api_limits.py::test_a_size_past_the_machine_is_an_error_at_the_sym',
    "with {*}, `{*}` may reach {*}, past the runtime's int64 arithmetic (2^63 - 1)":
        'tests/test_api_limits.py::test_view_arithmetic_past_int64_is_an_error_at_the_sym',
    '{*} and {*}: the same destination twice (one would overwrite the other)':
        'tests/test_run_cli.py::test_the_same_destination_twice',
    '{*}={*}: a sym is a non-negative integer':
        'tests/test_cli_inputs.py::test_bad_command_line_values_are_usage_errors',
    '{*}={*}: more than a sym can be (2^63 - 1: the runtime computes in int64)':
        'tests/test_cli_inputs.py::test_bad_command_line_values_are_usage_errors',
    '{*}={*}: not an integer (ASCII digits, or 0x, 0o, 0b and _ as Python writes integers)':
        'tests/test_cli_inputs.py::test_bad_command_line_values_are_usage_errors',
    # issue 17: the build cache, the C toolchain, artifact directories
    '--depfile needs -o: the rule it writes is about the output':
        'tests/test_run_cli.py::test_depfile_needs_an_output',
    'cannot run the C compiler: {*}':
        'tests/backends/test_cache.py::test_compiler_settings_that_cannot_work_are_clear_errors',
    'cannot run the linker: {*}':
        'tests/backends/test_cache.py::test_no_linker_is_a_clear_error',
    'cannot split {*}={*} into words: {*}':
        'tests/backends/test_cache.py::test_compiler_settings_that_cannot_work_are_clear_errors',
    'the C compiler cannot build anything: {*}':
        'tests/backends/test_cache.py::test_a_broken_toolchain_is_a_clear_error',
    'cannot write the build cache: {*}':
        'tests/backends/test_cache.py::test_cache_out_of_room_is_a_clear_error',
    'not a wspc artifact directory ({*})':
        'tests/backends/test_cache.py::test_damaged_artifact_directory_is_a_clear_error',
    # issue 17: long runs
    'the run makes {*} tasks{*}, more than the cycle model replays in one run ({*})':
        'tests/test_long_runs.py::test_a_run_of_1e12_tasks_is_refused_before_it_starts',
    "the run's {*} tasks{*} need {*} for the cycle model's records ({*} bytes a task){*} more than {*}":
        'tests/test_long_runs.py::test_task_records_count_into_the_memory_limit',
    "the run's tasks need more memory than the limit leaves them: after {*} tasks, at `{*}`, the cycle model's records ({*} bytes a task, {*} a dependency) would pass {*}, what the memory limit leaves after the tensors":
        'tests/test_long_runs.py::test_data_dependent_task_records_stop_at_the_limit_during_the_run',
    'the call `{*}` passes {*} {*}, more than a task can take ({*}): split the kernel, or pass fewer, larger tiles':
        'tests/test_task_limits.py::test_one_past_each_limit_is_an_error_at_the_call',
    '`{*}` is a {*} of {*} elements, more than a tile can hold ({*}): use smaller tiles and more tasks':
        'tests/test_task_limits.py::test_a_tile_past_the_element_limit_is_an_error_at_the_argument',
    # ptowsp/api.py
    '`{*}` is {*} from {*}, but {*} makes it {*}':
        'tests/test_user_errors.py::test_a_sym_given_two_values',
    'sym `{*}` is not bound':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    '{*} (with {*})':
        'tests/test_user_errors.py::test_a_dimension_negative_for_the_bound_syms',
    'dimension `{*}` of `{*}` is {*} (with {*})':
        'tests/test_user_errors.py::test_a_dimension_negative_for_the_bound_syms',
    'sym `{*}` is not bound, and simulating needs its value (it sizes the tensors and the task space)':
        'tests/test_simulate_needs.py::test_dense_without_syms_names_the_sym_and_every_array_that_gives_it',
    'simulating this schedule needs the data of `{*}`: its elements decide which tasks exist':
        'tests/test_user_errors.py::test_simulating_a_data_dependent_task_space_without_its_data',
    '`{*}` is not a sym of module `{*}`':
        'tests/test_user_errors.py::test_binding_an_unknown_sym',
    'sym `{*}` is bound to {*}, but syms are non-negative integers':
        'tests/test_user_errors.py::test_binding_a_negative_sym',
    '`{*}` is not a tensor of module `{*}`':
        'tests/test_user_errors.py::test_an_array_for_an_unknown_tensor',
    '`{*}` is {*} {*}; it takes no input array':
        'tests/test_user_errors.py::test_an_array_for_an_output',
    # ptowsp/backends/ascend/__init__.py
    'in `{*}`, the columns of `{*}` are {*} elements apart in `{*}`: ascend_npu tiles need contiguous rows':
        'tests/ascend/test_project.py::test_provably_strided_columns_are_an_error',
    'extern kernel `{*}` has no `extern ascend` body, which the ascend_npu target needs (its `extern {*}` body runs only on cpu_sim)':
        'tests/test_user_errors.py::test_an_extern_kernel_without_a_python_twin_on_ref',
    # ptowsp/backends/ascend/aicore/__init__.py
    'kernel `{*}` has no `extern ascend` body, which the ascend_npu target needs':
        'tests/ascend/test_aicore.py::test_extern_c_only',
    'kernel `{*}` cannot run on the ascend_npu target: {*}, and the AI Core has no f64 (no double in AI Core code)':
        'tests/ascend/test_aicore.py::test_f64_is_refused',
    # ptowsp/backends/ascend/policies.py
    "`.dispatch({*})` is not honoured on ascend_npu: AICore blocks do not steal tasks; each wave's tasks are dealt round robin over the blocks instead":
        'tests/test_user_errors.py::test_policies_the_npu_does_not_honour_are_warnings',
    '`.timing({*})` is not honoured on ascend_npu: the dispatcher issues every task of a wave as soon as the wave starts':
        'tests/test_user_errors.py::test_policies_the_npu_does_not_honour_are_warnings',
    "`.task_graph(mode = abort)` never aborts on ascend_npu: the expander hands the window's {*} tasks to the AICore and waits for them before it enumerates more, as `mode = stall` does":
        'tests/test_user_errors.py::test_policies_the_npu_does_not_honour_are_warnings',
    # ptowsp/backends/cpu/artifact.py
    'in `extern {*}` body: {*}':
        'tests/test_user_errors.py::test_a_c_error_in_an_extern_c_body',
    # issue 19: extern cpp (tests/backends/test_extern_cpp.py)
    'cannot run the C++ compiler for `extern cpp` bodies: {*}':
        'tests/backends/test_extern_cpp.py::test_no_cpp_compiler_names_what_to_install',
    'include directory `{*}` does not exist':
        'tests/backends/test_extern_cpp.py::test_a_missing_include_directory_is_named',
    'include directory `{*}` does not exist (it is a file)':
        'tests/backends/test_extern_cpp.py::test_an_include_directory_that_is_a_file',
    '`include` is for `extern cpp` bodies, not `extern {*}`':
        'tests/backends/test_extern_cpp.py::test_include_spellings_that_are_errors',
    '`{*}` is not a header name wspc includes':
        'tests/backends/test_extern_cpp.py::test_include_spellings_that_are_errors',
    'expected `include "HEADER"` before the `extern {*}` body, found `{*}`':
        'tests/backends/test_extern_cpp.py::test_include_spellings_that_are_errors',
    # ptowsp/backends/cpu/emit.py
    'kernel `{*}` has no `extern c` body; the cpu_sim target runs extern kernels as C':
        'tests/test_user_errors.py::test_a_kernel_without_a_c_body_on_cpu_sim',
    # ptowsp/backends/cpu/program.py
    '{*}, {*}; the task was not launched':
        'tests/backends/test_cpu_vs_ref.py::test_bad_view_is_reported_with_coordinates_and_nothing_is_written',
    'deadlock: no process can make progress: {*}':
        'tests/embed/test_errors.py::test_deadlock_is_a_channel_error',
    # ptowsp/backends/machine.py
    'cannot read machine file: {*}':
        'tests/backends/test_cost.py::test_missing_file_names_it',
    'unknown machine key `{*}`':
        'tests/backends/test_cost.py::test_unknown_table',
    '`{*}` is too large: {*} (at most {*})':
        'tests/test_user_errors.py::test_a_machine_count_too_large',
    '`{*}` must be a finite number, not {*}':
        'tests/backends/test_cost.py::test_bad_values',
    '`{*}` must be a number, not {*}':
        'tests/backends/test_cost.py::test_bad_values',
    '`{*}` must be a string, not {*}':
        'tests/backends/test_cost.py::test_bad_values',
    '`{*}` must be an integer, not {*}':
        'tests/backends/test_cost.py::test_whole_float_count_gets_a_help',
    '`{*}` must be positive, not {*}':
        'tests/backends/test_cost.py::test_bad_values',
    '`{*}` must not be negative, not {*}':
        'tests/backends/test_cost.py::test_bad_values',
    'invalid TOML: {*}{*}':
        'tests/backends/test_cost.py::test_syntax_error_has_a_position',
    '`{*}` must be a table (`[{*}]`), not {*}':
        'tests/test_interconnect.py::test_bad_interconnect_keys_are_errors_naming_the_key',
    'unknown machine key `{*}.{*}`':
        'tests/test_interconnect.py::test_bad_interconnect_keys_are_errors_naming_the_key',
    # ptowsp/backends/ref/interp.py
    'choose a schedule to run: {*}':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'module `{*}` has no schedule to run':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'module `{*}` has no schedule `{*}`':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'the module has no tensor `{*}`':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    '`{*}` is {*} tensor; only inputs and inouts take arrays':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'no array is bound to {*} `{*}`':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    '`{*}` must be a {*} array of shape {*}, found {*} {*}':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'unknown symbol `{*}`':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'symbol `{*}` is not bound':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    'symbol `{*}` is bound to {*}, but symbols are non-negative':
        'tests/test_user_errors.py::test_execute_checks_its_own_arguments',
    # ptowsp/backends/ref/runner.py
    'kernel `{*}` is an extern kernel, which the ref back end cannot run; register a Python implementation with `ptowsp.backends.ref.register_extern({*}, fn)`':
        'tests/test_user_errors.py::test_an_extern_kernel_without_a_python_twin_on_ref',
    # ptowsp/backends/target.py
    'target {*} does not run artifact directories':
        'tests/test_driver.py::test_targets_that_cannot_do_a_command_are_usage_errors',
    # ptowsp/cli.py
    'no pass `{*}`; the passes: {*}, all':
        'tests/test_user_errors.py::test_an_unknown_pass_to_print_after',
    '--target {*} has nothing to build: it interprets the IR when run (`wspc run FILE --target {*}`)':
        'tests/test_driver.py::test_targets_that_cannot_do_a_command_are_usage_errors',
    '--emit does not apply to --target {*}: it writes a project directory (use --target cpu_sim --emit ...)':
        'tests/test_user_errors.py::test_emit_for_a_target_that_writes_a_project',
    '--target {*} writes {*}: give its directory with -o DIR':
        'tests/test_user_errors.py::test_a_project_needs_its_directory',
    'cannot write {*}: {*}':
        'tests/ascend/test_project.py::test_unwritable_output_is_a_user_error',
    'expected NAME=VALUE, got {*}':
        'tests/test_user_errors.py::test_bind_without_a_value',
    '--target {*} does not run here: it makes {*} (`wspc compile FILE --target {*} -o DIR`)':
        'tests/test_driver.py::test_targets_that_cannot_do_a_command_are_usage_errors',
    '--trace and --machine need --target cpu_sim ({*} has no cycle model)':
        'tests/test_user_errors.py::test_trace_on_a_target_without_a_cycle_model',
    'cannot read {*}: {*}':
        'tests/test_user_errors.py::test_an_input_file_that_is_not_an_array',
    'cannot read {*} for `{*}`: {*}':
        'tests/test_user_errors.py::test_an_input_file_that_is_not_an_array',
    # ptowsp/driver.py
    'module `{*}` has nothing to run':
        'tests/test_user_errors.py::test_a_module_with_nothing_to_run',
    'module `{*}` has several schedules and none is `main`':
        'tests/test_user_errors.py::test_several_schedules_and_none_is_main',
    # ptowsp/frontend/checker.py
    'cannot read file: {*}':
        'tests/frontend/test_cli.py::test_missing_file_is_a_user_error',
    '`{*}` needs {*} elements for outer axis `{*}`, but `{*}` has {*}':
        'tests/ir/test_lower_dynamic.py::test_index_tensors_provably_too_short_are_compile_errors',
    'unknown tensor `{*}`':
        'tests/frontend/test_workload_check.py::test_unknown_tensor_in_a_view_is_one_error',
    'tile dimensions must be positive, found {*}':
        'tests/frontend/test_kernel_check.py::test_parameter_errors',
    'dimension of `{*}` must not be negative{*}':
        'tests/test_user_errors.py::test_simulating_with_a_dimension_negative_for_the_bound_syms',
    # ptowsp/frontend/kernels/expressions.py
    '`{*}` is a data type, not a value':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`store` is a statement, not a value':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`{*}` needs a positive number of {*}, found {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    # ptowsp/frontend/kernels/slices.py
    'an index would drop a dimension of the tile; select {*} with a range':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    'a tile has two dimensions, found {*} ranges':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    'only a tile can be sliced, found {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    'the axis of `{*}` is 0 (rows) or 1 (columns)':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    # ptowsp/frontend/kernels/params.py
    'tile parameter `{*}` cannot have a default':
        'tests/frontend/test_kernel_check.py::test_parameter_errors',
    'the default of `{*}` must be a literal':
        'tests/frontend/test_kernel_check.py::test_parameter_errors',
    'the default of Constexpr parameter `{*}` must be an integer, found {*} `{*}`':
        'tests/frontend/test_kernel_check.py::test_parameter_errors',
    'the default `{*}` of `{*}` does not fit in {*}':
        'tests/frontend/test_kernel_check.py::test_parameter_errors',
    # ptowsp/frontend/kernels/statements.py
    'cannot store to `{*}`: it is a `let`, not an output parameter':
        'tests/frontend/test_kernel_check.py::test_store_targets',
    # ptowsp/frontend/workloads/calls.py
    '`{*}` takes Scalar[{*}], but `{*}` is a condition':
        'tests/frontend/test_workload_check.py::test_scalar_arguments',
    'channel `{*}` is passed inside `send({*}, ...)`':
        'tests/frontend/test_workload_check.py::test_channel_misuse_errors',
    # ptowsp/frontend/workloads/scalars.py
    '`{*}` needs conditions, but `{*}` is {*}':
        'tests/frontend/test_workload_check.py::test_when_predicates_must_be_conditions',
    # ptowsp/frontend/workloads/state.py
    'index `{*}` in `{*}` must be less than {*}{*}':
        'tests/backends/test_cpu_dynamic.py::test_expert_id_out_of_range',
    'index `{*}` in `{*}` must not be negative{*}':
        'tests/test_user_errors.py::test_a_view_index_negative_at_run_time',
    'slice end `{*}` in `{*}` must be at most {*}{*}':
        'tests/ir/test_pass_dead_tasks.py::test_kept_with_a_run_time_view_check',
    'slice start `{*}` in `{*}` must not be negative{*}':
        'tests/test_user_errors.py::test_a_view_slice_start_negative_at_run_time',
    # ptowsp/frontend/workloads/views.py
    '`{*}` must have at most {*} {*} to fit {*}{*}':
        'tests/test_user_errors.py::test_a_view_whose_extent_is_only_known_at_run_time',
    '`{*}` must have at least 1 {*}{*}':
        'tests/backends/test_partial_tiles.py::test_a_view_longer_than_its_tile_or_empty_is_an_error_at_run_time',
    # ptowsp/lower/csp.py
    'schedule `{*}` uses CSP (pipes, channels, events), which the {*} target does not support yet':
        'tests/ir/test_lower_csp.py::test_reject_csp',
    # ptowsp/lower/schedules.py
    'a schedule key naming the rebound loop variable `{*}` {*}':
        'tests/ir/test_lower.py::test_every_unsupported_construct_is_reported',
    # ptowsp/lower/tasks.py
    'passing a condition on run-time values (`{*}`) to a bool scalar {*}':
        'tests/ir/test_lower.py::test_unsupported',
    # ptowsp/lower/values.py
    '`{*}[{*} + 1]` of sparse axis `{*}` must be at most {*}, the length of `{*}`{*}':
        'tests/backends/test_cpu_dynamic.py::test_bad_indptr',
    '`{*}[{*}]` of sparse axis `{*}` must not be negative{*}':
        'tests/backends/test_ref_dynamic.py::test_bad_indptr',
    '`{*}` of sparse axis `{*}` must not decrease: `{*}[{*} + 1]` must be at least `{*}[{*}]`{*}':
        'tests/backends/test_cpu_dynamic.py::test_bad_indptr',
    'length of ragged axis `{*}` at `{*}` must not be negative{*}':
        'tests/backends/test_cpu_dynamic.py::test_negative_ragged_length',
    'loop extent `{*}` must not be negative{*}':
        'tests/backends/test_cpu_dynamic.py::test_negative_extent_from_a_slot',
    'reading slots in a schedule key (`{*}`) {*}':
        'tests/ir/test_lower_dynamic.py::test_element_reads_and_slots_in_schedule_keys_are_unsupported',
    'float arithmetic on run-time values (`{*}`) {*}':
        'tests/test_user_errors.py::test_float_arithmetic_on_run_time_values',
    'index `{*}` of `{*}` must be less than {*}{*}':
        'tests/backends/test_cpu_dynamic.py::test_read_index_out_of_range',
    'index `{*}` of `{*}` must not be negative{*}':
        'tests/test_user_errors.py::test_a_negative_index_read_at_run_time',
    'reading tensor elements in a schedule key (`{*}`) {*}':
        'tests/ir/test_lower_dynamic.py::test_element_reads_and_slots_in_schedule_keys_are_unsupported',
    # ptowsp/primitives.py
    '`{*}` cannot compare a bool value':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`{*}` needs bool operands, found {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`not` needs a bool operand, found {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`-` cannot take a bool value':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    'the value of `{*}` must be a scalar, found a {*} tile':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`{*}` of {*} cannot take {*} without a cast':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`{*}` needs a float tile, found {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`broadcast` cannot stretch {*} to [{*}, {*}]':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    '`interleave` needs two tiles of the same shape, found {*} and {*}':
        'tests/frontend/test_kernel_check.py::test_expression_errors',
    # tests run through a subprocess, or on cpu_sim through test_cpu_csp.py's import of
    # test_ref_csp.py's tests
    '{*} `{*}` has no array':
        'tests/test_run_cli.py::test_missing_array_is_reported_at_the_declaration',
    '`{*}` is declared {*}, but its array ({*}) has dtype {*}':
        'tests/test_run_cli.py::test_wrong_dtype_is_reported_at_the_declaration',
    '`{*}` is declared {*}[{*}] = {*}, but its array ({*}) has shape {*}':
        'tests/test_run_cli.py::test_wrong_shape_is_reported_at_the_declaration',
    'channel `{*}` is still open in another run of the pipe at {*}:{*}; a channel serves one pipe at a time':
        'tests/backends/test_ref_csp.py::test_a_channel_serves_one_pipe_at_a_time',
    'slice `{*}` in `{*}` must not have a negative length{*}':
        'tests/test_user_errors.py::test_a_view_slice_with_a_negative_length_at_run_time',
    'dividing by `{*}` in a schedule key (`{*}`), which may be zero, {*}':
        'tests/backends/test_scalar_division.py::'
        'test_a_schedule_key_divides_only_by_a_divisor_proved_nonzero',
}

# message pattern -> why no user input can produce it
UNREACHABLE: dict[str, str] = {
    # issue 20: meshes
    "mesh axis `{*}` needs at least 1 device{*}":
        "a mesh sized by a sym is refused before any run until the lowering to devices exists "
        "(ir/devices.py; tests/test_mesh_language.py::"
        "test_a_mesh_of_more_than_one_device_is_refused_by_every_target)",
    "the run makes more than {*} tasks (at `{*}`), more than the cycle model replays in one run":
        "the runtime's own limit of 2^31 - 2 tasks a run: a count the syms decide is refused "
        "before the run (tests/test_long_runs.py), and a data-dependent one needs about 137 GB "
        "for its records before it gets there, which the memory check stops first on any machine "
        "with less",
    "expected a scalar expression":
        "a defensive fallback: every kind of expression the parser builds is handled before it",
    "the ragged axis of `{*}` is not indexed by a loop variable of `{*}`, so there is no loop "
    "to decompose":
        "the checker rejects a ragged axis indexed by anything but a loop variable before "
        "schedules are checked (tests/errors/workload_ragged_index_not_loop_variable.wsp)",
    "`query` in a schedule key {*}":
        "the checker requires schedule keys to be integers, and `query` is a condition",
    "dimension {*} of `{*}` must have extent 1 to fit {*}{*}":
        "the checker rejects a leading view dimension it cannot prove to be 1 and lowering proves "
        "the same fact: a guard for a disagreement between the two",
    "inline ragged and sparse axes {*}":
        "the checker rejects a Ragged or Sparse axis written inline "
        "(tests/errors/workload_inline_ragged_axis.wsp) before lowering sees one",
    "`{*}` failed at [{*}] {*}":
        "generated kernels fail only when their copy of strided tiles cannot allocate memory, and "
        "an `extern c` body returns nothing it could fail with",
}


@functools.lru_cache(maxsize=None)
def patterns() -> tuple[tuple[Pattern, ...], tuple[str, ...]]:
    pats, unresolved = collect()
    return tuple(pats), tuple(unresolved)


@functools.lru_cache(maxsize=None)
def error_file_messages() -> tuple[str, ...]:
    """Every message the error files produce."""
    out = []
    for path in sorted(ERRORS.glob("*.wsp")):
        try:
            check_file(str(path))
        except WspError as err:
            out += [d.message for d in err.diagnostics]
    return tuple(out)


def _test_source(nodeid: str) -> str | None:
    """The source of test function `path::name` (a parameter id stripped) with its decorators
    (where `parametrize` lists its cases), or None."""
    path, _, name = nodeid.partition("::")
    name = name.split("[")[0]
    file = ROOT / path
    if not file.exists():
        return None
    text = file.read_text()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "\n".join(text.splitlines()[first - 1:node.end_lineno])
    return None


def test_every_message_expression_is_followed():
    """A message the collector cannot follow to its text would escape the check below."""
    _, unresolved = patterns()
    assert not unresolved, "messages whose text could not be followed:\n" + "\n".join(unresolved)


def test_the_collector_finds_the_messages():
    pats, _ = patterns()
    texts = {p.text for p in pats}
    # a sample from each kind of place the messages are made
    for text in ("`{*}` is already defined",                      # kernels/statements.py
                 "a task call is a statement, not a value",       # builder.py, through a tuple
                 "`{*}` must be positive, not {*}",               # machine.py, a returned tuple
                 "sym `{*}` is not bound",                        # api.py
                 "expected NAME=VALUE, got {*}"):                 # cli.py
        assert text in texts, text
    assert len(pats) > 300


def test_every_message_is_triggered_by_a_test():
    pats, _ = patterns()
    produced = error_file_messages()
    missing = []
    for p in pats:
        if p.text in ELSEWHERE or p.text in UNREACHABLE:
            continue
        if not any(p.matches(m) for m in produced):
            missing.append(f"{p.where}: {p.text!r}")
    found = len(pats)
    excepted = sum(p.text in UNREACHABLE for p in pats)
    print(f"\ndiagnostic messages: {found} found, {found - excepted - len(missing)} covered "
          f"({sum(p.text in ELSEWHERE for p in pats)} by tests outside tests/errors), "
          f"{excepted} unreachable, {len(missing)} untested")
    assert not missing, (f"{len(missing)} messages no test triggers: add an error file "
                         "(tests/errors/<rule>.wsp) or an entry of ELSEWHERE:\n" + "\n".join(missing))


def test_the_lists_name_current_messages():
    texts = {p.text for p in patterns()[0]}
    stale = [t for t in list(ELSEWHERE) + list(UNREACHABLE) if t not in texts]
    assert not stale, f"entries for messages the source no longer has: {stale}"
    both = set(ELSEWHERE) & set(UNREACHABLE)
    assert not both, both


@pytest.mark.parametrize("text", sorted(ELSEWHERE))
def test_the_test_named_elsewhere_quotes_its_message(text):
    nodeid = ELSEWHERE[text]
    source = _test_source(nodeid)
    assert source is not None, f"{nodeid} does not exist"
    assert Pattern(text).quoted_in(source), \
        f"{nodeid} does not quote {text!r} (one of {Pattern(text).clauses()})"


@pytest.mark.parametrize("text", sorted(UNREACHABLE))
def test_unreachable_messages_are_not_covered_after_all(text):
    p = Pattern(text)
    assert not any(p.matches(m) for m in error_file_messages()), \
        f"an error file produces {text!r}: remove it from UNREACHABLE"
    assert UNREACHABLE[text].strip(), "say why"


def test_wildcards_are_f_string_holes():
    assert Pattern("`{*}` is not defined").matches("`q` is not defined")
    assert not Pattern("`{*}` is not defined").matches("`q` is not defined here")
    assert Pattern("a {*} b").literal() == "a"
    assert WILD == "{*}"
