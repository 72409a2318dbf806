/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The layout of every record in events.h, asserted: these structs are the
 * ring buffer's format and the trace file's (docs/trace-format.md), shared
 * by BPF (clang -target bpf), user space (C++) and the bridge.  A field that
 * moves or a struct that grows fails every build that includes events.h.
 * When a layout changes on purpose, bump LT_EVENT_ABI_VERSION and rewrite
 * this file: python3 tests/unit/gen_events_layout.py > bpf/events_layout.h
 *
 * Included at the end of events.h (inside namespace lt in C++).
 */
#ifndef LT_EVENTS_LAYOUT_H
#define LT_EVENTS_LAYOUT_H

#ifdef __cplusplus
#define LT_LAYOUT_ASSERT(cond, what) static_assert(cond, what)
#else
#define LT_LAYOUT_ASSERT(cond, what) _Static_assert(cond, what)
#endif
#define LT_SIZE(t, n) LT_LAYOUT_ASSERT(sizeof(struct t) == (n), "events.h: size of " #t " changed")
#define LT_OFFSET(t, f, n) LT_LAYOUT_ASSERT(__builtin_offsetof(struct t, f) == (n), "events.h: " #t "." #f " moved")

/* clang-format off */
LT_SIZE(lt_event_header, 24);
LT_OFFSET(lt_event_header, kind, 0);
LT_OFFSET(lt_event_header, size, 2);
LT_OFFSET(lt_event_header, pid, 4);
LT_OFFSET(lt_event_header, tid, 8);
LT_OFFSET(lt_event_header, cpu, 12);
LT_OFFSET(lt_event_header, ts_ns, 16);

LT_SIZE(lt_action_event, 272);
LT_OFFSET(lt_action_event, hdr, 0);
LT_OFFSET(lt_action_event, key, 24);
LT_OFFSET(lt_action_event, name_ptr, 32);
LT_OFFSET(lt_action_event, name_len, 40);
LT_OFFSET(lt_action_event, flags, 44);
LT_OFFSET(lt_action_event, name, 48);

LT_SIZE(lt_action_name_tail_event, 296);
LT_OFFSET(lt_action_name_tail_event, hdr, 0);
LT_OFFSET(lt_action_name_tail_event, key, 24);
LT_OFFSET(lt_action_name_tail_event, offset, 32);
LT_OFFSET(lt_action_name_tail_event, bytes, 36);
LT_OFFSET(lt_action_name_tail_event, chunk, 40);

LT_SIZE(lt_action_origin_event, 56);
LT_OFFSET(lt_action_origin_event, hdr, 0);
LT_OFFSET(lt_action_origin_event, key, 24);
LT_OFFSET(lt_action_origin_event, code, 32);
LT_OFFSET(lt_action_origin_event, checksum, 40);
LT_OFFSET(lt_action_origin_event, depth, 44);
LT_OFFSET(lt_action_origin_event, begin_kind, 48);
LT_OFFSET(lt_action_origin_event, flags, 50);
LT_OFFSET(lt_action_origin_event, pad, 52);

LT_SIZE(lt_module_call_event, 56);
LT_OFFSET(lt_module_call_event, hdr, 0);
LT_OFFSET(lt_module_call_event, self, 24);
LT_OFFSET(lt_module_call_event, frame, 32);
LT_OFFSET(lt_module_call_event, code, 40);
LT_OFFSET(lt_module_call_event, depth, 48);
LT_OFFSET(lt_module_call_event, pad, 52);

LT_SIZE(lt_proc_event, 56);
LT_OFFSET(lt_proc_event, hdr, 0);
LT_OFFSET(lt_proc_event, parent_pid, 24);
LT_OFFSET(lt_proc_event, child_pid, 28);
LT_OFFSET(lt_proc_event, exit_code, 32);
LT_OFFSET(lt_proc_event, flags, 36);
LT_OFFSET(lt_proc_event, comm, 40);

LT_SIZE(lt_proc_info_event, 344);
LT_OFFSET(lt_proc_info_event, hdr, 0);
LT_OFFSET(lt_proc_info_event, ppid, 24);
LT_OFFSET(lt_proc_info_event, rank, 28);
LT_OFFSET(lt_proc_info_event, local_rank, 32);
LT_OFFSET(lt_proc_info_event, world_size, 36);
LT_OFFSET(lt_proc_info_event, py_major, 40);
LT_OFFSET(lt_proc_info_event, py_minor, 42);
LT_OFFSET(lt_proc_info_event, flags, 44);
LT_OFFSET(lt_proc_info_event, comm, 48);
LT_OFFSET(lt_proc_info_event, cmdline, 64);
LT_OFFSET(lt_proc_info_event, torch_version, 320);

