"""Relaunch lanes on a cluster: which ClusterQueues are lanes, how full each is, who waits.

Why from the cluster's own objects: ``sky-kueue queue`` and the controller's heartbeat
(``controller status``) must show a lane as Kueue holds it, whoever created it. ``sky-kueue
setup`` labels each lane ClusterQueue with :data:`LANE_LABEL` (``team`` or ``cohort``: who
shares it); occupancy is what Kueue admitted there (``status.admission.podSetAssignments[].
resourceUsage`` of every Workload holding quota in it, Kueue ``apis/kueue/v1beta2/
workload_types.go``) against its nominal quota, and the waiting relaunches are the Workloads
queued in a LocalQueue that points at it, with how long each has waited.

Pure: raw documents (dicts) in, frozen views out.
"""

from __future__ import annotations

LANE_LABEL = "sky-kueue.io/relaunch-lane"
