"""Starvation simulator: replay a trace under resubmission policies on the exact Kueue model.

Why: priority aging is only worth shipping if it ends starvation without hurting
high-priority work or utilisation, and that must be measured against SkyPilot's behaviour
today, side by side, on realistic traces (issue 7). One concept per module:

* :mod:`~sky_kueue.sim.traces`: jobs + cluster, and the ``--trace`` dispatcher;
  :mod:`~sky_kueue.sim.synthetic`, :mod:`~sky_kueue.sim.kueue_perf`,
  :mod:`~sky_kueue.sim.reclaim_storm`, :mod:`~sky_kueue.sim.dev_starvation` and
  :mod:`~sky_kueue.sim.csv_trace` are the sources;
* :mod:`~sky_kueue.sim.cluster`: teams as ClusterQueues, launch attempts as Workloads;
* :mod:`~sky_kueue.sim.relaunch`: SkyPilot's relaunch delay after a preemption;
* :mod:`~sky_kueue.sim.policies`: ``baseline`` and adapters to the controller's aging registry,
  ``+safe`` for the controller's safe-relaunch rule, whose input
  :mod:`~sky_kueue.sim.safe_hold` builds (would Kueue admit the relaunch without borrowing?),
  ``+team`` for that rule with its team-scoped nominal reservation (simulator only: measured
  not to pay, ``benchmarks/README.md``);
* :mod:`~sky_kueue.sim.events` and :mod:`~sky_kueue.sim.simulator`: the discrete-event loop;
* :mod:`~sky_kueue.sim.results`, :mod:`~sky_kueue.sim.metrics`, :mod:`~sky_kueue.sim.eta`:
  per-job records, per-class metrics and targets, ETA accuracy;
* :mod:`~sky_kueue.sim.compare`, :mod:`~sky_kueue.sim.report`, :mod:`~sky_kueue.sim.plots`:
  several policies in one run, and their presentation (``sky-kueue simulate``);
* :mod:`~sky_kueue.sim.sweep`: many independent runs (policies x traces x seeds) on every
  local core, with the serial run's results;
* :mod:`~sky_kueue.sim.multicluster`: the trace split over N clusters, placement by
  prediction vs SkyPilot's fixed order (``sky-kueue simulate --clusters N``, issue 16).

Everything except :mod:`~sky_kueue.sim.csv_trace` (reads a file), :mod:`~sky_kueue.sim.report`
(rich) and :mod:`~sky_kueue.sim.plots` (optional matplotlib) is pure and deterministic.
"""