LT_SIZE(lt_proc_container_event, 168);
LT_OFFSET(lt_proc_container_event, hdr, 0);
LT_OFFSET(lt_proc_container_event, ns_pid, 24);
LT_OFFSET(lt_proc_container_event, flags, 28);
LT_OFFSET(lt_proc_container_event, hostname, 32);
LT_OFFSET(lt_proc_container_event, container_id, 96);

LT_SIZE(lt_window_event, 32);
LT_OFFSET(lt_window_event, hdr, 0);
LT_OFFSET(lt_window_event, begin, 24);
LT_OFFSET(lt_window_event, pad, 28);

LT_SIZE(lt_host_info_event, 232);
LT_OFFSET(lt_host_info_event, hdr, 0);
LT_OFFSET(lt_host_info_event, monotonic_ns, 24);
LT_OFFSET(lt_host_info_event, realtime_ns, 32);
LT_OFFSET(lt_host_info_event, hostname, 40);
LT_OFFSET(lt_host_info_event, host_id, 104);
LT_OFFSET(lt_host_info_event, kernel, 144);
LT_OFFSET(lt_host_info_event, tool, 208);

LT_SIZE(lt_proc_env_event, 272);
LT_OFFSET(lt_proc_env_event, hdr, 0);
LT_OFFSET(lt_proc_env_event, rank, 24);
LT_OFFSET(lt_proc_env_event, local_rank, 28);
LT_OFFSET(lt_proc_env_event, world_size, 32);
LT_OFFSET(lt_proc_env_event, local_world_size, 36);
LT_OFFSET(lt_proc_env_event, group_rank, 40);
LT_OFFSET(lt_proc_env_event, slurm_procid, 44);
LT_OFFSET(lt_proc_env_event, slurm_nodeid, 48);
LT_OFFSET(lt_proc_env_event, master_port, 52);
LT_OFFSET(lt_proc_env_event, slurm_job_id, 56);
LT_OFFSET(lt_proc_env_event, master_addr, 80);
LT_OFFSET(lt_proc_env_event, run_id, 144);
LT_OFFSET(lt_proc_env_event, hostname, 208);

LT_SIZE(lt_clock_sync_event, 112);
LT_OFFSET(lt_clock_sync_event, hdr, 0);
LT_OFFSET(lt_clock_sync_event, offset_ns, 24);
LT_OFFSET(lt_clock_sync_event, delay_ns, 32);
LT_OFFSET(lt_clock_sync_event, samples, 40);
LT_OFFSET(lt_clock_sync_event, phase, 44);
LT_OFFSET(lt_clock_sync_event, reference, 48);

LT_SIZE(lt_drops_event, 40);
LT_OFFSET(lt_drops_event, hdr, 0);
LT_OFFSET(lt_drops_event, ringbuf_full, 24);
LT_OFFSET(lt_drops_event, read_faults, 32);

LT_SIZE(lt_proc_drops_event, 40);
LT_OFFSET(lt_proc_drops_event, hdr, 0);
LT_OFFSET(lt_proc_drops_event, lost_kind, 24);
LT_OFFSET(lt_proc_drops_event, cause, 26);
LT_OFFSET(lt_proc_drops_event, pad, 28);
LT_OFFSET(lt_proc_drops_event, count, 32);

LT_SIZE(lt_recorded_reports_event, 88);
LT_OFFSET(lt_recorded_reports_event, hdr, 0);
LT_OFFSET(lt_recorded_reports_event, reports, 24);

LT_SIZE(lt_step_base_event, 48);
LT_OFFSET(lt_step_base_event, hdr, 0);
LT_OFFSET(lt_step_base_event, begin_ns, 24);
LT_OFFSET(lt_step_base_event, end_ns, 32);
LT_OFFSET(lt_step_base_event, index, 40);
LT_OFFSET(lt_step_base_event, pad, 44);

LT_SIZE(lt_note_event, 504);
LT_OFFSET(lt_note_event, hdr, 0);
LT_OFFSET(lt_note_event, text, 24);

