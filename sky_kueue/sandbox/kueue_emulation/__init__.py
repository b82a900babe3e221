"""Kueue's behaviour toward clients, emulated inside the sandbox API server.

The sandbox server stores objects; this package makes them behave as Kueue would make
them behave: pods and Jobs that name a LocalQueue get a Workload named as Kueue names it,
WorkloadPriorityClasses set ``spec.priority``, the project's exact scheduling model
(:mod:`sky_kueue.kueue`) runs cycles, and the results are written as Kueue writes them
(conditions, reasons, messages, ``status.admission``, scheduling gates removed, pods of a
preempted group marked ``TerminationTarget`` and deleted). Pods "run" for the number of
seconds in their ``sandbox.sky-kueue.io/run-seconds`` annotation on a scaled clock, so
hours of cluster time play in seconds.

Modules: :mod:`.naming` (Workload names, role hashes), :mod:`.workloads` (Workload
manifests from pods and Jobs), :mod:`.status` (status as Kueue writes it),
:mod:`.emulator` (the reconcile loop), :mod:`.clock` (the scaled clock).
"""
