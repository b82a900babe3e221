"""SkyPilot 0.14.1's own launch path, up to its pods on the real cluster, in one process.

Run as ``python -m tests.real_kueue.skypilot_provision --task T --user U --cluster C
--plugin-config F --home H`` with ``KUBECONFIG`` set: the sky-kueue admin policy is applied
through SkyPilot's ``admin_policy_utils.apply``, SkyPilot's optimizer picks the Kubernetes
resources, ``backend_utils.write_cluster_config`` renders ``kubernetes-ray.yml.j2`` with the
policy's config, and SkyPilot's Kubernetes provisioner (``bootstrap_instances`` then
``run_instances``) creates the ServiceAccount and the pods, which Kueue's webhook then gates.
Nothing is hand-written: the pods carry exactly what SkyPilot renders. The rendered head pod's
metadata is printed as one JSON line (``RENDERED {...}``) before the pods are created;
``run_instances`` then waits for Kueue's admission, so a caller whose task stays pending stops
this process when it has seen enough.

HOME, ``SKYPILOT_GLOBAL_CONFIG`` and ``SKYPILOT_PROJECT_CONFIG`` point into ``--home`` (set
before SkyPilot is imported); the Kubernetes catalog is written offline there.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--plugin-config", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--context", required=True)
    args = parser.parse_args(argv)
    home = pathlib.Path(args.home)
    (home / "home").mkdir(parents=True, exist_ok=True)
    global_config = home / "global.yaml"
    global_config.write_text(
        f"admin_policy: sky_kueue.skypilot.policy.KueuePolicy\nkubernetes:\n  allowed_contexts: [{args.context}]\n"
    )
    project_config = home / "project.yaml"
    project_config.write_text("")
    os.environ.update(
        HOME=str(home / "home"),
        SKYPILOT_GLOBAL_CONFIG=str(global_config),
        SKYPILOT_PROJECT_CONFIG=str(project_config),
        SKY_KUEUE_CONFIG=args.plugin_config,
        SKYPILOT_USER=args.user,
    )
    import sky
    from sky import clouds, skypilot_config
    from sky.backends import backend_utils
    from sky.optimizer import Optimizer
    from sky.provision import common as provision_common
    from sky.provision.kubernetes import config as k8s_config
    from sky.provision.kubernetes import instance as k8s_instance
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils, common_utils

    from sky_kueue.controller.skypilot_plugin import register_strategy
    from sky_kueue.sandbox.skypilot_home import write_offline_catalog

    skypilot_config.reload_config()
    write_offline_catalog(home / "home")
    register_strategy()  # the API server's plugin (configs/plugins.yaml) registers KUEUE_AGING
    task = sky.Task.from_yaml(args.task)
    dag, config = admin_policy_utils.apply(task, request_name=AdminPolicyRequestName("jobs.launch"))
    with skypilot_config.replace_skypilot_config(config):
        Optimizer.optimize(dag, quiet=True)
        chosen = dag.tasks[0]
        best = chosen.best_resources
        if best is None or best.region is None:
            print(f"SkyPilot's optimizer placed {args.task} nowhere", file=sys.stderr)
            return 1
        region: str = best.region
        on_cloud = common_utils.make_cluster_name_on_cloud(args.cluster, max_length=63)
        written = backend_utils.write_cluster_config(
            best,
            chosen.num_nodes,
            "kubernetes-ray.yml.j2",
            args.cluster,
            pathlib.Path("/nonexistent/sky.whl"),  # only named in file mounts, never read here
            "0",
            clouds.Region(region),
            dryrun=True,
        )
        import yaml

        rendered = yaml.safe_load(pathlib.Path(written["ray"]).read_text())
        head_type = rendered["head_node_type"]
        node_config = rendered["available_node_types"][head_type]["node_config"]
        print("RENDERED " + json.dumps({"cluster_name_on_cloud": on_cloud, "metadata": node_config["metadata"]}))
        sys.stdout.flush()
        provision = provision_common.ProvisionConfig(
            provider_config=rendered["provider"],
            authentication_config=rendered["auth"],
            docker_config=rendered.get("docker", {}),
            node_config=node_config,
            count=chosen.num_nodes,
            tags={},
            resume_stopped_nodes=True,
            ports_to_open_on_launch=None,
        )
        provision = k8s_config.bootstrap_instances(region, on_cloud, provision)
        record = k8s_instance.run_instances(region, args.cluster, on_cloud, provision)
        print("PROVISIONED " + json.dumps({"head": record.head_instance_id, "created": record.created_instance_ids}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