LT_SIZE(lt_py_frame, 16);
LT_OFFSET(lt_py_frame, code, 0);
LT_OFFSET(lt_py_frame, lasti, 8);
LT_OFFSET(lt_py_frame, checksum, 12);

LT_SIZE(lt_py_sample_event, 1648);
LT_OFFSET(lt_py_sample_event, hdr, 0);
LT_OFFSET(lt_py_sample_event, user_ip, 24);
LT_OFFSET(lt_py_sample_event, tstate, 32);
LT_OFFSET(lt_py_sample_event, nframes, 40);
LT_OFFSET(lt_py_sample_event, flags, 42);
LT_OFFSET(lt_py_sample_event, nops, 44);
LT_OFFSET(lt_py_sample_event, weight, 46);
LT_OFFSET(lt_py_sample_event, frames, 48);
LT_OFFSET(lt_py_sample_event, ops, 1584);

LT_SIZE(lt_op_event, 32);
LT_OFFSET(lt_op_event, hdr, 0);
LT_OFFSET(lt_op_event, op, 24);
LT_OFFSET(lt_op_event, depth, 28);
LT_OFFSET(lt_op_event, pad, 30);

LT_SIZE(lt_region_code_event, 40);
LT_OFFSET(lt_region_code_event, hdr, 0);
LT_OFFSET(lt_region_code_event, op, 24);
LT_OFFSET(lt_region_code_event, checksum, 28);
LT_OFFSET(lt_region_code_event, code, 32);

LT_SIZE(lt_compile_note_event, 1248);
LT_OFFSET(lt_compile_note_event, hdr, 0);
LT_OFFSET(lt_compile_note_event, what, 24);
LT_OFFSET(lt_compile_note_event, flags, 28);
LT_OFFSET(lt_compile_note_event, start_wall_us, 32);
LT_OFFSET(lt_compile_note_event, duration_us, 40);
LT_OFFSET(lt_compile_note_event, count, 48);
LT_OFFSET(lt_compile_note_event, first_line, 56);
LT_OFFSET(lt_compile_note_event, compile_id, 64);
LT_OFFSET(lt_compile_note_event, function, 96);
LT_OFFSET(lt_compile_note_event, file, 224);
LT_OFFSET(lt_compile_note_event, reason, 480);
LT_OFFSET(lt_compile_note_event, failure, 992);

LT_SIZE(lt_op_shapes_event, 800);
LT_OFFSET(lt_op_shapes_event, hdr, 0);
LT_OFFSET(lt_op_shapes_event, op, 24);
LT_OFFSET(lt_op_shapes_event, depth, 28);
LT_OFFSET(lt_op_shapes_event, tensors, 30);
LT_OFFSET(lt_op_shapes_event, impl, 32);

LT_SIZE(lt_comm_event, 248);
LT_OFFSET(lt_comm_event, hdr, 0);
LT_OFFSET(lt_comm_event, pg, 24);
LT_OFFSET(lt_comm_event, seq, 32);
LT_OFFSET(lt_comm_event, kind, 40);
LT_OFFSET(lt_comm_event, backend, 41);
LT_OFFSET(lt_comm_event, ntensors, 42);
LT_OFFSET(lt_comm_event, peer, 44);
LT_OFFSET(lt_comm_event, flags, 48);
LT_OFFSET(lt_comm_event, pad, 52);
LT_OFFSET(lt_comm_event, impl, 56);

LT_SIZE(lt_comm_mark_event, 48);
LT_OFFSET(lt_comm_mark_event, hdr, 0);
LT_OFFSET(lt_comm_mark_event, obj, 24);
LT_OFFSET(lt_comm_mark_event, owner, 32);
LT_OFFSET(lt_comm_mark_event, what, 40);
LT_OFFSET(lt_comm_mark_event, pad, 41);

LT_SIZE(lt_nccl_event, 72);
LT_OFFSET(lt_nccl_event, hdr, 0);
LT_OFFSET(lt_nccl_event, comm, 24);
LT_OFFSET(lt_nccl_event, stream, 32);
LT_OFFSET(lt_nccl_event, count, 40);
LT_OFFSET(lt_nccl_event, peer, 48);
LT_OFFSET(lt_nccl_event, nranks, 52);
LT_OFFSET(lt_nccl_event, rank, 56);
LT_OFFSET(lt_nccl_event, op, 60);
LT_OFFSET(lt_nccl_event, fn, 64);
LT_OFFSET(lt_nccl_event, dtype, 65);
LT_OFFSET(lt_nccl_event, pad, 66);

