"""Containers for the sandbox's pods (opt-in: ``Sandbox(containers=True)``).

* :mod:`.recipe` - image recipes as data, and the registry that maps image references to them;
* :mod:`.images` - the image store: root filesystems built with debootstrap, cached;
* :mod:`.runtime` - per-pod namespaces, overlay root filesystems and container processes.
"""
