"""What the sandbox needs to run a Deployment's pods as a cluster would.

* :mod:`.deployments` - the deployment and replicaset controllers (Deployment -> ReplicaSet ->
  pods, recreated when deleted);
* :mod:`.certificates` - the sandbox cluster's CA and the API server's serving certificate;
* :mod:`.service_accounts` - ServiceAccount tokens: issued per pod, mounted where
  ``load_incluster_config`` reads them, and authenticated by the API server.
"""
