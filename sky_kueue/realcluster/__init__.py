"""A real Kubernetes control plane and the real Kueue on this machine, for tests and demos.

Everything that talks to Kueue is judged here: kube-apiserver, kube-controller-manager and
kube-scheduler from ``k8s.io/kubernetes``, etcd from ``go.etcd.io/etcd``, Kueue's manager (its
CRDs, RBAC and webhook configuration from the same module) from ``sigs.k8s.io/kueue``, and
KWOK (``sigs.k8s.io/kwok``) for nodes on which pods reach Running without containers. Each is
built from its published Go module at the version pinned in
``sky_kueue/data/real-cluster-versions.env`` and cached outside the repository
(:mod:`.build`); :mod:`.cluster` runs them on 127.0.0.1 and tears them down.

Like :mod:`sky_kueue.sandbox`, this is an environment, not the product: production code never
imports it.
"""