LT_SIZE(lt_xla_event, 48);
LT_OFFSET(lt_xla_event, hdr, 0);
LT_OFFSET(lt_xla_event, obj, 24);
LT_OFFSET(lt_xla_event, arg, 32);
LT_OFFSET(lt_xla_event, site, 40);
LT_OFFSET(lt_xla_event, flags, 44);

LT_SIZE(lt_xla_metric_name_event, 80);
LT_OFFSET(lt_xla_metric_name_event, hdr, 0);
LT_OFFSET(lt_xla_metric_name_event, metric, 24);
LT_OFFSET(lt_xla_metric_name_event, name, 32);

LT_SIZE(lt_xla_value_event, 56);
LT_OFFSET(lt_xla_value_event, hdr, 0);
LT_OFFSET(lt_xla_value_event, metric, 24);
LT_OFFSET(lt_xla_value_event, sample_ns, 32);
LT_OFFSET(lt_xla_value_event, value, 40);
LT_OFFSET(lt_xla_value_event, flags, 48);
LT_OFFSET(lt_xla_value_event, pad, 52);

LT_SIZE(lt_xla_info_event, 248);
LT_OFFSET(lt_xla_info_event, hdr, 0);
LT_OFFSET(lt_xla_info_event, version, 24);
LT_OFFSET(lt_xla_info_event, device, 56);
LT_OFFSET(lt_xla_info_event, library, 88);

LT_SIZE(lt_mem_event, 64);
LT_OFFSET(lt_mem_event, hdr, 0);
LT_OFFSET(lt_mem_event, ptr, 24);
LT_OFFSET(lt_mem_event, bytes, 32);
LT_OFFSET(lt_mem_event, total_allocated, 40);
LT_OFFSET(lt_mem_event, total_reserved, 48);
LT_OFFSET(lt_mem_event, what, 56);
LT_OFFSET(lt_mem_event, device_type, 57);
LT_OFFSET(lt_mem_event, device_index, 58);
LT_OFFSET(lt_mem_event, pad, 59);
LT_OFFSET(lt_mem_event, depth, 60);
LT_OFFSET(lt_mem_event, flags, 62);

LT_SIZE(lt_op_name_event, 248);
LT_OFFSET(lt_op_name_event, hdr, 0);
LT_OFFSET(lt_op_name_event, op, 24);
LT_OFFSET(lt_op_name_event, nargs, 28);
LT_OFFSET(lt_op_name_event, pad, 30);
LT_OFFSET(lt_op_name_event, name, 32);
LT_OFFSET(lt_op_name_event, overload, 144);
LT_OFFSET(lt_op_name_event, arg_reg, 208);

LT_SIZE(lt_op_span_event, 48);
LT_OFFSET(lt_op_span_event, hdr, 0);
LT_OFFSET(lt_op_span_event, end_ns, 24);
LT_OFFSET(lt_op_span_event, self_ns, 32);
LT_OFFSET(lt_op_span_event, op, 40);
LT_OFFSET(lt_op_span_event, depth, 44);
LT_OFFSET(lt_op_span_event, flags, 46);

LT_SIZE(lt_op_input_shapes_event, 1056);
LT_OFFSET(lt_op_input_shapes_event, hdr, 0);
LT_OFFSET(lt_op_input_shapes_event, op, 24);
LT_OFFSET(lt_op_input_shapes_event, len, 28);
LT_OFFSET(lt_op_input_shapes_event, text, 32);

LT_SIZE(lt_op_observer_event, 240);
LT_OFFSET(lt_op_observer_event, hdr, 0);
LT_OFFSET(lt_op_observer_event, how, 24);
LT_OFFSET(lt_op_observer_event, final, 28);
LT_OFFSET(lt_op_observer_event, dropped, 32);
LT_OFFSET(lt_op_observer_event, too_deep, 40);
LT_OFFSET(lt_op_observer_event, detail, 48);

LT_SIZE(lt_offcpu_end_event, 32);
LT_OFFSET(lt_offcpu_end_event, hdr, 0);
LT_OFFSET(lt_offcpu_end_event, begin_ns, 24);

LT_SIZE(lt_py_gc_event, 48);
LT_OFFSET(lt_py_gc_event, hdr, 0);
LT_OFFSET(lt_py_gc_event, begin_ns, 24);
LT_OFFSET(lt_py_gc_event, collected, 32);
LT_OFFSET(lt_py_gc_event, generation, 40);
LT_OFFSET(lt_py_gc_event, pad, 44);

