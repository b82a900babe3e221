"""The SkyPilot front door: admin policy, RESTful policy server, launch, team setup.

Layers (dependencies point inward; only ``policy`` and ``launch.submit`` import SkyPilot):

* Pure core - ``config`` (plugin config schema), ``task_yaml`` (task YAML form),
  ``demand`` (pod sizing), ``teams`` (team resolution), ``verdict`` (admission prediction),
  ``view`` (the ``ClusterView`` protocol, one view per context), ``cluster_discovery``
  (kubeconfig and contexts as kubectl and SkyPilot find them), ``placement`` (rank a team's
  clusters by predicted admission), ``burst`` (cloud-burst rule), ``decision``
  (label / reject / pass through), ``rewrite`` (apply a placement), ``engine`` (both).
* Adapters - ``config_view`` (plugin config only), ``cluster_view`` (the Kueue model, live
  per context through the queue mirror),
  ``config_cache`` (reload on change), ``wire`` (RestfulAdminPolicy format),
  ``policy`` (``KueuePolicy`` for SkyPilot), ``policy_server`` (HTTP), ``launch``.
* Team setup - ``setup_spec`` (compact spec) and ``setup_render`` (Kueue objects).
"""
