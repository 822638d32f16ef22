"""Workload bodies and schedules (language.md sections 5 to 8): `module.check_workloads`."""