LT_SIZE(lt_py_code_event, 432);
LT_OFFSET(lt_py_code_event, hdr, 0);
LT_OFFSET(lt_py_code_event, code, 24);
LT_OFFSET(lt_py_code_event, checksum, 32);
LT_OFFSET(lt_py_code_event, first_line, 36);
LT_OFFSET(lt_py_code_event, flags, 40);
LT_OFFSET(lt_py_code_event, pad, 44);
LT_OFFSET(lt_py_code_event, name, 48);
LT_OFFSET(lt_py_code_event, file, 176);

LT_SIZE(lt_py_line_event, 48);
LT_OFFSET(lt_py_line_event, hdr, 0);
LT_OFFSET(lt_py_line_event, code, 24);
LT_OFFSET(lt_py_line_event, checksum, 32);
LT_OFFSET(lt_py_line_event, lasti, 36);
LT_OFFSET(lt_py_line_event, line, 40);
LT_OFFSET(lt_py_line_event, pad, 44);

LT_SIZE(lt_native_sym_event, 256);
LT_OFFSET(lt_native_sym_event, hdr, 0);
LT_OFFSET(lt_native_sym_event, ip, 24);
LT_OFFSET(lt_native_sym_event, name, 32);
LT_OFFSET(lt_native_sym_event, dso, 192);

LT_SIZE(lt_native_func_event, 264);
LT_OFFSET(lt_native_func_event, hdr, 0);
LT_OFFSET(lt_native_func_event, start, 24);
LT_OFFSET(lt_native_func_event, name, 40);
LT_OFFSET(lt_native_func_event, dso, 200);

LT_SIZE(lt_module_name_event, 424);
LT_OFFSET(lt_module_name_event, hdr, 0);
LT_OFFSET(lt_module_name_event, module, 24);
LT_OFFSET(lt_module_name_event, flags, 32);
LT_OFFSET(lt_module_name_event, pad, 36);
LT_OFFSET(lt_module_name_event, type, 40);
LT_OFFSET(lt_module_name_event, name, 168);

LT_SIZE(lt_sampler_info_event, 40);
LT_OFFSET(lt_sampler_info_event, hdr, 0);
LT_OFFSET(lt_sampler_info_event, period_ns, 24);
LT_OFFSET(lt_sampler_info_event, rate_hz, 32);
LT_OFFSET(lt_sampler_info_event, flags, 36);

LT_SIZE(lt_gpu_activity, 96);
LT_OFFSET(lt_gpu_activity, start_ns, 0);
LT_OFFSET(lt_gpu_activity, end_ns, 8);
LT_OFFSET(lt_gpu_activity, bytes, 16);
LT_OFFSET(lt_gpu_activity, correlation, 24);
LT_OFFSET(lt_gpu_activity, name_id, 28);
LT_OFFSET(lt_gpu_activity, cbid, 32);
LT_OFFSET(lt_gpu_activity, tid, 36);
LT_OFFSET(lt_gpu_activity, stream, 40);
LT_OFFSET(lt_gpu_activity, context, 44);
LT_OFFSET(lt_gpu_activity, grid, 48);
LT_OFFSET(lt_gpu_activity, block, 60);
LT_OFFSET(lt_gpu_activity, registers, 72);
LT_OFFSET(lt_gpu_activity, shared_mem, 76);
LT_OFFSET(lt_gpu_activity, graph_id, 80);
LT_OFFSET(lt_gpu_activity, kind, 84);
LT_OFFSET(lt_gpu_activity, device, 86);
LT_OFFSET(lt_gpu_activity, copy_kind, 88);
LT_OFFSET(lt_gpu_activity, sync_type, 89);
LT_OFFSET(lt_gpu_activity, pad, 90);
LT_OFFSET(lt_gpu_activity, pad2, 92);

LT_SIZE(lt_gpu_activity_event, 120);
LT_OFFSET(lt_gpu_activity_event, hdr, 0);
LT_OFFSET(lt_gpu_activity_event, a, 24);

LT_SIZE(lt_gpu_name, 248);
LT_OFFSET(lt_gpu_name, id, 0);
LT_OFFSET(lt_gpu_name, kind, 4);
LT_OFFSET(lt_gpu_name, len, 6);
LT_OFFSET(lt_gpu_name, offset, 8);
LT_OFFSET(lt_gpu_name, total_len, 12);
LT_OFFSET(lt_gpu_name, text, 16);

