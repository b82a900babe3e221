"""Label, annotation and environment keys that sky-kueue reads or writes.

Why a module of its own: the same keys are read by the admin policy (on submission), written
into pod metadata, and read back by the controller and the mirror (on Workloads and pods).
Keeping them in one place makes a typo a single-point fix and lets a reader grep for every
use of a key.
"""

from __future__ import annotations

from sky_kueue.kueue import api as kueue_api

#: Task label (``resources.labels``) that names the team a task is submitted for. The policy
#: consumes it and re-writes it as a pod label (see :data:`TEAM_LABEL`'s use in ``rewrite``),
#: because GCP rejects label keys containing ``/`` and ``.`` when a task bursts to the cloud.
TEAM_LABEL = "sky-kueue.io/team"

#: Task label (``resources.labels``) opting a task in (``"true"``) or out (``"false"``) of cloud
#: burst; consumed like :data:`TEAM_LABEL`.
BURST_LABEL = "sky-kueue.io/burst"

#: Kueue's pod label naming the LocalQueue (``pkg/controller/constants``).
KUEUE_QUEUE_LABEL = kueue_api.QUEUE_NAME_LABEL

#: Kueue's pod label naming the WorkloadPriorityClass. SkyPilot 0.14.1 never sets it.
KUEUE_PRIORITY_CLASS_LABEL = kueue_api.PRIORITY_CLASS_LABEL

#: Prefix of every Kueue-owned label key; such keys never belong in ``resources.labels``.
KUEUE_LABEL_PREFIX = f"{kueue_api.KUEUE_GROUP}/"

#: Task label (``resources.labels``) declaring the task's expected run time (``90m``, ``2h``,
#: seconds); consumed like :data:`TEAM_LABEL` (``sky_kueue.skypilot.runtime_estimate``).
RUNTIME_LABEL = "sky-kueue.io/expected-runtime"

#: Pod annotation the policy writes with the expected run time in seconds; the ETA model reads
#: it (``sky_kueue.kueue.eta``) once the cluster view has joined it onto the pod group's Workload.
RUNTIME_SECONDS_ANNOTATION = "sky-kueue.io/expected-runtime-seconds"

#: Pod annotation saying where that run time came from (``declared``, ``history(n=7)``).
RUNTIME_SOURCE_ANNOTATION = "sky-kueue.io/expected-runtime-source"
