"""The resubmission controller: Kueue preempts a SkyPilot job, the relaunch comes back aged.

Why it exists: a SkyPilot relaunch is a new Workload, at the back of its priority band, and
Kueue has no aging across priority levels (kueue#754); KEP-7990's ``priority-boost`` leaves
"boost a workload preempted too many times" to an external controller. This is it.

One concept per module; pure core, adapters, entry points (dependencies point inward):

* pure: :mod:`.detection` (what a Workload snapshot means), :mod:`.identity` (whose job),
  :mod:`.keys` (idempotency keys), :mod:`.history` (the per-job record and the store port),
  :mod:`.aging` (the policies), :mod:`.actuators` (patch builders), :mod:`.burst`,
  :mod:`.relaunch` (the relaunch race), :mod:`.engine` (one reconcile), :mod:`.clock`,
  :mod:`.kueue_api` (Kueue's names).
* adapters: :mod:`.sqlite_store` (durable history), :mod:`.runtime_state` (watch cursor,
  heartbeat), :mod:`.kube_actuator` (merge patches), :mod:`.kube_watch` (list and watch),
  :mod:`.leader` (Lease election), :mod:`.gate_detection` (PriorityBoost gate),
  :mod:`.config_file` (``sky-kueue.yaml``), :mod:`.logs` (JSON lines).
* entry points: :mod:`.live` (the running controller, ``sky-kueue controller run``) and
  :mod:`.skypilot_plugin` (the ``KUEUE_AGING`` recovery strategy inside SkyPilot).
"""