LT_SIZE(lt_gpu_name_event, 272);
LT_OFFSET(lt_gpu_name_event, hdr, 0);
LT_OFFSET(lt_gpu_name_event, n, 24);

LT_SIZE(lt_gpu_launch_event, 112);
LT_OFFSET(lt_gpu_launch_event, hdr, 0);
LT_OFFSET(lt_gpu_launch_event, correlation, 24);
LT_OFFSET(lt_gpu_launch_event, cbid, 28);
LT_OFFSET(lt_gpu_launch_event, func, 32);
LT_OFFSET(lt_gpu_launch_event, source, 40);
LT_OFFSET(lt_gpu_launch_event, api, 42);
LT_OFFSET(lt_gpu_launch_event, nops, 44);
LT_OFFSET(lt_gpu_launch_event, flags, 46);
LT_OFFSET(lt_gpu_launch_event, ops, 48);

LT_SIZE(lt_nvtx, 232);
LT_OFFSET(lt_nvtx, ts_ns, 0);
LT_OFFSET(lt_nvtx, range_id, 8);
LT_OFFSET(lt_nvtx, domain, 16);
LT_OFFSET(lt_nvtx, string_id, 20);
LT_OFFSET(lt_nvtx, color, 24);
LT_OFFSET(lt_nvtx, category, 28);
LT_OFFSET(lt_nvtx, tid, 32);
LT_OFFSET(lt_nvtx, type, 36);
LT_OFFSET(lt_nvtx, msg_len, 38);
LT_OFFSET(lt_nvtx, msg, 40);

LT_SIZE(lt_nvtx_event, 256);
LT_OFFSET(lt_nvtx_event, hdr, 0);
LT_OFFSET(lt_nvtx_event, n, 24);

LT_SIZE(lt_gpu_status, 136);
LT_OFFSET(lt_gpu_status, state, 0);
LT_OFFSET(lt_gpu_status, error, 4);
LT_OFFSET(lt_gpu_status, dropped, 8);
LT_OFFSET(lt_gpu_status, cupti_version, 16);
LT_OFFSET(lt_gpu_status, flags, 20);
LT_OFFSET(lt_gpu_status, detail, 24);

LT_SIZE(lt_gpu_status_event, 160);
LT_OFFSET(lt_gpu_status_event, hdr, 0);
LT_OFFSET(lt_gpu_status_event, s, 24);

LT_SIZE(lt_gpu_clock, 32);
LT_OFFSET(lt_gpu_clock, cupti_ns, 0);
LT_OFFSET(lt_gpu_clock, monotonic_ns, 8);
LT_OFFSET(lt_gpu_clock, offset_ns, 16);
LT_OFFSET(lt_gpu_clock, error_ns, 24);

LT_SIZE(lt_gpu_clock_event, 56);
LT_OFFSET(lt_gpu_clock_event, hdr, 0);
LT_OFFSET(lt_gpu_clock_event, c, 24);

LT_SIZE(lt_device_stats_event, 112);
LT_OFFSET(lt_device_stats_event, hdr, 0);
LT_OFFSET(lt_device_stats_event, device, 24);
LT_OFFSET(lt_device_stats_event, gpu_util_pct, 28);
LT_OFFSET(lt_device_stats_event, mem_util_pct, 32);
LT_OFFSET(lt_device_stats_event, temperature_c, 36);
LT_OFFSET(lt_device_stats_event, mem_used_bytes, 40);
LT_OFFSET(lt_device_stats_event, mem_total_bytes, 48);
LT_OFFSET(lt_device_stats_event, power_mw, 56);
LT_OFFSET(lt_device_stats_event, sm_clock_mhz, 60);
LT_OFFSET(lt_device_stats_event, proc_mem_bytes, 64);
LT_OFFSET(lt_device_stats_event, proc_pid, 96);

LT_SIZE(lt_proc_stats_event, 56);
LT_OFFSET(lt_proc_stats_event, hdr, 0);
LT_OFFSET(lt_proc_stats_event, cpu_ns, 24);
LT_OFFSET(lt_proc_stats_event, rss_bytes, 32);
LT_OFFSET(lt_proc_stats_event, vm_percent_x100, 40);
LT_OFFSET(lt_proc_stats_event, swap_percent_x100, 44);
LT_OFFSET(lt_proc_stats_event, cpu_percent_x100, 48);
LT_OFFSET(lt_proc_stats_event, flags, 52);

LT_SIZE(lt_thread_sched_event, 48);
LT_OFFSET(lt_thread_sched_event, hdr, 0);
LT_OFFSET(lt_thread_sched_event, cpu_ns, 24);
LT_OFFSET(lt_thread_sched_event, runq_ns, 32);
LT_OFFSET(lt_thread_sched_event, timeslices, 40);

LT_SIZE(lt_fork_stats_event, 48);
LT_OFFSET(lt_fork_stats_event, hdr, 0);
LT_OFFSET(lt_fork_stats_event, target, 24);
LT_OFFSET(lt_fork_stats_event, flags, 28);
LT_OFFSET(lt_fork_stats_event, cpu_ns, 32);
LT_OFFSET(lt_fork_stats_event, rss_bytes, 40);

LT_SIZE(lt_py_offsets, 46);
LT_OFFSET(lt_py_offsets, py_minor, 0);
LT_OFFSET(lt_py_offsets, gen_frame, 2);
LT_OFFSET(lt_py_offsets, gen_frame_embedded, 4);
LT_OFFSET(lt_py_offsets, frame_code, 6);
LT_OFFSET(lt_py_offsets, frame_lasti, 8);
LT_OFFSET(lt_py_offsets, frame_localsplus, 10);
LT_OFFSET(lt_py_offsets, code_argcount, 12);
LT_OFFSET(lt_py_offsets, code_flags, 14);
LT_OFFSET(lt_py_offsets, code_firstlineno, 16);
LT_OFFSET(lt_py_offsets, code_filename, 18);
LT_OFFSET(lt_py_offsets, code_name, 20);
LT_OFFSET(lt_py_offsets, code_firsttraceable, 22);
LT_OFFSET(lt_py_offsets, code_adaptive, 24);
LT_OFFSET(lt_py_offsets, str_ascii_data, 26);
LT_OFFSET(lt_py_offsets, eval_frame_arg, 28);
LT_OFFSET(lt_py_offsets, frame_owner, 30);
LT_OFFSET(lt_py_offsets, str_compact_data, 32);
LT_OFFSET(lt_py_offsets, tstate_frame, 34);
LT_OFFSET(lt_py_offsets, cframe_frame, 36);
LT_OFFSET(lt_py_offsets, frame_previous, 38);
LT_OFFSET(lt_py_offsets, frame_block, 40);
LT_OFFSET(lt_py_offsets, owner_cstack, 42);
LT_OFFSET(lt_py_offsets, stackref_tag_mask, 43);
LT_OFFSET(lt_py_offsets, pad, 44);

LT_SIZE(lt_target, 120);
LT_OFFSET(lt_target, off, 0);
LT_OFFSET(lt_target, flags, 48);
LT_OFFSET(lt_target, generation, 52);
LT_OFFSET(lt_target, gen_type, 56);
LT_OFFSET(lt_target, profile_code, 64);
LT_OFFSET(lt_target, profile_first_traceable, 72);
LT_OFFSET(lt_target, tss_key, 76);
LT_OFFSET(lt_target, tsd_block, 80);
LT_OFFSET(lt_target, tsd_levels, 82);
LT_OFFSET(lt_target, pad, 84);
LT_OFFSET(lt_target, tensor_vtable, 88);
LT_OFFSET(lt_target, gc_collecting_at, 96);
LT_OFFSET(lt_target, gil_holder_at, 104);
LT_OFFSET(lt_target, tstate_interp, 112);
LT_OFFSET(lt_target, interp_gc_collecting, 114);
LT_OFFSET(lt_target, interp_gil_holder, 116);
LT_OFFSET(lt_target, interp_gil_locked, 118);

LT_SIZE(lt_drop_counters, 24);
LT_OFFSET(lt_drop_counters, ringbuf_full, 0);
LT_OFFSET(lt_drop_counters, read_faults, 8);
LT_OFFSET(lt_drop_counters, unreadable, 16);

LT_SIZE(lt_loss_key, 8);
LT_OFFSET(lt_loss_key, tgid, 0);
LT_OFFSET(lt_loss_key, kind, 4);
LT_OFFSET(lt_loss_key, cause, 6);
/* clang-format on */

#undef LT_OFFSET
#undef LT_SIZE
#undef LT_LAYOUT_ASSERT

#endif /* LT_EVENTS_LAYOUT_H */
